"""Render the VS Code extension's icon, extension/images/icon.svg, to the PNG its package.json names.

    .venv/bin/python tools/render_icon.py      (or `make icon`)

The PNG is committed, so packaging the extension needs no renderer; this runs only when the SVG changes.
vl-convert (a dependency of the server, for the roofline charts) rasterises SVG without a browser.
"""

from __future__ import annotations

import sys
from pathlib import Path

import vl_convert

IMAGES = Path(__file__).resolve().parent.parent / "extension" / "images"
SCALE = 2  # the SVG is 128 x 128: a 256 x 256 PNG stays sharp on high-density screens


def main() -> int:
    png = vl_convert.svg_to_png((IMAGES / "icon.svg").read_text(), scale=SCALE)
    (IMAGES / "icon.png").write_bytes(png)
    print(f"{IMAGES / 'icon.png'}: {len(png)} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
