"""Write `extension/src/contract.ts` from `server/editor/contract.py` (the server-extension contract).

    .venv/bin/python tools/write_contract.py [--check]

--check: exit 1 when the committed file differs from what this would write (tests/test_contract.py checks it too).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.editor.contract import typescript  # noqa: E402

OUT = ROOT / "extension" / "src" / "contract.ts"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only compare with the committed file")
    args = ap.parse_args()
    text = typescript()
    if args.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT.relative_to(ROOT)}: {'up to date' if same else 'stale: run tools/write_contract.py'}")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
