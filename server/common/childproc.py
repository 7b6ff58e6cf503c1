"""ASAP's worker child processes, both sides: the parent spawns a child, reads its stdout line by line
(JSON events, one object per line, or plain text), stops it on a timeout or a CancelToken, and keeps a tail
of its stderr; the child caps its own memory and writes its events.

A child, not a thread, for the XProf conversion (server/profiles/xprof_worker.py), the reference compile
(server/compile/verify_worker.py) and MaxText's own train_compile (server/compile/verify_maxtext.py):
each takes seconds to minutes and gigabytes, must be cancellable (kill), bounded in memory (RLIMIT_AS,
from `ASAP_WORKER_MAX_MEMORY`, which the parent sets) and must not take the editor's server down when a
C++ library aborts.

The child runs in a session (process group) of its own, so a kill reaches whatever it started (a
compiler's helper processes) and not only the child; on Windows, which has neither, the child alone is
killed. Stderr goes to a temporary file, not a pipe: a child that logs a lot cannot block on a full pipe
while the parent reads its stdout.

The child dies with its parent (Linux): an editor's server or a CLI killed with SIGKILL (or crashing) cannot
reap its children, which would otherwise go on compiling for minutes with gigabytes. The child asks the kernel
for SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG). That must happen in the child between fork and
exec; `preexec_fn` is not safe in a threaded program (the editor's server is one), so the child is first a
small trampoline, `python -I -S -c _TRAMPOLINE`, which sets the signal, checks that its parent is still the
process that started it (it may have died before the prctl: the child then exits at once), and execs the
command. An exec failure comes back through a close-on-exec pipe as the OSError the parent raises, as with
a plain Popen. The signal is sent when the thread that started the child ends; `run` returns only after the
child ended, so that thread outlives it. What the child itself started is not covered (the kernel signals the
direct child only); on other systems the child is started directly, as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.common.progress import CancelToken

MEMORY_ENV = "ASAP_WORKER_MAX_MEMORY"  # bytes of address space the child may map (RLIMIT_AS); set by the parent
MAX_MEMORY_ENV = "ASAP_PROFILE_MAX_MEMORY"  # the user's override of the default below, in bytes
STDERR_TAIL = 4000  # characters of the child's stderr kept for messages
_POSIX = sys.platform != "win32"
_PDEATHSIG = sys.platform.startswith("linux")
# argv: [error pipe fd, the parent's pid, command...]. Exit status 125: the parent was gone before prctl.
_TRAMPOLINE = """\
import os, sys
fd, ppid, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
os.set_inheritable(fd, False)
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
except (ImportError, OSError, AttributeError):
    pass
if os.getppid() != ppid:
    os._exit(125)
try:
    os.execvp(argv[0], argv)
except OSError as e:
    os.write(fd, (str(e.errno or 0) + "\\n" + (e.strerror or str(e))).encode())
    os._exit(127)
"""


@dataclass
class Outcome:
    """How a child ended: its exit status (negative: killed by that signal), whether the timeout or the
    token stopped it, and the tail of its stderr."""

    returncode: int
    timed_out: bool = False
    cancelled: bool = False
    stderr: str = ""


def default_max_memory() -> int:
    """`ASAP_PROFILE_MAX_MEMORY` bytes, else half the machine's memory and at least 4 GiB."""
    env = os.environ.get(MAX_MEMORY_ENV)
    if env and env.isdigit():
        return int(env)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf on Windows
        total = 8 << 30
    return max(4 << 30, total // 2)


def python_env(max_memory: int, **extra: str) -> dict[str, str]:
    """The environment for a `python -m server....` worker: this checkout first on PYTHONPATH, the memory cap
    the child applies to itself, XProf's and XLA's C++ logging at warnings and above (unless the user set
    it), then `extra`."""
    root = str(Path(__file__).resolve().parents[2])
    return {
        **os.environ,
        "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
        MEMORY_ENV: str(max_memory),
        "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
        **extra,
    }


def run(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    on_line: Callable[[str], None] | None = None,
    timeout_s: float | None = None,
    cancel: CancelToken | None = None,
    merge_stderr: bool = False,
    stderr_tail: int | None = STDERR_TAIL,
) -> Outcome:
    """Run `cmd` to its end, handing each stdout line to `on_line` and each line that is a JSON object to
    `on_event` (other lines are skipped), in order, on this thread. After `timeout_s` seconds, or when
    `cancel` is cancelled (also before the start), the child's process group is killed (SIGKILL).
    `merge_stderr`: stderr goes to stdout's lines (MaxText's log is its progress); otherwise its last
    `stderr_tail` characters (all of it when None) come back in the outcome.

    Raises OSError when the command cannot be started. If a callback raises, the child is killed and
    reaped before the exception propagates."""
    lock = threading.Lock()
    finished = False
    timed_out = False

    with contextlib.ExitStack() as stack:
        err: Any = subprocess.STDOUT if merge_stderr else stack.enter_context(tempfile.TemporaryFile())
        proc = _start(list(cmd), stdout=subprocess.PIPE, stderr=err, env=env, cwd=cwd)

        def kill() -> None:
            with lock:
                if finished:  # reaped: its pid (and group id) may belong to another process by now
                    return
                if _POSIX:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()

        def expire() -> None:
            nonlocal timed_out
            with lock:
                if finished:
                    return
                timed_out = True
            kill()

        timer: threading.Timer | None = None
        try:
            if cancel is not None:
                cancel.on_cancel(kill)
            if timeout_s is not None:
                timer = threading.Timer(timeout_s, expire)
                timer.daemon = True
                timer.start()
            assert proc.stdout is not None
            with proc.stdout:
                for line in proc.stdout:
                    if on_line is not None:
                        on_line(line)
                    if on_event is not None:
                        ev = _event(line)
                        if ev is not None:
                            on_event(ev)
            returncode = proc.wait()
        except BaseException:
            kill()
            proc.wait()
            raise
        finally:
            if timer is not None:
                timer.cancel()
            with lock:
                finished = True
        tail = "" if merge_stderr else _tail(err, stderr_tail)
    return Outcome(returncode, timed_out, bool(cancel is not None and cancel.cancelled), tail)


def _start(
    cmd: list[str], *, stdout: Any, stderr: Any, env: Mapping[str, str] | None, cwd: Any
) -> subprocess.Popen[str]:
    """Popen `cmd` in a session of its own; on Linux through the trampoline, so that it dies with this process.
    Raises OSError when it cannot be started (also when the trampoline's exec of `cmd` failed)."""
    kwargs: dict[str, Any] = {
        "stdout": stdout,
        "stderr": stderr,
        "text": True,
        "errors": "replace",
        "env": dict(env) if env is not None else None,
        "cwd": cwd,
        "start_new_session": _POSIX,
    }
    if not _PDEATHSIG or not cmd:
        return subprocess.Popen(cmd, **kwargs)
    rfd, wfd = os.pipe()  # both close-on-exec; the trampoline inherits `wfd` (pass_fds) and sets it back
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, str(wfd), str(os.getpid()), *cmd],
            pass_fds=(wfd,),
            **kwargs,
        )
    except BaseException:
        os.close(rfd)
        raise
    finally:
        os.close(wfd)
    with open(rfd, "rb") as r:
        failure = r.read()  # EOF at the exec (close-on-exec), or the exec's errno and message
    if failure:
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        code, _, message = failure.decode(errors="replace").partition("\n")
        raise OSError(int(code) if code.isdigit() else 0, message, cmd[0])
    return proc


def _event(line: str) -> dict[str, Any] | None:
    try:
        ev = json.loads(line)
    except json.JSONDecodeError:
        return None
    return ev if isinstance(ev, dict) else None


def _tail(f: Any, chars: int | None) -> str:
    """The last `chars` characters of a binary file written as UTF-8 (all of it for None)."""
    f.seek(0, os.SEEK_END)
    size = f.tell()
    start = 0 if chars is None else max(0, size - 4 * chars)  # 4 bytes hold any one character
    f.seek(start)
    text = f.read().decode(errors="replace")
    return text if chars is None else text[-chars:]


# -- the child's side -------------------------------------------------------------------------------
def cap_memory() -> None:
    """Limit this process's address space (RLIMIT_AS) to what the parent put in ASAP_WORKER_MAX_MEMORY;
    a no-op without it, or where there is no `resource` module (Windows)."""
    limit = os.environ.get(MEMORY_ENV)
    if not (limit and limit.isdigit()):
        return
    try:
        import resource
    except ImportError:
        return
    resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))


def max_rss_mb() -> float | None:
    """This process's peak resident memory, for the child's "done" event (ru_maxrss / 1024: MiB on Linux,
    where ru_maxrss counts KiB); None where there is no `resource` module (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def emit(**event: Any) -> None:
    """One event to the parent: a JSON object on one stdout line, flushed at once."""
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()
