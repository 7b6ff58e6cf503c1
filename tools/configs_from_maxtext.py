"""Write ASAP's catalog of MaxText's configs from a MaxText checkout at a named commit.

    .venv/bin/python tools/configs_from_maxtext.py --maxtext PATH [--commit REV] [--out FILE]

PATH is a MaxText work tree or git directory (read with `git show REV:...`, so the work tree's state does not
matter), or a plain directory of MaxText's sources (read from disk; the commit is then what --commit says), as for
tools/models_from_maxtext.py. The output (default `server/config/data/maxtext_configs.json`, loaded by
`server/config/config_files.py`) holds the text of every YAML config under MaxText's configs directory
(`src/maxtext/configs/`, or an older layout's), at any depth, base.yml included and the model files (`models/`, in
the model catalog) left out, keyed by its path relative to that directory, with the repository, commit and
directory. A `base_config` that MaxText finds in its configs directory (pyconfig.py:188-203@e591f30cb) is found
there by ASAP when no MaxText checkout on disk has it. The same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
TOOLS = Path(__file__).resolve().parent
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

from models_from_maxtext import REPOSITORY, Source, dumps, open_source  # noqa: E402

from server.config.models import CHECKOUT_MODELS_DIRS  # noqa: E402
from server.config.source import YamlSyntaxError, parse  # noqa: E402

DEFAULT_OUT = ROOT / "server" / "config" / "data" / "maxtext_configs.json"
CONFIG_SUFFIXES = (".yml", ".yaml")


def build_catalog(src: Source) -> dict[str, Any]:
    """The catalog as data (see the module docstring)."""
    configs_dir = next((d.rsplit("/", 1)[0] for d in CHECKOUT_MODELS_DIRS if src.exists_dir(d)), None)
    if configs_dir is None:
        raise SystemExit(f"no MaxText configs directory ({', '.join(CHECKOUT_MODELS_DIRS)}) at {src.commit or 'HEAD'}")
    configs: dict[str, str] = {}
    for path in src.list_tree(configs_dir):
        rel = path[len(configs_dir) + 1 :]
        if not rel.endswith(CONFIG_SUFFIXES) or rel.startswith("models/"):
            continue
        text = src.read(path)
        try:
            parse(text)
        except YamlSyntaxError as e:  # kept: ASAP reports it where a config names it, as MaxText would fail there
            print(f"note: {path} is not valid YAML at line {e.span.line + 1}: {e.message}", file=sys.stderr)
        configs[rel] = text
    if "base.yml" not in configs:
        raise SystemExit(f"no {configs_dir}/base.yml at {src.commit or 'HEAD'}")
    return {
        "repository": REPOSITORY,
        "commit": src.commit,
        "commit_date": src.commit_date,
        "configs_dir": configs_dir,
        "configs": dict(sorted(configs.items())),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--maxtext", required=True, type=Path, help="a MaxText work tree or git directory")
    p.add_argument("--commit", default="HEAD", metavar="REV", help="the commit to read (default HEAD)")
    p.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output file (default {DEFAULT_OUT.relative_to(ROOT)})"
    )
    args = p.parse_args(argv)
    cat = build_catalog(open_source(args.maxtext, args.commit))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps(cat), encoding="utf-8")
    print(
        f"{args.out}: {len(cat['configs'])} configs of {REPOSITORY}@{cat['commit'][:9] or '?'} "
        f"({cat['configs_dir']}, {cat['commit_date']})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
