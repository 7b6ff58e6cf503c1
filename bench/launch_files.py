"""ASAP's launch-file reader (server/launch/) over every real launch file of two published trees (issue 28's targets),
beside a line-based grep.

    .venv/bin/python bench/launch_files.py [--tpu-recipes GITDIR] [--maxtext GITDIR] [--repeat 3] [--examples 3]
        [--keep DIR] [--files]

The corpus, read from the git directories at HEAD (`git cat-file --batch`, never a work tree; --tpu-recipes defaults
to $ASAP_TPU_RECIPES_GIT or /work/.mirror/AI-Hypercomputer+tpu-recipes/repo, --maxtext to $ASAP_MAXTEXT_GIT or
/work/.mirror/AI-Hypercomputer+maxtext/repo):
- AI-Hypercomputer/tpu-recipes: every *.sh, *.yaml, *.yml and *.md under training/, and any such file elsewhere whose
  text mentions MaxText (case-insensitive) or benchmark_runner;
- AI-Hypercomputer/maxtext: every *.sh and *.md, anywhere (benchmarks/, tests/end_to_end/, scripts/, docs/,
  src/maxtext/...), whose text holds a MaxText train or compile invocation (the grep pattern below, or
  `trainers.pre_train.train`).
Each file is written to a temporary directory at its path in its repository, beside MaxText's src/maxtext/configs/
and benchmarks/ (written, not scanned), and analysed with that MaxText tree as the checkout (maxtext_path): the
recipes say to run from MaxText's root, so a config argument and a benchmark recipe resolve where they would.

Printed:
- files scanned and runs found, against a trivial baseline: the lines matching
  `MaxText.train|maxtext.train|train_compile|benchmark_runner` (grep -E, one count per line); then where the two
  differ and why: matching lines that are comments, Markdown prose, code blocks of another language, or a mention
  that runs nothing; several runs on one line; one run over several matching lines (continuations, a variable's
  assignment expanded into the command); runs on no matching line (the module named in a variable);
- per kind (train, xpk, benchmark_runner): runs, and those with a resolved slice, a model, an estimate, flags, and
  a priced key whose value is known only at run time (symbolic);
- every ERROR finding, grouped by code with counts and examples (file:line: message), each group classified
  (CLASSES below: a real problem of the file, the cost model's estimate, or a false positive left, with why);
- per-file milliseconds (median, p95, max) of analyze_launch and of the reading alone (runs_in), beside the grep's;
  the best of --repeat passes per file, after one warm pass (the findings pass: catalogs loaded, parsers built).

Skips with a message, exit 0, when git or either git directory is absent (the mirrors are not in CI). A benchmark,
not a test: always exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.common.findings import Severity  # noqa: E402
from server.launch.analysis import RunAnalysis, analyze_launch  # noqa: E402
from server.launch.located import NOWHERE  # noqa: E402
from server.launch.project import PRICED_KEYS, Positions  # noqa: E402
from server.launch.runs import runs_in  # noqa: E402
from server.launch.sources import file_kind  # noqa: E402

TPU_RECIPES_GIT = Path(os.environ.get("ASAP_TPU_RECIPES_GIT", "/work/.mirror/AI-Hypercomputer+tpu-recipes/repo"))
MAXTEXT_GIT = Path(os.environ.get("ASAP_MAXTEXT_GIT", "/work/.mirror/AI-Hypercomputer+maxtext/repo"))

# The baseline, as `grep -cE` would count it (the dots match any character, as grep's do).
GREP = re.compile(r"MaxText.train|maxtext.train|train_compile|benchmark_runner")
_MAXTEXT_SELECT = re.compile(GREP.pattern + r"|trainers.pre_train.train")
_RECIPES_SELECT = re.compile(r"maxtext|benchmark_runner", re.I)
_LAUNCH_SUFFIXES = (".sh", ".yaml", ".yml", ".md")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
_SHELL_FENCES = frozenset({"", "bash", "sh", "shell", "console", "zsh", "shellscript", "shell-session"})
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_TRAILING_COMMENT = re.compile(r"\s#\s.*$")
_POST_TRAIN = re.compile(r"trainers[./]post_train|train_(?:sft|rl|dpo|distill)")
_HELP = re.compile(r"\s--help(?:short|full|xml)?\b")
_LAUNCHERS = re.compile(r"\bgcluster\b|multihost_(?:runner|job)\.py")
_SCRIPT_RUN = re.compile(r"(?:^|[\s;&|(])(?:bash|sh|exec bash|source|\.)\s+\S+\.sh\b|run_tutorial\s")
_ASSIGNMENT = re.compile(r"^\s*(?:export\s+|local\s+|readonly\s+)?[A-Za-z_]\w*=")

# Each ERROR finding on these published files, classified after reading the file and MaxText's code at the mirror's
# commit: (code, pattern searched in "file:line: message", verdict). The first that matches wins.
CLASSES: tuple[tuple[str, str, str], ...] = (
    (
        "ASAP121",
        r"Does not fit in HBM",
        "cost model, listed not fixed (server/perf/memory.py): the recipe published a run, so it fits; the run is "
        "read faithfully (the same keys as the equivalent YAML config)",
    ),
    (
        "ASAP012",
        r"'enable_checkpointing:'|'False' is not key=value",
        "real problem of the file: `enable_checkpointing: False` (YAML's colon) on the command line is two "
        "arguments that are not key=value; OmegaConf.from_cli reads them as keys with no value",
    ),
    (
        "ASAP002",
        r"gpu/models/llama3-8b\.yml",
        "real problem of the file: MaxText e591f30cb has gpu/models/llama3_8b.yml (underscore), not llama3-8b.yml",
    ),
    (
        "ASAP005",
        r"'a3' is not a TPU slice",
        "false positive left: compile_topology=a3 is MaxText's A3 GPU topology (accelerator_to_spec_map.py); the "
        "slice check is the YAML configs' own (server/config), not the launch reader's",
    ),
)


@dataclass
class SourceFile:
    repo: str  # "tpu-recipes" or "maxtext"
    rel: str  # its path in the repository
    path: Path  # where it is written for the analysis
    text: str


@dataclass
class FileResult:
    f: SourceFile
    runs: list[RunAnalysis]
    grep_lines: list[int]  # 0-based lines matching GREP
    run_lines: list[set[int]] = field(default_factory=list)  # per run: the lines its command's characters are on


# -- the corpus -----------------------------------------------------------------------------------------------------
def _git(gitdir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(gitdir), *args], capture_output=True, text=True, check=True).stdout


def _blobs(gitdir: Path, paths: list[str]) -> dict[str, str]:
    """The text of each path at HEAD (one `git cat-file --batch`); an unreadable blob (a Git LFS file) is left out."""
    if not paths:
        return {}
    query = "".join(f"HEAD:{p}\n" for p in paths).encode()
    out = subprocess.run(["git", "--git-dir", str(gitdir), "cat-file", "--batch"], input=query, capture_output=True)
    data, i, got = out.stdout, 0, {}
    for p in paths:
        nl = data.index(b"\n", i)
        header = data[i:nl].split()
        i = nl + 1
        if len(header) != 3 or header[1] != b"blob":
            continue
        size = int(header[2])
        with contextlib.suppress(UnicodeDecodeError):
            got[p] = data[i : i + size].decode("utf-8")
        i += size + 1
    return got


def corpus(recipes_git: Path, maxtext_git: Path, into: Path) -> tuple[list[SourceFile], Path, dict[str, str]]:
    """The launch files of both trees, written under `into` at their paths, and MaxText's tree (configs, benchmarks)
    beside them; the MaxText root written; each repository's HEAD commit."""
    files: list[SourceFile] = []
    commits = {}
    mt_root = into / "maxtext"
    for repo, gitdir in (("tpu-recipes", recipes_git), ("maxtext", maxtext_git)):
        commits[repo] = _git(gitdir, "rev-parse", "--short=9", "HEAD").strip()
        names = _git(gitdir, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
        launch = [n for n in names if n.lower().endswith(_LAUNCH_SUFFIXES)]
        if repo == "maxtext":
            launch = [n for n in launch if n.endswith((".sh", ".md"))]
            tree = [n for n in names if n.startswith(("src/maxtext/configs/", "benchmarks/"))]
        else:
            tree = []
        texts = _blobs(gitdir, sorted(set(launch) | set(tree)))
        root = into / repo
        for rel, text in texts.items():
            dest = root / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
        for rel in launch:
            if rel not in texts:
                continue
            text = texts[rel]
            if repo == "tpu-recipes":
                chosen = rel.startswith("training/") or bool(_RECIPES_SELECT.search(text))
            else:
                chosen = bool(_MAXTEXT_SELECT.search(text))
            if chosen:
                files.append(SourceFile(repo, rel, root / rel, text))
    return files, mt_root, commits


# -- reading and comparing ------------------------------------------------------------------------------------------
def grep_lines(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines()) if GREP.search(line)]


def run_lines(ra: RunAnalysis, positions: Positions) -> set[int]:
    """The lines the run is written on: those of its command's characters and of its config, overrides and recipe
    (an expanded variable's characters are on the lines of its assignment), not the range between them."""
    run = ra.run
    locs = [run.source, *(o.token for o in run.overrides if o.written)]
    locs += [s.loc for s in (run.recipe,) if s is not None] + ([run.config] if run.config is not None else [])
    lines = _LINE_BREAK.split(positions.text)  # as Positions counts lines
    return {n for loc in locs for o in loc.offsets if o != NOWHERE for n in _logical(lines, positions.at(o)[0])}


def _logical(lines: list[str], i: int) -> range:
    """The lines of the logical line holding line i: those joined to it by a backslash at their end."""
    a = i
    while a > 0 and lines[a - 1].rstrip().endswith("\\"):
        a -= 1
    b = i
    while b < len(lines) - 1 and lines[b].rstrip().endswith("\\"):
        b += 1
    return range(a, b + 1)


def _fences(text: str) -> list[str | None]:
    """Per line of a Markdown file: the language of the fenced block it is inside (None: prose, or a fence line)."""
    out: list[str | None] = []
    inside: tuple[str, str] | None = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if inside is None and m:
            inside = (m.group(1)[0] * len(m.group(1)), m.group(2).lower())
            out.append(None)
        elif inside is not None and line.strip().startswith(inside[0]) and not line.strip().strip(inside[0][0]):
            inside = None
            out.append(None)
        else:
            out.append(inside[1] if inside is not None else None)
    return out


def why_unmatched(f: SourceFile, line: int, fences: list[str | None] | None) -> str:
    """Why a matching line holds no run ASAP found."""
    lines = f.text.splitlines()
    text = lines[line]
    whole = " ".join(lines[n] for n in _logical(lines, line))  # the command the line is part of
    if fences is not None:
        lang = fences[line] if line < len(fences) else None
        if lang is None:
            return "Markdown prose (outside a code block)"
        if lang not in _SHELL_FENCES:
            return f"a code block of another language ({lang})"
    if text.lstrip().startswith("#") or not GREP.search(_TRAILING_COMMENT.sub("", text)):
        return "a comment (a commented-out command, or the words after a command's #)"
    if _POST_TRAIN.search(text):
        return "a post-training trainer (SFT, RL, DPO, distillation): not a pre-training run, not read"
    if _HELP.search(text):
        return "a help request (--help: absl prints the flags and exits)"
    if _LAUNCHERS.search(whole):
        return "a launcher ASAP does not follow (Cluster Toolkit's gcluster, MaxText's multihost_runner/job)"
    if _ASSIGNMENT.match(text):
        return "a variable's value run through something ASAP does not follow (a bash array, gcluster) or not at all"
    if _SCRIPT_RUN.search(text):
        return "another script run by its path (its runs are counted in that script)"
    return "a mention that runs nothing (echo, a test, a pattern)"


@dataclass
class Reconciled:
    grep: int = 0
    runs: int = 0
    matched_lines: int = 0
    matched_runs: int = 0
    many_lines: int = 0  # matching lines beyond one per run, in groups of runs and lines linked by a shared line
    many_runs: int = 0  # runs beyond one per matching line, likewise
    grep_only: Counter[str] = field(default_factory=Counter)
    asap_only: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))


def _linked(run_lines: list[set[int]], grep: set[int]) -> list[tuple[list[int], int]]:
    """The connected groups of the graph linking each matching line to every run written on it: (the group's
    matching lines, sorted; its number of runs), for groups holding both."""
    parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(x: tuple[str, int]) -> tuple[str, int]:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for i, lines in enumerate(run_lines):
        for g in lines & grep:
            parent[find(("run", i))] = find(("line", g))
    groups: dict[tuple[str, int], list[tuple[str, int]]] = defaultdict(list)
    for node in list(parent):
        groups[find(node)].append(node)
    out: list[tuple[list[int], int]] = []
    for members in groups.values():
        group_lines = sorted(n for k, n in members if k == "line")
        runs = sum(1 for k, _ in members if k == "run")
        if group_lines and runs:
            out.append((group_lines, runs))
    return out


def reconcile(results: list[FileResult], n_examples: int) -> Reconciled:
    rc = Reconciled()

    def example(kind: str, f: SourceFile, line: int) -> None:
        if len(rc.examples[kind]) < n_examples:
            rc.examples[kind].append(f"{f.repo}/{f.rel}:{line + 1}: {f.text.splitlines()[line].strip()[:110]}")

    for r in results:
        rc.grep += len(r.grep_lines)
        rc.runs += len(r.runs)
        gset = set(r.grep_lines)
        fences = _fences(r.f.text) if file_kind(r.f.path, r.f.text) == "markdown" else None
        for lines, runs in _linked(r.run_lines, gset):
            rc.matched_lines += len(lines)
            rc.matched_runs += runs
            if len(lines) > runs:
                rc.many_lines += len(lines) - runs
                example("one run over several matching lines", r.f, lines[1])
            elif runs > len(lines):
                rc.many_runs += runs - len(lines)
                example("several runs on one matching line", r.f, lines[0])
        linked_lines = {g for ls in r.run_lines for g in ls & gset}
        for g in r.grep_lines:
            if g not in linked_lines:
                why = why_unmatched(r.f, g, fences)
                rc.grep_only[why] += 1
                example(why, r.f, g)
        for i, on in enumerate(r.run_lines):
            if not on & gset:
                why = "the module named on no matching line (a variable, a script path of another spelling)"
                rc.asap_only[why] += 1
                example(why, r.f, r.runs[i].line)
    return rc


def slice_named(ra: RunAnalysis) -> bool:
    return ra.run.device is not None or any(o.key == "compile_topology" for o in ra.run.overrides)


def symbolic_priced(ra: RunAnalysis) -> bool:
    return any(
        o.symbolic and (o.key in PRICED_KEYS or o.key.endswith("_parallelism")) for o in ra.document.overrides.values()
    )


def classify(code: str, where: str) -> str:
    for c, pattern, verdict in CLASSES:
        if c == code and re.search(pattern, where):
            return verdict
    return "unclassified"


# -- timing -------------------------------------------------------------------------------------------------------
def pct(xs: Iterable[float]) -> str:
    s = sorted(x * 1000 for x in xs)
    if not s:
        return "n=0"
    p95 = s[min(len(s) - 1, max(0, round(0.95 * len(s)) - 1))]
    return f"n={len(s):>4}  median={statistics.median(s):8.3f}  p95={p95:8.3f}  max={s[-1]:9.3f} ms"


def best_of(repeat: int, fn) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


# -- main -----------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tpu-recipes", type=Path, default=TPU_RECIPES_GIT, help="tpu-recipes' git directory")
    ap.add_argument("--maxtext", type=Path, default=MAXTEXT_GIT, help="MaxText's git directory")
    ap.add_argument("--repeat", type=int, default=3, help="timing passes per file (the best is kept)")
    ap.add_argument("--examples", type=int, default=3, help="examples per group")
    ap.add_argument("--keep", type=Path, help="write the corpus here (kept) instead of a temporary directory")
    ap.add_argument("--files", action="store_true", help="list every file where ASAP's and grep's counts differ")
    args = ap.parse_args(argv)

    missing = [str(p) for p in (args.tpu_recipes, args.maxtext) if not (p / "HEAD").exists()]
    if shutil.which("git") is None or missing:
        why = "git is not installed" if shutil.which("git") is None else f"no git directory at {', '.join(missing)}"
        print(
            f"bench/launch_files.py: skipped: {why} (set ASAP_TPU_RECIPES_GIT / ASAP_MAXTEXT_GIT, or pass "
            "--tpu-recipes / --maxtext; the mirrors are not in CI)"
        )
        return 0

    tmp = None
    if args.keep is not None:
        into = args.keep.resolve()
        shutil.rmtree(into, ignore_errors=True)
        into.mkdir(parents=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="asap-launch-bench-")
        into = Path(tmp.name)
    try:
        return _run(args, into)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _run(args: argparse.Namespace, into: Path) -> int:
    files, mt_root, commits = corpus(args.tpu_recipes, args.maxtext, into)
    print(
        f"corpus: tpu-recipes@{commits['tpu-recipes']} and maxtext@{commits['maxtext']}, written under {into}; "
        f"MaxText checkout for configs and recipes: {mt_root}"
    )
    results: list[FileResult] = []
    crashes: list[str] = []
    for f in files:
        try:
            la = analyze_launch(f.path, f.text, maxtext_path=mt_root)
        except Exception as e:  # a benchmark counts a crash, it does not stop at one
            crashes.append(f"{f.repo}/{f.rel}: {type(e).__name__}: {e}")
            continue
        positions = Positions(f.text)
        r = FileResult(f, la.runs, grep_lines(f.text))
        r.run_lines = [run_lines(ra, positions) for ra in la.runs]
        results.append(r)

    # -- runs against the grep --------------------------------------------------------------------------------
    print(
        "\n== files and runs (ASAP) against matching lines (grep -E 'MaxText.train|maxtext.train|train_compile|"
        "benchmark_runner')"
    )
    print(f"{'':14}{'files':>7}{'with a run':>12}{'ASAP runs':>11}{'grep lines':>12}{'files differing':>17}")
    for repo in ("tpu-recipes", "maxtext", None):
        rs = [r for r in results if repo is None or r.f.repo == repo]
        diff = sum(len(r.runs) != len(r.grep_lines) for r in rs)
        print(
            f"{repo or 'all':14}{len(rs):>7}{sum(bool(r.runs) for r in rs):>12}{sum(len(r.runs) for r in rs):>11}"
            f"{sum(len(r.grep_lines) for r in rs):>12}{diff:>17}"
        )
    if crashes:
        print(f"crashes: {len(crashes)}")
        for c in crashes:
            print(f"  {c}")
    rc = reconcile(results, args.examples)
    print(f"\nwhere they differ (grep {rc.grep} lines, ASAP {rc.runs} runs):")
    print(f"  matching lines that hold runs: {rc.matched_lines} lines, {rc.matched_runs} runs")
    print(
        f"    one run over several matching lines (continuation lines, a variable's assignment): "
        f"{rc.many_lines} lines more than runs"
    )
    for ex in rc.examples.get("one run over several matching lines", []):
        print(f"        {ex}")
    print(
        f"    several runs on one matching line (cmd && cmd, runs in one --command string): "
        f"{rc.many_runs} runs more than lines"
    )
    for ex in rc.examples.get("several runs on one matching line", []):
        print(f"        {ex}")
    print(f"  matching lines with no run (grep only): {sum(rc.grep_only.values())}")
    for why, n in rc.grep_only.most_common():
        print(f"    {n:>4}  {why}")
        for ex in rc.examples[why]:
            print(f"        {ex}")
    print(f"  runs on no matching line (ASAP only): {sum(rc.asap_only.values())}")
    for why, n in rc.asap_only.most_common():
        print(f"    {n:>4}  {why}")
        for ex in rc.examples[why]:
            print(f"        {ex}")
    if args.files:
        print("\nfiles where the counts differ (ASAP runs / grep lines):")
        for r in results:
            if len(r.runs) != len(r.grep_lines):
                print(f"  {len(r.runs):>3} / {len(r.grep_lines):<3} {r.f.repo}/{r.f.rel}")

    # -- per kind -------------------------------------------------------------------------------------------
    every = [ra for r in results for ra in r.runs]
    print("\n== runs per kind")
    print(
        f"{'kind':18}{'runs':>6}{'slice named':>13}{'resolved':>10}{'model':>7}{'estimate':>10}{'flags':>7}"
        f"{'symbolic priced':>17}"
    )
    for kind in ("train", "xpk", "benchmark_runner", None):
        of_kind = [ra for ra in every if kind is None or ra.run.kind == kind]
        print(
            f"{kind or 'all':18}{len(of_kind):>6}"
            f"{sum(slice_named(ra) for ra in of_kind):>13}"
            f"{sum(ra.analysis.check.slice is not None for ra in of_kind):>10}"
            f"{sum(ra.analysis.config.model is not None for ra in of_kind):>7}"
            f"{sum(ra.analysis.estimate is not None for ra in of_kind):>10}"
            f"{sum(ra.analysis.config.run_flags.source is not None for ra in of_kind):>7}"
            f"{sum(symbolic_priced(ra) for ra in of_kind):>17}"
        )
    print(
        "(slice named: the run names one (compile_topology, --tpu-type/--device-type/--device_type, a node "
        "selector), known or symbolic; resolved: to a TPU slice; estimate: ASAP priced the run; flags: XLA flags "
        "read for it; symbolic priced: a key the estimate reads is known only at run time)"
    )

    # -- errors ---------------------------------------------------------------------------------------------
    by_code: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        for ra in r.runs:
            for fd in ra.findings:
                if fd.severity != Severity.ERROR:
                    continue
                where = f"{r.f.repo}/{r.f.rel}:{fd.span.line + 1}: {fd.message}"
                by_code[str(fd.code)][classify(str(fd.code), where)].append(where)
    total = sum(len(v) for c in by_code.values() for v in c.values())
    print(f"\n== ERROR findings: {total} (on {sum(1 for r in results if any(_errors(r)))} files)")
    for code in sorted(by_code, key=lambda c: -sum(len(v) for v in by_code[c].values())):
        groups = by_code[code]
        print(f"{code}: {sum(len(v) for v in groups.values())}")
        for verdict, wheres in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(wheres):>4}  {verdict}")
            for w in wheres[: args.examples]:
                print(f"        {w[:260]}")
    if not by_code:
        print("  none")

    # -- timing ---------------------------------------------------------------------------------------------
    t_analyze, t_read, t_grep, t_analyze_runs = [], [], [], []
    for r in results:
        f = r.f
        ta = best_of(args.repeat, lambda f=f: analyze_launch(f.path, f.text, maxtext_path=mt_root))
        t_analyze.append(ta)
        if r.runs:
            t_analyze_runs.append(ta)
        t_read.append(best_of(args.repeat, lambda f=f: runs_in(f.path, f.text)))
        t_grep.append(best_of(args.repeat, lambda f=f: grep_lines(f.text)))
    print(f"\n== time per file (best of {args.repeat} after a warm pass; this machine's CPU, shared)")
    print(f"  analyze_launch, every file    {pct(t_analyze)}")
    print(f"  analyze_launch, files w/ runs {pct(t_analyze_runs)}")
    print(f"  runs_in (reading alone)       {pct(t_read)}")
    print(f"  grep baseline (line regex)    {pct(t_grep)}")
    print(f"  totals: analyze_launch {sum(t_analyze):.2f} s, runs_in {sum(t_read):.2f} s, grep {sum(t_grep):.4f} s")
    return 0


def _errors(r: FileResult) -> Iterable[object]:
    return (fd for ra in r.runs for fd in ra.findings if fd.severity == Severity.ERROR)


if __name__ == "__main__":
    sys.exit(main())
