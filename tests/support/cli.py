"""Running `asap` as a user does: a child process (`python -m server.cli.main`) from the repository root, and the
command prefix under which file permissions hold for tests that need an unwritable directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_asap(
    *args: str | Path, env: dict[str, str] | None = None, prefix: list[str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "server.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env=env,
    )


def unprivileged_prefix() -> list[str] | None:
    """A command prefix under which file permissions hold (root ignores them): none when not root, else a user
    namespace in which this user is an ordinary one (owner bits apply to its own files); None when neither."""
    if os.geteuid() != 0:
        return []
    prefix = ["unshare", "--user", "--map-user=1000", "--map-group=1000"]
    try:
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return prefix if probe.returncode == 0 else None
