"""One YAML file read with ruamel.yaml round-trip: top-level keys with the exact span of
each key and scalar value, so findings point at the key and fixes edit only the value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from server.perf.findings import Span


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


def _plain(value: Any) -> Any:
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


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.allow_duplicate_keys = False
    return y


def parse(text: str, path: Path | None = None) -> YamlSource:
    """Parse one file. Raises YamlSyntaxError located at the parser's mark."""
    lines = text.splitlines()
    try:
        data = _yaml().load(text)
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
    if not isinstance(data, CommentedMap):
        return YamlSource(path, text, entries, False, lines)
    for key in data:
        if not isinstance(key, str):
            continue
        kl, kc = data.lc.key(key)
        vl, vc = data.lc.value(key)
        value = _plain(data[key])
        key_end = kc + len(key)
        if 0 <= kl < len(lines) and lines[kl][kc : kc + 1] in ("'", '"'):
            key_end = _scalar_end(lines[kl], kc)
        if value is None and vl != kl:  # `key:` with nothing after it
            vl, vc = kl, key_end + 1
        if isinstance(value, (dict, list)):
            v_end = (vl, len(lines[vl]) if vl < len(lines) else vc)
        else:
            v_end = (vl, _scalar_end(lines[vl], vc) if vl < len(lines) else vc)
        entries[key] = Entry(key, value, path, Span(kl, kc, kl, key_end), Span(vl, vc, *v_end))
    return YamlSource(path, text, entries, True, lines)
