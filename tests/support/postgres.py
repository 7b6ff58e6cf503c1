"""A real PostgreSQL server for tests, from the machine's binaries (`initdb`, `pg_ctl`, `postgres` on PATH or in
/usr/lib/postgresql/*/bin), in a temporary directory, listening on 127.0.0.1 only, with a password (scram), and
stopped by its postmaster's PID.

initdb and postgres refuse to run as root. As root the server runs inside a user namespace in which this user is
uid 1000 (`unshare --user --map-user=1000 --map-group=1000`, tests/support/cli.py `unprivileged_prefix`): no other
account is needed, the data directory stays owned by the caller, and the server is reachable over TCP as usual.
Without PostgreSQL's binaries, or when neither works, `start` raises `Unavailable` (the tests skip with the reason).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.cli import unprivileged_prefix

USER = "asap"


class Unavailable(RuntimeError):
    """PostgreSQL cannot be started here (the message says why)."""


def _bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for cand in sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True):
        return cand
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Postgres:
    """A running server: `url(db)` connects to database `db` as USER with the password."""

    root: Path
    port: int
    password: str
    prefix: list[str]
    pg_ctl: str

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://{USER}:{self.password}@127.0.0.1:{self.port}/{db}"

    def pid(self) -> int | None:
        """The postmaster's PID (the first line of postmaster.pid), None when it is not running."""
        try:
            return int((self.data / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        """Stop the server: `pg_ctl stop -m fast` (it waits for the postmaster to exit), else SIGTERM its PID."""
        pid = self.pid()
        if pid is None:
            return
        r = subprocess.run(
            [*self.prefix, self.pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
        if r.returncode != 0 and self.pid() == pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def start(root: Path, password: str = "s3cret-Pa55") -> Postgres:
    """initdb a cluster in `root/data` and start it on a free port of 127.0.0.1 (socket directory `root`)."""
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise Unavailable("PostgreSQL's initdb/pg_ctl are not installed (apt-get install postgresql)")
    prefix = unprivileged_prefix()
    if prefix is None:
        raise Unavailable("running as root and `unshare --user` is not permitted: initdb refuses root")
    root.mkdir(parents=True, exist_ok=True)
    pwfile = root / "pw"
    pwfile.write_text(password + "\n")
    data = root / "data"
    r = subprocess.run(
        [
            *prefix,
            initdb,
            "-D",
            str(data),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "--auth-host=scram-sha-256",
            "--auth-local=trust",
            "--no-sync",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if r.returncode != 0:
        raise Unavailable(f"initdb failed: {r.stderr.strip()[-500:]}")
    port = _free_port()
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60"
    r = subprocess.run(
        [*prefix, pg_ctl, "-D", str(data), "-l", str(root / "server.log"), "-w", "-t", "60", "-o", opts, "start"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if r.returncode != 0:
        log = (root / "server.log").read_text(errors="replace")[-800:] if (root / "server.log").exists() else ""
        raise Unavailable(f"pg_ctl start failed: {r.stderr.strip()[-300:]} {log}")
    return Postgres(root=root, port=port, password=password, prefix=prefix, pg_ctl=pg_ctl)
