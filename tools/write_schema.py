"""Write `schema/analyze.schema.json`, the JSON schema of the `asap analyze --json` document, from its typed
models (server/agents/report.py).

    .venv/bin/python tools/write_schema.py [--check]

--check: exit 1 when the committed file differs from what this would write (tests/test_report_schema.py checks
it too).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.agents.report import json_schema  # noqa: E402

OUT = ROOT / "schema" / "analyze.schema.json"


def text() -> str:
    return json.dumps(json_schema(), indent=2) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only compare with the committed file")
    args = ap.parse_args()
    new = text()
    if args.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == new
        print(f"{OUT.relative_to(ROOT)}: {'up to date' if same else 'stale: run tools/write_schema.py'}")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(new, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
