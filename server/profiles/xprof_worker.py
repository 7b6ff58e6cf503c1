"""Runs XProf's conversion in a child process: `python -m server.profiles.xprof_worker OUT FILE...`.

A child, not a thread, because a 1 GB profile must be cancellable (kill), bounded in memory
(RLIMIT_AS, set by the parent) and must not take the editor's server down if XProf's C++ fails
on a corrupt file. Progress goes to stdout as one JSON object per line; each tool's output is
written to OUT/<tool>.json.

XProf writes cache files next to the profile it converts (`*.op_stats*.pb`, `.cached_tools.json`),
so the child converts symlinks placed in a private work directory: the user's profile directory is
never written. Within that directory XProf's own cache is used, so the second and later tools
reuse the first one's conversion.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from server.common.childproc import cap_memory, emit, max_rss_mb


def main(argv: list[str]) -> int:
    cap_memory()
    out = Path(argv[0])
    tools = argv[1].split(",")
    files = [Path(a) for a in argv[2:]]
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    linked = []
    for f in files:
        link = work / f.name
        if not link.exists():
            os.symlink(f.resolve(), link)
        linked.append(link)
    emit(event="start", files=len(files), bytes=sum(f.stat().st_size for f in files))
    from xprof.convert import raw_to_tool_data

    done = []
    for i, tool in enumerate(tools):
        emit(event="tool", tool=tool, index=i, of=len(tools))
        try:
            data, _ = raw_to_tool_data.xspace_to_tool_data([str(p) for p in linked], tool, {"use_saved_result": True})
        except Exception as e:
            emit(event="error", stage=tool, message=f"{type(e).__name__}: {e}")
            return 3
        if data is None:
            continue
        raw = data if isinstance(data, (bytes, bytearray)) else str(data).encode()
        (out / f"{tool}.json").write_bytes(raw)
        done.append(tool)
    if not _has_device_ops(out):
        # XProf reports nothing for files it cannot parse; say which file is broken.
        from xprof.profile_data import ProfileData

        for f in linked:
            name = f.name
            if f.stat().st_size == 0:
                emit(event="error", stage="read", message=f"{name} is empty (0 bytes): the capture did not finish")
                return 3
            try:
                planes = ProfileData.from_file(str(f)).planes
            except Exception as e:
                emit(
                    event="error",
                    stage="read",
                    message=f"{name} is not a readable XSpace (corrupt or truncated): {e}",
                )
                return 3
            if not any(True for _ in planes):
                emit(event="error", stage="read", message=f"{name} holds no planes: nothing was captured")
                return 3
        # No device plane (a CPU-only profile): XProf's device tools are empty; read the host trace.
        from server.profiles import host_trace

        emit(event="tool", tool="host_trace", index=len(tools), of=len(tools) + 1)
        try:
            summary = host_trace.summarize([str(p) for p in linked])
        except Exception as e:
            emit(event="error", stage="host trace", message=f"{type(e).__name__}: {e}")
            return 3
        (out / "host_trace.json").write_text(json.dumps(summary))
        done.append("host_trace")
    emit(event="done", tools=done, max_rss_mb=max_rss_mb())
    return 0


def _has_device_ops(out: Path) -> bool:
    """Whether XProf found device ops: hlo_stats has rows."""
    f = out / "hlo_stats.json"
    if not f.exists():
        return False
    try:
        data = json.loads(f.read_bytes())
    except ValueError:
        return False
    items = data if isinstance(data, list) else [data]
    return any(isinstance(t, dict) and t.get("rows") for t in items)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
