"""A real local Ray cluster for the tests: a head node and one worker node (`ray start --block`, one CPU each) on
127.0.0.1 with their own temporary directory, stopped by PID (SIGTERM to each `ray start --block`, which stops its
node's processes; then SIGKILL to what it left in its session). Shared by the Ray tests (tests/test_ray_sweep.py,
tests/lsp/test_verify_on_ray_lsp.py, tests/lsp/test_ray_head_lost_lsp.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import servers

RAY = Path(sys.executable).parent / "ray"
DEADLINE_S = 60.0


def available() -> bool:
    return shutil.which(str(RAY)) is not None


# A module's `pytestmark`: without Ray the tests skip when run by hand, and fail under `make test`
# (ASAP_REQUIRE_SERVERS=1, tests/support/servers.py), which installs it with the team extra.
needs_ray = pytest.mark.skipif(
    not available() and not servers.required(), reason="Ray is not installed (pip install '.[team]')"
)


def alive(pid: int) -> bool:
    """Whether process `pid` runs (exists and is not a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def parent(pid: int) -> int:
    """The parent process id of `pid` (a compile's parent is the Ray worker running its task)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def cmdline(pid: int) -> str:
    """The process's command line without the temporary directory each compile gets; "" once it has ended."""
    try:
        line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
    return re.sub(r"jax_cache_dir=\S+", "", line)


def current_mesh_compile(pids: list[int]) -> int | None:
    """Of the stand-in compiles `pids`, the running one of the config's own mesh (no mesh on its command line)."""
    return next((p for p in pids if alive(p) and " ici_fsdp_parallelism=" not in cmdline(p)), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def until(cond: Callable[[], object], what: str, detail: Callable[[], str] | None = None) -> None:
    """Wait for a condition another process brings about (a file written, a process gone), up to a deadline."""
    end = time.monotonic() + DEADLINE_S
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}" + (f": {detail()}" if detail else ""))
        time.sleep(0.05)


async def until_async(cond: Callable[[], object], what: str) -> None:
    """`until` for an async test: polls without blocking the event loop, so the test's LSP client goes on answering
    the server (a `window/workDoneProgress/create` request the server waits on before it starts a job)."""
    end = time.monotonic() + DEADLINE_S
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def start_node(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """`ray start ... --block` as a child; returns once the node is up (its 'block forever' line is written)."""
    out = log.open("wb")
    proc = subprocess.Popen(
        [str(RAY), "start", *args, "--block"],
        stdout=out,
        stderr=subprocess.STDOUT,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
        start_new_session=True,
    )
    until(lambda: b"block forever" in log.read_bytes() or proc.poll() is not None, f"ray start ({log})")
    assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
    return proc


def stop_nodes(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in reversed(procs):  # SIGTERM: `ray start --block` stops the node's processes
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        with contextlib.suppress(ProcessLookupError):  # what it left behind in its session, if anything
            os.killpg(p.pid, signal.SIGKILL)


@contextlib.contextmanager
def ray_cluster(nodes: list[subprocess.Popen[bytes]] | None = None, cpus: int = 1) -> Iterator[str]:
    """A head node and one worker node (`cpus` logical CPUs each, one by default) on 127.0.0.1 for the block; its
    address HOST:PORT. `nodes`, when given, receives their `ray start --block` processes (the head's first), each its
    own process group."""
    port = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths live under it
    common = ["--num-cpus", str(cpus), "--node-ip-address", "127.0.0.1", "--temp-dir", str(tmp / "r")]
    procs = [start_node(["--head", "--port", str(port), "--include-dashboard=false", *common], tmp / "head.log")]
    try:
        procs.append(start_node(["--address", f"127.0.0.1:{port}", *common], tmp / "worker.log"))
        if nodes is not None:
            nodes.extend(procs)
        yield f"127.0.0.1:{port}"
    finally:
        stop_nodes(procs)
        shutil.rmtree(tmp, ignore_errors=True)
