"""The minimal edits that turn a config into a proposal: changed values replaced in place, missing keys
inserted next to the other parallelism keys, everything else (comments, other keys, formatting) untouched.

A key written as -1 stays -1 when it still resolves to the proposed degree: with every other axis of its
group set, -1 takes the devices (ICI) or slices (DCN) that are left, which is exactly the proposal's
degree because a valid proposal's product is the slice. Values are compared as resolved degrees, so
nothing is rewritten that already means the same.
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from server.common.findings import Span, TextEdit
from server.config.axes import AXES
from server.config.resolve import Config

MESH_ORDER = [k for a in AXES for k in (a.ici_key, a.dcn_key)]


class ApplyError(ValueError):
    """The proposal cannot be written into this document (the message says why)."""


def _effective(cfg: Config, key: str) -> Any:
    v = cfg.values.get(key)
    return v.value if v is not None else None


def proposal_edits(
    cfg: Config, ici: dict[str, int], dcn: dict[str, int], other: dict[str, Any] | None = None
) -> list[TextEdit]:
    """Edits of `cfg`'s own document that set the full ici/dcn assignment (axes not named are 1) and `other`
    keys. Raises ApplyError when a key would need writing into a document ASAP cannot edit safely."""
    doc = cfg.document
    if doc is None or not doc.is_mapping:
        raise ApplyError("the config is not a YAML mapping ASAP can edit")
    want: dict[str, Any] = {}
    minus_one = {"ici": [], "dcn": []}  # type: dict[str, list[str]]
    for a in AXES:
        for part, degrees, key in (("ici", ici, a.ici_key), ("dcn", dcn, a.dcn_key)):
            want[key] = int(degrees.get(a.name, 1))
            if _effective(cfg, key) == -1:
                minus_one[part].append(key)
    for keys in minus_one.values():
        if len(keys) == 1:  # a single -1 resolves to what is left of the slice: the proposal's degree
            want.pop(keys[0])
    for k, v in (other or {}).items():
        want[k] = v

    edits: list[TextEdit] = []
    inserts: list[str] = []
    for key, value in want.items():
        current = _effective(cfg, key)
        if current == value or (
            isinstance(current, (int, float)) and not isinstance(current, bool) and current == value
        ):
            continue
        entry = doc.entries.get(key)
        if entry is not None:
            if isinstance(entry.value, (dict, list)):
                raise ApplyError(f"{key} is a collection in the document; ASAP does not rewrite it")
            edits.append(TextEdit(doc.path, entry.value_span, _scalar(value)))
        else:
            inserts.append(f"{key}: {_scalar(value)}\n")
    if inserts:
        at = _insertion_point(cfg)
        where = offset(doc.text, at.line, at.column)
        block = as_written(doc.text, where, where, "".join(_ordered(inserts)))
        if at_end_without_newline(doc.text, at):  # the block starts a line after the last one (as_written)
            last = len(doc.lines) - 1
            at = Span.point(last, len(doc.lines[last]))
        edits.append(TextEdit(doc.path, at, block))
    return edits


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _ordered(lines: list[str]) -> list[str]:
    rank = {k: i for i, k in enumerate(MESH_ORDER)}
    return sorted(lines, key=lambda line: rank.get(line.split(":", 1)[0], len(rank)))


def _insertion_point(cfg: Config) -> Span:
    """After the last parallelism key written in the document (the mesh block), else at the end of the file."""
    doc = cfg.document
    assert doc is not None
    written = cfg.mesh_entries()
    if written:
        last = max(written, key=lambda e: e.value_span.end_line)
        return Span.point(last.value_span.end_line + 1, 0)
    return Span.point(len(doc.lines), 0)


_BREAK = re.compile(r"\r\n|\r|\n")


def line_ending_at(text: str, at: int, insertion: bool = False, starts: list[int] | None = None) -> str:
    """The line break that lines written at string index `at` of `text` end in: that of the line they replace
    (the line `at` is on) or, for an insertion at a line's start (`insertion`), of the line they follow. A line
    without a break of its own (the last line of a text without a final line break) takes the nearest break above
    it; a text without any line break takes LF. Per line, not the document's dominant break: a file that mixes
    endings gets, at each place, the ending its neighbour has (as an editor's own edit there would)."""
    starts = starts if starts is not None else line_starts(text)
    line = bisect.bisect_right(starts, at) - 1  # starts[-1] is the end of the text: past it, no line
    if insertion and line > 0 and at == starts[line]:
        line -= 1
    for i in range(min(line, len(starts) - 2), -1, -1):
        body = text[starts[i] : starts[i + 1]]
        ending = body[len(body.rstrip("\r\n")) :]
        if ending:
            return ending
    return "\n"


def with_line_ending(new_text: str, eol: str) -> str:
    """`new_text` with every line break written as `eol`."""
    return _BREAK.sub(eol, new_text) if eol != "\n" or "\r" in new_text else new_text


def as_written(text: str, start: int, end: int, new_text: str, starts: list[int] | None = None) -> str:
    """`new_text` as an edit of `text[start:end]` must write it, the one place every fix's text passes (the vetting
    of each fix, server/config/safe_edits.py, and the proposals' edits here): each line break in the ending of the
    line it replaces or follows (line_ending_at), and lines inserted after a last line without a line break
    moved onto a line of their own (a break first, none last: the file still ends without one)."""
    eol = line_ending_at(text, start, start == end, starts)
    new = with_line_ending(new_text, eol)
    if start == end == len(text) and text and not ends_with_break(text) and new.endswith(eol):
        new = eol + new.removesuffix(eol)
    return new


def ends_with_break(text: str) -> bool:
    return text.endswith(("\n", "\r"))


def at_end_without_newline(text: str, at: Span) -> bool:
    """Whether a point lies past the last line of a text whose last line has no line break (an insertion there
    would be glued onto that line)."""
    return bool(text) and not ends_with_break(text) and offset(text, at.line, at.column) == len(text)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


def line_starts(text: str) -> list[int]:
    """The offset where each line starts, plus the end: lines as LSP clients count them (only CRLF, CR and LF end
    a line), which is how the parser counts the lines of a fix's spans."""
    starts = [0]
    for m in _LINE.finditer(text):
        starts.append(m.end())
    return starts


def offset(text: str, line: int, column: int, starts: list[int] | None = None) -> int:
    """The string index of a 0-based line and code-point column; past the last line, the end of the text; past
    the end of a line, the end of that line (before its line break), as LSP clamps a position."""
    starts = starts if starts is not None else line_starts(text)
    if line >= len(starts) - 1:
        return len(text)
    body = text[starts[line] : starts[line + 1]]
    width = len(body.rstrip("\r\n"))
    return starts[line] + min(column, width)


def apply_text(text: str, edits: list[TextEdit]) -> str:
    """The document after `edits` (0-based line/column spans, code-point columns, lines as LSP counts them: a
    CR-only or CRLF file is edited where its lines are)."""
    starts = line_starts(text)
    out = text
    for e in sorted(edits, key=lambda e: (e.span.line, e.span.column), reverse=True):
        a = offset(text, e.span.line, e.span.column, starts)
        b = offset(text, e.span.end_line, e.span.end_column, starts)
        out = out[:a] + e.new_text + out[b:]
    return out
