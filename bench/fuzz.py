"""Fuzzing ASAP with hostile configs (issue 17 item 6): the long run of what tests/test_fuzz.py and
tests/lsp/test_fuzz_server.py do in a bounded way.

N mutated configs (tests/fuzzing/mutations.py: the examples and small configs of MaxText's models, with deep
nesting, merge keys, aliases on mesh values, alias bombs, NaN, infinities, subnormals, 4,301-digit integers,
strings and lists where numbers belong, NUL bytes in base_config, odd digits in `# asap:` directives, bytes that
are not UTF-8, U+2028 and friends in comments and values, CRLF/CR/LF with and without a final line break, unknown
and misspelt keys, and now and then a 60 KB, 1 MB or 50,000-key document) go through the command line functions in
process (`asap check` and `asap estimate`, with and without --json); K of them through one long-lived language server
over stdio (didOpen, code lens, hovers, code actions, every offered quick fix applied and re-checked, incremental
edits compared with a fresh open). Before either, the same on the unmutated seeds: the baseline.

    .venv/bin/python bench/fuzz.py [--n 10000] [--seed S] [--server-n K] [--large P] [--time-limit S]

Prints the counts (crashes, internal errors, bad exit statuses, --json that does not parse, tracebacks; and for
the server request errors, errors in its log, tracebacks on its stderr, fix violations, line-ending mismatches
(a fix whose lines end otherwise than the line they replace or follow), sync divergences, hangs),
hover and code action latency percentiles, and one reproducer per distinct failure, written under --out with the
command that replays it. A benchmark, not a test: always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fuzzing import cli, lsp_session  # noqa: E402
from tests.fuzzing import mutations as mut  # noqa: E402

AGENTS_WAIT_S = 20.0  # every 4th case with an estimate waits this long for the agents' proposals, and applies them
CLI_KINDS = ("crash", "internal error", "bad status", "bad json", "json nan", "traceback")


def pct(xs: list[float]) -> str:
    if not xs:
        return "n=0"
    s = sorted(x * 1000 for x in xs)
    p95 = s[min(len(s) - 1, max(0, round(0.95 * len(s)) - 1))]
    return f"n={len(s):>5}  p50={statistics.median(s):8.2f}  p95={p95:8.2f}  max={s[-1]:9.2f} ms"


class Reproducers:
    """The first case of each distinct failure, written to `out` (its bytes exactly) with how to replay it."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.seen: dict[str, tuple[Path, str, str, str | None]] = {}
        out.mkdir(parents=True, exist_ok=True)

    def add(self, where: str, signature: str, case: mut.Case, detail: str, argv: tuple[str, ...] = ()) -> None:
        """`argv`: the command line that failed (its config argument is replaced by the reproducer's path)."""
        key = f"{where} | {signature}"
        if key in self.seen:
            return
        path = self.out / f"{where}-{len(self.seen) + 1}.yml"
        path.write_bytes(case.data)
        replay = " ".join(str(path) if a.endswith(mut.FILE_NAME) else a for a in argv) if argv else None
        self.seen[key] = (path, case.describe(), detail, replay)

    def print(self) -> None:
        if not self.seen:
            print("no failures: nothing to reproduce")
            return
        shutil.copy(mut.EXAMPLES / mut.PARENT, self.out / mut.PARENT)
        print(f"{len(self.seen)} distinct failure(s); reproducers under {self.out}:")
        for key, (path, made, detail, replay) in self.seen.items():
            print(f"\n== {key}")
            print(f"   file {path} ({path.stat().st_size} bytes): {made}")
            head = path.read_bytes()[:300]
            print(f"   bytes: {head!r}{' ...' if path.stat().st_size > 300 else ''}")
            if replay:
                print(f"   replay: .venv/bin/asap {replay} --debug")
            else:
                print("   replay: open it in the editor, or through the language server as bench/fuzz.py does")
            print("   " + "\n   ".join(detail.strip().splitlines()[-25:]))


# -- the command line ---------------------------------------------------------------------------------------
def run_cli(cases: list[mut.Case], workdir: Path, repro: Reproducers | None, deadline: float) -> tuple[Counter, dict]:
    counts: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    times: list[float] = []
    slowest: list[tuple[float, str]] = []
    done = 0
    path = workdir / mut.FILE_NAME
    for case in cases:
        if time.perf_counter() > deadline:
            break
        path.write_bytes(case.data)
        problems, runs = cli.check(path)
        done += 1
        times.append(sum(r.seconds for r in runs))
        slowest.append((times[-1], case.describe()))
        slowest[:] = sorted(slowest, reverse=True)[:3]
        for r in runs:
            statuses[f"{' '.join(r.argv[:1] + r.argv[2:])}={r.status}"] += 1
        for p in problems:
            counts[p.kind] += 1
            if repro is not None:
                repro.add("cli", p.signature(), case, p.detail, p.argv)
        if done % 1000 == 0:
            print(f"  command line: {done} configs, {sum(counts.values())} problems", file=sys.stderr)
    return counts, {"done": done, "times": times, "statuses": statuses, "slowest": slowest}


# -- the language server ------------------------------------------------------------------------------------
async def run_server(
    cases: list[mut.Case],
    workdir: Path,
    seed: int,
    repro: Reproducers | None,
    deadline: float,
    heavy: bool,
    where: str,
) -> tuple[lsp_session.Tally, int]:
    tally = lsp_session.Tally()
    session = await lsp_session.start(tally, workdir, seed)
    restarts = 0
    try:
        for i, case in enumerate(cases):
            if time.perf_counter() > deadline:
                break
            if not session.client.alive():
                restarts += 1
                await session.client.close()
                session = await lsp_session.start(tally, workdir, seed + restarts)
            large = any(m in mut.LARGE for m in case.mutations)
            problems = await session.run(
                case,
                fixes=24 if heavy else 4,
                edits=0 if large else 4,
                hovers=3,
                resync=not large,
                agents=AGENTS_WAIT_S if not large and (i % 4 == 0 or not heavy) else 0.0,
            )
            for p in problems:
                if repro is not None:
                    repro.add(where, p.signature(), p.case, p.detail)
            if (i + 1) % 50 == 0:
                print(f"  server: {i + 1} cases, {sum(tally.counts.values())} problems", file=sys.stderr)
    finally:
        await session.client.close()
    return tally, restarts


def plural(kind: str) -> str:
    return kind + ("es" if kind.endswith(("ch", "sh", "s")) else "s")


def print_server(title: str, tally: lsp_session.Tally, restarts: int) -> None:
    print(
        f"{title}: {tally.cases} cases, {tally.fixes} quick fixes applied ({tally.proposals} of them proposals, "
        f"{tally.reports} agents' reports awaited), "
        f"{tally.edits} incremental edits"
    )
    print("  " + ", ".join(f"{plural(k)}: {tally.counts[k]}" for k in lsp_session.KINDS) + f", restarts: {restarts}")
    for what in ("hover", "codeAction", "codeLens", "codeAction/resolve", "publish"):
        print(f"  {what:<22} {pct(tally.latency.get(what, []))}")
    print("  codes published on open: " + ", ".join(f"{c} {n}" for c, n in sorted(tally.codes.items())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="mutated configs through the command line functions")
    ap.add_argument("--server-n", type=int, default=300, help="mutated configs through the language server")
    ap.add_argument("--seed", type=int, default=None, help="default: drawn, and printed")
    ap.add_argument("--large", type=float, default=0.005, help="share of cases with a 60 KB, 1 MB or 50k-key document")
    ap.add_argument("--time-limit", type=float, default=3600.0, help="stop each phase after this many seconds")
    ap.add_argument("--out", type=Path, default=ROOT / ".tmp" / "fuzz", help="where reproducers are written")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    try:
        run(args, seed)
    except Exception as e:  # a benchmark reports, it does not fail the build
        print(f"fuzz aborted: {type(e).__name__}: {e}")
    sys.exit(0)


def run(args: argparse.Namespace, seed: int) -> None:
    print(
        f"seed {seed}: replay with  .venv/bin/python bench/fuzz.py --seed {seed} --n {args.n} "
        f"--server-n {args.server_n} --large {args.large}"
    )
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    rng = random.Random(seed)
    pool = mut.seeds(rng)
    baseline = [mut.build(rng, s, []) for s in pool]
    cli_cases = [mut.random_case(rng, pool, args.large) for _ in range(args.n)]
    server_cases = [mut.random_case(rng, pool, args.large * 4) for _ in range(args.server_n)]
    if args.out.exists():
        shutil.rmtree(args.out)
    repro = Reproducers(args.out)
    work = Path(tempfile.mkdtemp(prefix="asap-fuzz-"))
    os.environ["ASAP_CACHE_DIR"] = str(work / "cache")  # the agents' experiment log, never the user's cache
    shutil.copy(mut.EXAMPLES / mut.PARENT, work / mut.PARENT)
    try:
        started = time.perf_counter()
        base_counts, base = run_cli(baseline, work, None, float("inf"))
        print(
            f"\ncommand line, baseline ({base['done']} unmutated seeds x {len(cli.COMMANDS)} commands): "
            + ", ".join(f"{k}: {base_counts[k]}" for k in CLI_KINDS)
        )
        print(f"  per config (4 commands)   {pct(base['times'])}")
        counts, res = run_cli(cli_cases, work, repro, time.perf_counter() + args.time_limit)
        took = time.perf_counter() - started
        print(
            f"command line, mutated ({res['done']} of {len(cli_cases)} configs x {len(cli.COMMANDS)} commands, "
            f"{took:.0f} s): " + ", ".join(f"{k}: {counts[k]}" for k in CLI_KINDS)
        )
        print(f"  per config (4 commands)   {pct(res['times'])}")
        print("  exit statuses: " + ", ".join(f"{k}: {v}" for k, v in sorted(res["statuses"].items())))
        print("  slowest: " + "; ".join(f"{t * 1000:.0f} ms {made}" for t, made in res["slowest"]))

        started = time.perf_counter()
        (work / "server").mkdir()
        server_dir = work / "server"
        tally, restarts = asyncio.run(run_server(baseline, server_dir, seed, repro, float("inf"), False, "baseline"))
        print()
        print_server(f"language server, baseline ({time.perf_counter() - started:.0f} s)", tally, restarts)
        if args.server_n:
            started = time.perf_counter()
            deadline = time.perf_counter() + args.time_limit
            tally, restarts = asyncio.run(run_server(server_cases, server_dir, seed, repro, deadline, True, "server"))
            print_server(f"language server, mutated ({time.perf_counter() - started:.0f} s)", tally, restarts)
        print(f"load average {os.getloadavg()[0]:.2f}")
        print()
        repro.print()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
