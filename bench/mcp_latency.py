"""MCP latency benchmark: `asap mcp` (`python -m server mcp`) driven by the MCP SDK's own stdio client.

  (a) tool-call latency of `check` and `estimate` on the demo configs (examples/*.yml), warm (after a first call of
      each tool on each config), N calls each: median, p95, max, measured from the client's side;
  (b) the cold start: from spawning the server to the answer of the first `tools/list` (initialize included),
      the median of fresh processes.

Baselines printed next to them: the same work through the CLI as a fresh process (`asap check --json`, `asap
estimate --json`: what an agent without MCP shells out to), and in-process through the function both call
(server.cli.commands.json_document), so the protocol's overhead is visible. The language server's comparable figure
is bench/lsp_latency.py's "didChange -> publishDiagnostics after the debounce" (an analysis of an open document).

    .venv/bin/python bench/mcp_latency.py [--calls N] [--cold N] [--cli N]

A benchmark, not a test: always exits 0; prints PASS/MISS against the targets (p95 < 50 ms warm, cold start < 3 s).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_P95_MS = 50.0
TARGET_COLD_S = 3.0
DEMOS = sorted(p for p in (ROOT / "examples").glob("*.yml") if p.name != "common.yml")


def server_params() -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "server", "mcp"], cwd=ROOT, env=dict(os.environ))


def p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


def stats_ms(xs: list[float]) -> str:
    ms = [x * 1e3 for x in xs]
    return f"median {statistics.median(ms):7.1f} ms  p95 {p95(ms):7.1f} ms  max {max(ms):7.1f} ms  (n={len(ms)})"


async def warm_calls(n: int) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = {}
    async with stdio_client(server_params()) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        for tool in ("check", "estimate"):
            for cfg in DEMOS:
                args: dict[str, Any] = {"path": str(cfg.relative_to(ROOT))}
                first = await s.call_tool(tool, args)  # the first call pays the imports and the caches
                times = []
                for _ in range(n):
                    t0 = time.perf_counter()
                    r = await s.call_tool(tool, args)
                    times.append(time.perf_counter() - t0)
                    assert r.is_error == first.is_error
                out[(tool, cfg.name)] = times
    return out


async def cold_start() -> float:
    t0 = time.perf_counter()
    async with stdio_client(server_params()) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        await s.list_tools()
        return time.perf_counter() - t0


def cli_fresh(tool: str, cfg: Path, n: int) -> list[float]:
    asap = Path(sys.executable).parent / "asap"
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([str(asap), tool, str(cfg), "--json"], cwd=ROOT, capture_output=True, check=False)
        times.append(time.perf_counter() - t0)
    return times


def in_process(tool: str, cfg: Path, n: int) -> list[float]:
    from server.cli import commands
    from server.cli.main import build_parser

    times = []
    for i in range(n + 1):
        t0 = time.perf_counter()
        args = build_parser().parse_args([tool, str(cfg)])
        commands.json_document(args.func, args)
        if i:  # the first pays the imports
            times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=50, help="warm calls per tool and config (default 50)")
    ap.add_argument("--cold", type=int, default=5, help="fresh server processes for the cold start (default 5)")
    ap.add_argument("--cli", type=int, default=5, help="fresh CLI processes per tool and config (default 5)")
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; configs: {', '.join(p.name for p in DEMOS)}")

    print("\n(a) tool calls over MCP (stdio, the SDK's client), warm:")
    warm = asyncio.run(warm_calls(a.calls))
    for (tool, cfg), xs in warm.items():
        print(f"  {tool:9s} {cfg:24s} {stats_ms(xs)}")
    worst = max(p95(xs) for xs in warm.values()) * 1e3
    verdict = "PASS" if worst < TARGET_P95_MS else "MISS"
    print(f"  worst p95 {worst:.1f} ms: {verdict} (target < {TARGET_P95_MS:.0f} ms)")

    print("\n  baseline, in process (server.cli.commands.json_document, what the tool runs):")
    for tool in ("check", "estimate"):
        for cfg in DEMOS:
            print(f"  {tool:9s} {cfg.name:24s} {stats_ms(in_process(tool, cfg, a.calls))}")
    print("\n  baseline, the CLI as a fresh process (asap TOOL CONFIG --json):")
    for tool in ("check", "estimate"):
        for cfg in DEMOS:
            print(f"  {tool:9s} {cfg.name:24s} {stats_ms(cli_fresh(tool, cfg, a.cli))}")

    print("\n(b) cold start: spawn -> initialize -> first tools/list answered:")
    colds = [asyncio.run(cold_start()) for _ in range(a.cold)]
    med = statistics.median(colds)
    print(
        f"  {' '.join(f'{c:.2f}' for c in colds)} s; median {med:.2f} s: "
        f"{'PASS' if med < TARGET_COLD_S else 'MISS'} (target < {TARGET_COLD_S:.0f} s)"
    )


if __name__ == "__main__":
    main()
