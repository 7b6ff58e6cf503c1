"""Write the files generated from ASAP's typed definitions, or check that the committed ones are current:

- `schema/analyze.schema.json`: the JSON schema of the `asap analyze --json` document, from its typed models
  (server/agents/report.py `json_schema`);
- `extension/src/contract.ts`: the commands, error codes and reply types the server and the extension share
  (server/editor/contract.py `typescript`).

    .venv/bin/python tools/write_generated.py [--check]

--check: exit 1 when a committed file differs from what this would write (tests/test_report_schema.py and
tests/test_contract.py check them too).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.agents.report import json_schema  # noqa: E402
from server.editor.contract import typescript  # noqa: E402

GENERATED = {
    ROOT / "schema" / "analyze.schema.json": lambda: json.dumps(json_schema(), indent=2) + "\n",
    ROOT / "extension" / "src" / "contract.ts": typescript,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only compare with the committed files")
    args = ap.parse_args()
    stale = 0
    for out, make in GENERATED.items():
        text, rel = make(), out.relative_to(ROOT)
        if args.check:
            same = out.is_file() and out.read_text(encoding="utf-8") == text
            stale += not same
            print(f"{rel}: {'up to date' if same else 'stale: run tools/write_generated.py'}")
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
            print(f"wrote {rel}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
