"""One YAML file read with ruamel.yaml round-trip: top-level keys with the exact span of
each key and scalar value, so findings point at the key and fixes edit only the value.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from server.common.findings import Span


class YamlSyntaxError(Exception):
    """The text is not valid YAML; `span` is the parser's error position."""

    def __init__(self, message: str, span: Span):
        super().__init__(message)
        self.message = message
        self.span = span


@dataclass(frozen=True)
class Entry:
    """A top-level `key: value` of one file."""

    key: str
    value: Any
    file: Path | None
    key_span: Span
    value_span: Span  # the scalar token (quotes included); for a collection, its first line


@dataclass
class YamlSource:
    path: Path | None
    text: str
    entries: dict[str, Entry]
    is_mapping: bool
    lines: list[str]


_PLAIN_END = re.compile(r"\s+#|\s*$")


def _scalar_end(line: str, col: int) -> int:
    """End column of the scalar token starting at `col` on `line`."""
    if col >= len(line):
        return col
    quote = line[col]
    if quote in "'\"":
        i = col + 1
        while i < len(line):
            if line[i] == "\\" and quote == '"':
                i += 2
                continue
            if line[i] == quote:
                if quote == "'" and i + 1 < len(line) and line[i + 1] == "'":
                    i += 2
                    continue
                return i + 1
            i += 1
        return len(line)
    m = _PLAIN_END.search(line, col)
    return m.start() if m else len(line)


def plain(value: Any) -> Any:
    """A loaded YAML value as plain JSON-able Python (ruamel's round-trip containers become lists and dicts)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return plain_scalar(value)


def plain_scalar(value: Any) -> Any:
    """ruamel's round-trip scalars (ScalarInt, ScalarFloat, ScalarBoolean...) as plain Python values."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


_local = threading.local()


def _yaml() -> YAML:
    """One round-trip loader per thread (ruamel's YAML objects are not thread-safe)."""
    y = getattr(_local, "yaml", None)
    if y is None:
        y = _local.yaml = YAML(typ="rt")
        y.allow_duplicate_keys = False
    return y


# A raw top-level entry: key, plain value, (key line, key col), (value line, value col), lines relative
# to the text that was parsed.
_Raw = tuple[str, Any, tuple[int, int], tuple[int, int]]


def _load_entries(text: str) -> list[_Raw] | None:
    """Round-trip load; None when the document is not a mapping. Raises ruamel's errors."""
    data = _yaml().load(text)
    if not isinstance(data, CommentedMap):
        return None
    return [(k, plain_scalar(data[k]), data.lc.key(k), data.lc.value(k)) for k in data if isinstance(k, str)]


# Incremental parsing. MaxText configs are flat top-level mappings, and a keystroke changes one
# entry: the text is cut where a top-level key starts, and each piece is parsed (and cached) on its
# own, so an edit re-parses only its piece. Anything unusual (anchors, aliases, merge keys,
# directives, several documents, tabs) or any piece that fails to parse alone goes to a parse of the
# whole document, which alone decides errors and their positions.
_TOP_KEY = re.compile(r"""^(?:"[^"\n]*"|'[^'\n]*'|[A-Za-z_][\w.\-]*)[ ]*:(?:[ ]|$)""")
_UNUSUAL = re.compile(r"(?:^|[\s\[{,])[&*][\w-]|<<\s*:|^(?:---|\.\.\.|%)|\t", re.M)
_PIECES: OrderedDict[str, list[_Raw]] = OrderedDict()
_PIECES_MAX = 8192
_PIECES_LOCK = threading.Lock()


def _pieces(lines: list[str]) -> list[tuple[int, str]]:
    starts = [i for i, line in enumerate(lines) if _TOP_KEY.match(line)]
    if not starts:
        return []
    starts[0] = 0  # leading comments and blank lines ride with the first entry
    bounds = [*starts, len(lines)]
    return [(a, "\n".join(lines[a:b]) + "\n") for a, b in pairwise(bounds)]


def _parse_piece(piece: str) -> list[_Raw] | None:
    with _PIECES_LOCK:
        hit = _PIECES.get(piece)
        if hit is not None:
            _PIECES.move_to_end(piece)
            return hit
    raw = _load_entries(piece)
    if raw is None or len(raw) != 1:
        return None
    with _PIECES_LOCK:
        _PIECES[piece] = raw
        if len(_PIECES) > _PIECES_MAX:
            _PIECES.popitem(last=False)
    return raw


def _incremental(text: str, lines: list[str]) -> list[_Raw] | None:
    """Entries of the whole text from its cached pieces, or None to parse it whole."""
    if _UNUSUAL.search(text):
        return None
    out: list[_Raw] = []
    seen: set[str] = set()
    for start, piece in _pieces(lines):
        try:
            raw = _parse_piece(piece)
        except YAMLError:
            return None
        if raw is None:
            return None
        for key, value, (kl, kc), (vl, vc) in raw:
            if key in seen:
                return None  # a duplicate key: let the whole-document parse report it
            seen.add(key)
            out.append((key, value, (kl + start, kc), (vl + start, vc)))
    return out or None


def parse(text: str, path: Path | None = None, incremental: bool = True) -> YamlSource:
    """Parse one file. Raises YamlSyntaxError located at the parser's mark."""
    lines = text.splitlines()
    raw = _incremental(text, lines) if incremental else None
    if raw is None:
        try:
            raw = _load_entries(text)
        except MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            line, col = (mark.line, mark.column) if mark else (0, 0)
            problem = e.problem or e.context or "invalid YAML"
            detail = f"{e.context}: {problem}" if e.context and e.problem else problem
            end = len(lines[line]) if 0 <= line < len(lines) else col
            raise YamlSyntaxError(f"Invalid YAML: {detail}", Span(line, col, line, max(col, end))) from None
        except YAMLError as e:  # errors without a mark (rare): put them on the first line
            raise YamlSyntaxError(f"Invalid YAML: {e}", Span.point(0)) from None

    entries: dict[str, Entry] = {}
    if raw is None:
        return YamlSource(path, text, entries, False, lines)
    for key, value, (kl, kc), (vl, vc) in raw:
        key_end = kc + len(key)
        if 0 <= kl < len(lines) and lines[kl][kc : kc + 1] in ("'", '"'):
            key_end = _scalar_end(lines[kl], kc)
        if value is None:  # `key:` with nothing after it: the point just past the colon
            vl, vc = kl, key_end + 1
        if isinstance(value, (dict, list)):
            v_end = (vl, len(lines[vl]) if vl < len(lines) else vc)
        else:
            v_end = (vl, _scalar_end(lines[vl], vc) if vl < len(lines) else vc)
        entries[key] = Entry(key, value, path, Span(kl, kc, kl, key_end), Span(vl, vc, *v_end))
    return YamlSource(path, text, entries, True, lines)
