"""No test reads outside the checkout (issue 25 item 1): a user's clone has nothing beside it.

An audit hook (PEP 578) sees every `open`, `os.listdir` and `os.scandir` of the test process and records a path
that lies next to the checkout (under its parent directory) but not inside it: a folder of shared material on the
machine the project is developed on, a sibling repository on a user's. The conftest fails the test that did it. Dot
directories beside the checkout are allowed, since a clone in the home directory has `~/.cache`, `~/.pyenv` and
`~/.local` there, which Python and its libraries read; so is the interpreter's own prefix and import path (a venv
beside the checkout). A checkout at the file system's root has no "beside".
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_EVENTS = frozenset({"open", "os.listdir", "os.scandir"})

outside: list[str] = []  # paths read outside the checkout since the last `take()`


def _interpreter() -> tuple[Path, ...]:
    """Where the interpreter and its packages live: a venv beside the checkout is the user's, not a test's read."""
    places = {sys.prefix, sys.base_prefix, sys.exec_prefix, *(p for p in sys.path if p)}
    return tuple(Path(os.path.abspath(p)) for p in places)


_ALLOWED = _interpreter()


def is_outside(path: str | os.PathLike[str]) -> bool:
    """Whether `path` lies beside the checkout: under its parent directory, not inside it nor a dot directory,
    nor the interpreter's prefix or import path."""
    p = Path(os.path.abspath(os.fsdecode(path)))
    parent = ROOT.parent
    if parent == Path(parent.anchor) or not p.is_relative_to(parent) or p.is_relative_to(ROOT):
        return False
    if any(p.is_relative_to(a) and a != parent for a in _ALLOWED):
        return False
    first = p.relative_to(parent).parts
    return bool(first) and not first[0].startswith(".")


def _hook(event: str, args: tuple) -> None:
    if event not in _EVENTS or not args:
        return
    path = args[0]
    if isinstance(path, (str, bytes, os.PathLike)) and path not in ("", b"") and is_outside(path):  # not an fd
        outside.append(os.fsdecode(path))


def install() -> None:
    """Install the hook once per process (audit hooks cannot be removed)."""
    if not getattr(sys, "_asap_checkout_guard", False):
        sys.addaudithook(_hook)
        sys._asap_checkout_guard = True  # type: ignore[attr-defined]


def take() -> list[str]:
    """The paths recorded since the last call, and forget them."""
    got = list(dict.fromkeys(outside))
    outside.clear()
    return got
