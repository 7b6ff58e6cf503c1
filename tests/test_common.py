"""server/common: the worker child processes (childproc), progress and cancellation, the store's blob caches.
Real child processes throughout; they report what they started through their own stdout, and the tests act
on those events, never on sleeps."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from server.common import childproc, store
from server.common.progress import CancelToken

# A child that starts a grandchild (which inherits its stdout and would keep the pipe open), reports both
# pids, then waits to be killed.
_FAMILY = textwrap.dedent(
    """
    import subprocess, sys, time
    from server.common.childproc import emit
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    emit(event="ready", pid=grandchild.pid)
    time.sleep(3600)
    """
)


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _env() -> dict[str, str]:
    return childproc.python_env(childproc.default_max_memory())


def _watch(pid: int) -> int:
    """A pidfd for a process that is not our child (opened while it runs, so its pid cannot be reused)."""
    if not hasattr(os, "pidfd_open"):
        pytest.skip("needs pidfd_open (Linux) to watch a grandchild die")
    return os.pidfd_open(pid)


def _dies(pidfd: int, within: float = 30.0) -> bool:
    """Whether the watched process ends (readable pidfd) within `within` seconds: an event, not a guess."""
    try:
        return bool(select.select([pidfd], [], [], within)[0])
    finally:
        os.close(pidfd)


def test_childproc_hands_over_events_and_lines_in_order() -> None:
    code = textwrap.dedent(
        """
        from server.common.childproc import emit
        emit(event="start", n=0)
        print("not json", flush=True)
        print("[1, 2]", flush=True)
        for i in range(1, 4):
            emit(event="step", n=i)
        emit(event="done")
        """
    )
    events: list[dict[str, Any]] = []
    lines: list[str] = []
    out = childproc.run(_python(code), env=_env(), on_event=events.append, on_line=lines.append)
    assert out == childproc.Outcome(returncode=0, timed_out=False, cancelled=False, stderr="")
    assert [(e["event"], e.get("n")) for e in events] == [
        ("start", 0),
        ("step", 1),
        ("step", 2),
        ("step", 3),
        ("done", None),
    ]  # plain text and JSON that is not an object are not events
    assert lines[1:3] == ["not json\n", "[1, 2]\n"] and len(lines) == 7


def test_childproc_timeout_kills_the_child_and_what_it_started() -> None:
    started: list[int] = []
    out = childproc.run(
        _python(_FAMILY), env=_env(), on_event=lambda e: started.append(_watch(e["pid"])), timeout_s=1.5
    )
    assert out.timed_out and not out.cancelled
    assert out.returncode == -9  # SIGKILL
    assert len(started) == 1 and _dies(started[0])  # the grandchild too (it held the stdout pipe open)


def test_childproc_cancel_kills_the_child_and_what_it_started() -> None:
    token = CancelToken()
    started: list[int] = []

    def on_event(ev: dict[str, Any]) -> None:
        started.append(_watch(ev["pid"]))
        token.cancel()

    out = childproc.run(_python(_FAMILY), env=_env(), on_event=on_event, cancel=token, timeout_s=600)
    assert out.cancelled and not out.timed_out and out.returncode == -9
    assert _dies(started[0])
    token.cancel()  # the kill registered with the token does nothing once the child was reaped


def test_childproc_cancelled_before_the_start_kills_at_once() -> None:
    token = CancelToken()
    token.cancel()
    out = childproc.run(_python("import time; time.sleep(3600)"), cancel=token)
    assert out.cancelled and out.returncode == -9


def test_childproc_a_failing_callback_kills_the_child() -> None:
    started: list[int] = []

    def on_event(ev: dict[str, Any]) -> None:
        started.append(_watch(ev["pid"]))
        raise RuntimeError("the caller gave up")

    with pytest.raises(RuntimeError, match="gave up"):
        childproc.run(_python(_FAMILY), env=_env(), on_event=on_event)
    assert _dies(started[0])


def test_childproc_reports_the_tail_of_a_crash() -> None:
    code = "import sys\nsys.stderr.write('noise ' * 2000)\nraise RuntimeError('the real reason')\n"
    out = childproc.run(_python(code))
    assert out.returncode == 1 and not out.timed_out
    assert len(out.stderr) == childproc.STDERR_TAIL
    assert out.stderr.strip().splitlines()[-1] == "RuntimeError: the real reason"
    whole = childproc.run(_python(code), stderr_tail=None)
    assert whole.stderr.startswith("noise noise") and len(whole.stderr) > 12000


def test_childproc_merges_stderr_into_the_lines_when_asked(tmp_path: Path) -> None:
    lines: list[str] = []
    code = "import os, sys\nprint(os.getcwd(), flush=True)\nsys.stderr.write('to stderr\\n')\nsys.exit(3)\n"
    out = childproc.run(_python(code), cwd=tmp_path, on_line=lines.append, merge_stderr=True)
    assert out.returncode == 3 and out.stderr == ""
    assert lines == [f"{tmp_path}\n", "to stderr\n"]


def test_childproc_a_missing_program_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no-such-python"):
        childproc.run([str(tmp_path / "no-such-python")])
    with pytest.raises(PermissionError):  # not executable: the exec's own errno comes back
        childproc.run([str(tmp_path)])


# A parent (an editor's server, a CLI) that runs a long child through childproc and passes its events on.
_PARENT = textwrap.dedent(
    """
    import json, sys
    from server.common import childproc
    child = "import os, time\\nfrom server.common.childproc import emit\\n"
    child += "emit(event='ready', pid=os.getpid())\\ntime.sleep(3600)"
    childproc.run(
        [sys.executable, "-c", child],
        env=childproc.python_env(childproc.default_max_memory()),
        on_event=lambda ev: print(json.dumps(ev), flush=True),
    )
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_childproc_child_dies_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen(_python(_PARENT), env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        ready = json.loads(parent.stdout.readline())
        child = _watch(ready["pid"])
        parent.kill()  # SIGKILL: the parent cannot kill its child itself
        parent.wait()
        assert _dies(child)  # the kernel killed it (it would sleep an hour)
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the trampoline is Linux's")
def test_childproc_trampoline_does_not_start_the_command_when_its_parent_is_already_gone(tmp_path: Path) -> None:
    # The parent dying between the fork and the prctl: the trampoline's parent is then another process.
    marker = tmp_path / "ran"
    rfd, wfd = os.pipe()
    try:
        cmd = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
        not_our_pid = str(os.getpid() + 1)
        tramp = [sys.executable, "-I", "-S", "-c", childproc._TRAMPOLINE, str(wfd), not_our_pid, *cmd]
        assert subprocess.run(tramp, pass_fds=(wfd,)).returncode == 125
        assert not marker.exists()
        # and with the right parent it runs the command
        tramp[6] = str(os.getpid())
        assert subprocess.run(tramp, pass_fds=(wfd,)).returncode == 0
        assert marker.exists()
    finally:
        os.close(rfd)
        os.close(wfd)


def test_childproc_worker_caps_its_own_memory() -> None:
    code = "from server.common.childproc import cap_memory\ncap_memory()\nbytearray(2 << 30)\n"
    out = childproc.run(_python(code), env=childproc.python_env(512 << 20))
    assert out.returncode == 1 and "MemoryError" in out.stderr
    assert (childproc.max_rss_mb() or 0) > 1  # this process: MiB, not KiB or bytes
    env = childproc.python_env(123, EXTRA="1")
    assert env[childproc.MEMORY_ENV] == "123" and env["EXTRA"] == "1"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(Path(__file__).resolve().parents[1])


def test_default_max_memory_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(childproc.MAX_MEMORY_ENV, str(5 << 30))
    assert childproc.default_max_memory() == 5 << 30
    monkeypatch.delenv(childproc.MAX_MEMORY_ENV)
    assert childproc.default_max_memory() >= 4 << 30


def test_cancel_token_runs_callbacks_once_and_late_ones_at_once() -> None:
    token = CancelToken()
    calls: list[str] = []
    token.on_cancel(lambda: calls.append("early"))
    token.cancel()
    token.cancel()
    token.on_cancel(lambda: calls.append("late"))
    assert token.cancelled and calls == ["early", "late"]


def test_blob_cache_round_trips_and_keeps_the_row_format(tmp_path: Path) -> None:
    db = store.connect(tmp_path / "s.sqlite")
    cache = store.BlobCache("profiles", "tools")
    assert cache.get(db, "k") is None  # no table yet
    cache.put(db, "k", {"hlo_stats": [1, 2]}, source="run")
    assert cache.get(db, "k") == {"hlo_stats": [1, 2]} and cache.get(db, "other") is None
    assert [c.name for c in db["profiles"].columns] == ["key", "source", "created", "tools"]
    cache.put(db, "k", {"hlo_stats": []}, source="run")
    assert cache.get(db, "k") == {"hlo_stats": []} and db["profiles"].count == 1
    assert cache.get(None, "k") is None
    cache.put(None, "k", {})  # no store: nothing kept, nothing raised
