"""Which build of ASAP is running, for the keys of what it keeps: its version and a digest of its own files.

A development checkout (and an editable install) changes its code without changing `__version__`; a result
stored by other code must not be read back as this code's (an analysis cached before a fix served the bug
again after it).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from server import __version__

_PACKAGE = Path(__file__).resolve().parents[1]


@functools.cache
def build_key() -> str:
    """ASAP's version and the sha256 of every file of the `server` package (code and data; about 3 ms)."""
    h = hashlib.sha256(__version__.encode())
    for p in sorted(_PACKAGE.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
            h.update(p.relative_to(_PACKAGE).as_posix().encode() + b"\0")
            h.update(p.read_bytes())
    return f"{__version__}+{h.hexdigest()[:16]}"
