"""Write ASAP's catalog of MaxText's benchmark recipes from a MaxText checkout at a named commit.

    .venv/bin/python tools/recipes_from_maxtext.py --maxtext PATH [--commit REV] [--out FILE]

PATH is a MaxText work tree or git directory (read with `git show REV:...`, so the work tree's state does not
matter), or a plain directory of MaxText's sources (read from disk; the commit is then what --commit says).
The output (default `server/launch/data/maxtext_recipes.json`, loaded by `server/launch/recipes.py`) holds every
recipe benchmark_runner can run (`MaxTextModel`s of `benchmarks/*model_configs*.py` and the dictionaries
benchmark_runner.py looks names up in), evaluated statically by the same reader ASAP uses on a checkout: names,
model types, tuning params with their lines, XLA flags as strings, what could not be read. MaxText's code is not
copied. The same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from server.launch.recipes import (  # noqa: E402
    BENCHMARKS_DIR,
    ORIGIN_CATALOG,
    DiskTree,
    dumps,
    library_to_json,
    read_library,
)

REPOSITORY = "AI-Hypercomputer/maxtext"
DEFAULT_OUT = ROOT / "server" / "launch" / "data" / "maxtext_recipes.json"


class GitTree:
    """The files of one commit of a git repository (recipes.Tree)."""

    def __init__(self, repo: Path, rev: str):
        self.repo = repo
        self.commit = self._git("rev-parse", "--verify", f"{rev}^{{commit}}").strip()
        self.commit_date = self._git("log", "-1", "--format=%cI", self.commit).strip()
        self._dirs: dict[str, list[str]] = {}

    def _git(self, *args: str) -> str:
        out = subprocess.run(["git", "-C", str(self.repo), *args], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"git {' '.join(args)} failed in {self.repo}: {out.stderr.strip()}")
        return out.stdout

    def read_text(self, rel: str) -> str:
        out = subprocess.run(
            ["git", "-C", str(self.repo), "show", f"{self.commit}:{rel}"], capture_output=True, check=False
        )
        if out.returncode != 0:
            raise OSError(f"{rel} not at {self.commit[:9]}")
        return out.stdout.decode("utf-8")

    def list_py(self, rel_dir: str) -> list[str]:
        if rel_dir not in self._dirs:
            probe = subprocess.run(
                ["git", "-C", str(self.repo), "ls-tree", "--name-only", self.commit, f"{rel_dir}/"],
                capture_output=True,
                text=True,
                check=False,
            )
            names = probe.stdout.splitlines() if probe.returncode == 0 else []
            self._dirs[rel_dir] = sorted(n for n in names if n.endswith(".py"))
        return self._dirs[rel_dir]

    def display(self, rel: str) -> str:
        return rel


class PlainTree(DiskTree):
    """A plain directory of MaxText's sources, its files named by their repository paths."""

    def display(self, rel: str) -> str:
        return rel


def build_catalog(tree: GitTree | PlainTree, commit: str, commit_date: str = "") -> dict:
    """The catalog as data (see the module docstring)."""
    if not tree.list_py(BENCHMARKS_DIR):
        raise SystemExit(f"no {BENCHMARKS_DIR}/ with Python files at {commit or 'HEAD'}")
    lib = read_library(tree, ORIGIN_CATALOG, REPOSITORY, commit or None, commit_date)
    if not lib.recipes:
        raise SystemExit(f"no recipe read from {BENCHMARKS_DIR}/ at {commit or 'HEAD'}")
    return library_to_json(lib, REPOSITORY)


def open_tree(path: Path, rev: str) -> tuple[GitTree | PlainTree, str, str]:
    probe = subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"], capture_output=True, check=False)
    if probe.returncode == 0:
        tree = GitTree(path, rev)
        return tree, tree.commit, tree.commit_date
    return PlainTree(path), "" if rev == "HEAD" else rev, ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--maxtext", required=True, type=Path, help="a MaxText work tree or git directory")
    p.add_argument("--commit", default="HEAD", metavar="REV", help="the commit to read (default HEAD)")
    p.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output file (default {DEFAULT_OUT.relative_to(ROOT)})"
    )
    args = p.parse_args(argv)
    tree, commit, date = open_tree(args.maxtext, args.commit)
    cat = build_catalog(tree, commit, date)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps(cat), encoding="utf-8")
    print(
        f"{args.out}: {len(cat['recipes'])} recipes of {REPOSITORY}@{cat['commit'][:9] or '?'} ({cat['commit_date']}),"
        f" {len(cat['problems'])} problems"
    )
    for prob in cat["problems"]:
        print(f"  {prob['file']}:{prob['line']}: {prob['message']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
