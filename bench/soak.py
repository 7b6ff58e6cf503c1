"""Soak (issue 25 item 7): the language server's and the agents' worker's memory through a day of edits.

One long-lived `python -m server` over stdio (the fuzz suite's client, tests/fuzzing/lsp_session.py) and N edits
across M configs: the examples and small configs of MaxText's models (tests/fuzzing/mutations.py `seeds`, unmutated).
The configs are visited in turn; a visit opens the config, edits it K times and closes it. Each edit changes a
comment line and `per_device_batch_size` (one incremental didChange), writes the file and sends didSave, and waits
for the agents' report of that version (their log line): every version is analysed again and priced by the
agents in their worker, none is a cache hit. The resident memory (RSS) of the server and of the worker is printed
at every thousand edits (or every N/5 in a short run); the target is growth under 10% after the first thousand
(the first checkpoint, once imports and warmed-up tables are in).

The baseline: the RSS before any edit (the server initialized, no worker yet), and with --against REV the same run
of the code at REV (extracted with `git archive`, same interpreter), printed beside it. The worker reports what it
is made of after the warm-up (server/agents/worker.py, ASAP_WORKER_REPORT): the resident memory each top-level
package's import added, and the rest (ASAP's modules and the analyses' data, the interpreter).

    .venv/bin/python bench/soak.py [--edits 5000] [--configs 50] [--per-visit 10] [--against REV]

A benchmark, not a test: always exits 0; prints PASS/MISS against the target.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types as lsp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.agents.worker import REPORT_ENV  # noqa: E402
from tests.fuzzing import lsp_session  # noqa: E402
from tests.fuzzing import mutations as mut  # noqa: E402

TARGET_GROWTH = 0.10  # RSS growth after the first checkpoint
AGENTS_S = 120.0  # an edit whose agents' report has not come within this is counted as missed
BATCHES = ("1", "2", "4", "0.5")  # per_device_batch_size, in turn: each version is priced anew


# -- processes ------------------------------------------------------------------------------------------------
def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def worker_pid(server_pid: int) -> int | None:
    """The agents' worker: the server's child started by multiprocessing's spawn (not its resource tracker)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if ppid != server_pid:
                continue
            cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ValueError, IndexError):
            continue
        if b"spawn_main" in cmd and b"resource_tracker" not in cmd:
            return int(stat.parent.name)
    return None


# -- the configs ----------------------------------------------------------------------------------------------
def configs(n: int, workdir: Path) -> list[Path]:
    """`n` configs under `workdir`: the examples, then small configs of MaxText models, each with a first line the
    edits rewrite and a per_device_batch_size they set."""
    shutil.copy(mut.EXAMPLES / mut.PARENT, workdir / mut.PARENT)
    out = []
    for i, (_, text) in enumerate(mut.seeds(random.Random(25), max(0, n - len(mut.example_seeds())))[:n]):
        if "per_device_batch_size:" not in text:
            text += "per_device_batch_size: 1\n"
        path = workdir / f"soak-{i:02d}.yml"
        path.write_text(f"# soak 0\n{text}", encoding="utf-8")
        out.append(path)
    return out


def edit(doc: lsp_session.Doc, n: int) -> None:
    """Edit `n`: the first line and per_device_batch_size's value, as one incremental change."""
    lines = doc.text.split("\n")
    row = next(i for i, line in enumerate(lines) if line.startswith("per_device_batch_size:"))
    old = lines[row]
    batch = f"per_device_batch_size: {BATCHES[n % len(BATCHES)]}"
    doc.change(
        [
            lsp.TextDocumentContentChangePartial(
                range=lsp.Range(lsp.Position(row, 0), lsp.Position(row, len(old))), text=batch
            ),
            lsp.TextDocumentContentChangePartial(
                range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, len(lines[0]))), text=f"# soak {n}"
            ),
        ]
    )


async def agents_done(client: lsp_session.FuzzClient, name: str, version: int, start: int) -> bool:
    """Whether the agents' report of `name` at `version` came (their log line) within AGENTS_S. The server
    publishes after it, so each publish is a moment to look."""
    want = f"agents, {name} (version {version})"
    deadline = time.monotonic() + AGENTS_S
    while time.monotonic() < deadline:
        if any(m.message.startswith(want) for m in client.logs[start:]):
            return True
        client.published.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(client.published.wait(), 1.0)
    return False


# -- one run --------------------------------------------------------------------------------------------------
@dataclass
class Run:
    label: str
    before: float | None = None  # server RSS before any edit
    rows: list[tuple[int, float | None, float | None, float]] = field(default_factory=list)  # edits, server, worker, s
    missed: int = 0
    worker_report: dict | None = None  # the worker's own report after the warm-up (None: not asked, or old code)
    errors: int = 0


def checkpoint(edits: int) -> int:
    """Every how many edits the RSS is read: a thousand, or a fifth of a short run."""
    return 1000 if edits >= 2000 else max(1, edits // 5)


async def soak(root: Path, label: str, args: argparse.Namespace, workdir: Path) -> Run:
    run = Run(label)
    every = checkpoint(args.edits)
    report = workdir / "worker.json"
    os.environ[REPORT_ENV] = str(report)
    client = lsp_session.FuzzClient()
    await client.launch(root)
    server = client._server
    pid = server.pid if server is not None else None
    run.before = rss_mb(pid)
    paths = configs(args.configs, workdir)
    started = time.perf_counter()
    n = 0
    try:
        while n < args.edits:
            for path in paths:
                if n >= args.edits or not client.alive():
                    break
                doc = lsp_session.Doc(client, path, path.read_text(encoding="utf-8"))
                for _ in range(min(args.per_visit, args.edits - n)):
                    n += 1
                    edit(doc, n)
                    path.write_text(doc.text, encoding="utf-8")
                    mark = len(client.logs)
                    client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(doc.uri)))
                    if not await agents_done(client, path.name, doc.version, mark):
                        run.missed += 1
                    if n % every == 0:
                        wpid = worker_pid(pid) if pid is not None else None
                        run.rows.append((n, rss_mb(pid), rss_mb(wpid), time.perf_counter() - started))
                        if n == every and report.exists():
                            run.worker_report = json.loads(report.read_text(encoding="utf-8"))
                        print(
                            f"  {label}: {n} edits, {_fmt(run.rows[-1][1])} / {_fmt(run.rows[-1][2])}", file=sys.stderr
                        )
                doc.close()
            if not client.alive():
                print(f"  {label}: the server exited after {n} edits", file=sys.stderr)
                break
    finally:
        run.errors = sum(m.type == lsp.MessageType.Error for m in client.logs)
        await client.close()
    return run


def _fmt(mb: float | None) -> str:
    return "-" if mb is None else f"{mb:.0f}"


def growth(run: Run, col: int) -> float | None:
    vals = [r[col] for r in run.rows if r[col] is not None]
    if len(vals) < 2:
        return None
    return (vals[-1] - vals[0]) / vals[0]


def print_run(run: Run, every_label: str) -> None:
    print(f"\n{run.label}: server RSS before any edit {_fmt(run.before)} MiB; missed agents' reports {run.missed}, "
          f"errors in the server's log {run.errors}")  # fmt: skip
    print(f"  {'edits':>6}  {'server MiB':>10}  {'worker MiB':>10}  {'elapsed s':>9}")
    for n, s, w, t in run.rows:
        print(f"  {n:>6}  {_fmt(s):>10}  {_fmt(w):>10}  {t:>9.0f}")
    for name, col in (("server", 1), ("worker", 2)):
        g = growth(run, col)
        if g is None:
            print(f"  {name}: too few checkpoints for a growth")
            continue
        verdict = "PASS" if g < TARGET_GROWTH else "MISS"
        print(f"  {name} growth after the first {every_label}: {g:+.1%} (target < {TARGET_GROWTH:.0%}) {verdict}")


def print_worker(rep: dict) -> None:
    imported = rep["imported_mb"]
    counted = sum(imported.values())
    print(f"\nthe worker after the warm-up ({rep['runs']} reports): RSS {rep['rss_mb']:.0f} MiB, {len(rep['modules'])} "
          f"modules; at its start {rep['start_mb']:.0f} MiB (the interpreter, multiprocessing); the first imports of "
          "each package's modules added (MiB, exclusive):")  # fmt: skip
    top = sorted(((k, v) for k, v in imported.items() if v >= 0.5), key=lambda kv: -kv[1])
    for i in range(0, len(top), 8):
        print("  " + ", ".join(f"{k} {v:.1f}" for k, v in top[i : i + 8]))
    rest = rep["rss_mb"] - rep["start_mb"] - counted
    print(f"  all imports {counted:.0f} MiB; the rest, what the runs keep (the embedding model too): {rest:.0f} MiB")
    loaded = [m for m in ("pygls", "lsprotocol", "cattrs", "jax", "ray", "anthropic") if m in rep["modules"]]
    print(f"  language-server and heavy libraries loaded: {', '.join(loaded) or 'none of pygls, lsprotocol, jax, ray'}")


def checkout(rev: str, into: Path) -> Path:
    """The code at `rev`, extracted (not a worktree: nothing in the repository changes)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edits", type=int, default=5000)
    ap.add_argument("--configs", type=int, default=50)
    ap.add_argument("--per-visit", type=int, default=10, help="edits between a config's open and close")
    ap.add_argument("--against", metavar="REV", help="also run the code at this git revision, the same way")
    args = ap.parse_args()
    every_label = f"{checkpoint(args.edits)} edits"
    print(f"soak: {args.edits} edits across {args.configs} configs, {args.per_visit} per visit; "
          f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="asap-soak-"))
    try:
        runs = []
        for label, root in [("ASAP", ROOT), *([(f"at {args.against}", None)] if args.against else [])]:
            where = work / label.replace(" ", "-")
            (where / "configs").mkdir(parents=True)
            os.environ["ASAP_CACHE_DIR"] = str(where / "cache")  # never the user's cache
            if root is None:
                root = checkout(args.against, where / "checkout")
            runs.append(asyncio.run(soak(root, label, args, where / "configs")))
        for run in runs:
            print_run(run, every_label)
        if runs[0].worker_report is not None:
            print_worker(runs[0].worker_report)
        print(f"\nload average {os.getloadavg()[0]:.2f}")
    except Exception as e:  # a benchmark reports, it does not fail the build
        print(f"soak aborted: {type(e).__name__}: {e}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
