"""The client's side of a document, written apart from the server's code so a test cannot agree with the server by
sharing its mistakes: lines as LSP clients count them (only `\\n`, `\\r\\n` and `\\r` end a line), positions in
UTF-16 code units (as VS Code counts), text edits applied the way an editor applies them, and an independent
reading of what a quick fix must keep (the top-level keys and their values, the comments)."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp
from ruamel.yaml import YAML
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_BREAK = re.compile(r"\r\n|\r|\n")


def client_lines(text: str) -> list[str]:
    """The lines as an LSP client counts them, line breaks kept."""
    return _LINE.findall(text)


def utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def line_count(text: str) -> int:
    """How many lines an editor shows: a last line after a final line break is there, empty."""
    return len(_BREAK.findall(text)) + 1


def offset(text: str, pos: lsp.Position, clamp: bool = False) -> int:
    """The string index of `pos`; a position past the end of its line is the line's end (as LSP says). A line
    past the document raises ValueError, or with `clamp` is the document's end (as VS Code reads it; LSP leaves
    it to the implementation)."""
    lines = client_lines(text)
    if pos.line >= line_count(text):
        if clamp:
            return len(text)
        raise ValueError(f"position {pos.line}:{pos.character} past the document's {line_count(text)} lines")
    if pos.line == len(lines):  # the empty line after a final line break
        return len(text)
    before = sum(map(len, lines[: pos.line]))
    units = 0
    for i, ch in enumerate(lines[pos.line]):
        if units >= pos.character or ch in "\r\n":
            return before + i
        units += utf16_len(ch)
    return before + len(lines[pos.line])


def position(text: str, index: int) -> lsp.Position:
    """The LSP position of string index `index` (not between the \\r and \\n of one line break)."""
    line, start = 0, 0
    for m in _BREAK.finditer(text, 0, index):
        if m.end() > index:
            break
        line, start = line + 1, m.end()
    return lsp.Position(line, utf16_len(text[start:index]))


def splits_crlf(text: str, index: int) -> bool:
    return 0 < index < len(text) and text[index - 1] == "\r" and text[index] == "\n"


def in_range(text: str, rng: lsp.Range) -> bool:
    """Whether `rng` lies in the document as the client has it."""
    n = line_count(text)
    lines = [*client_lines(text), ""]
    for p in (rng.start, rng.end):
        if p.line >= n or p.character > utf16_len(lines[p.line].rstrip("\r\n")):
            return False
    return (rng.start.line, rng.start.character) <= (rng.end.line, rng.end.character)


def apply_edits(text: str, edits: Sequence[lsp.TextEdit], clamp: bool = False) -> tuple[str, list[tuple[int, int]]]:
    """`edits` (all of the same text, not overlapping) applied; also their spans in the original text.
    Raises ValueError for overlapping edits or a range outside the text (with `clamp`: only a character past
    a line's end is; a line past the end is the document's end, as VS Code applies it)."""
    spans = sorted((offset(text, e.range.start, clamp), offset(text, e.range.end, clamp), e.new_text) for e in edits)
    for (_, end, _), (start, _, _) in itertools.pairwise(spans):
        if end > start:
            raise ValueError("overlapping edits")
    for start, end, new in reversed(spans):
        if start > end:
            raise ValueError("an edit ends before it starts")
        text = text[:start] + new + text[end:]
    return text, [(s, e) for s, e, _ in spans]


def apply_change(text: str, change: lsp.TextDocumentContentChangePartial, clamp: bool = False) -> str:
    start, end = offset(text, change.range.start, clamp), offset(text, change.range.end, clamp)
    return text[:start] + change.text + text[end:]


# -- the line endings a quick fix writes ----------------------------------------------------------------------
def expected_ending(text: str, start: int, insertion: bool) -> str:
    """The line ending an edit starting at string index `start` must write: that of the line it follows (a point
    insertion at a line's start) or of the line it is on (the line it replaces); a line without one (the last,
    with no final line break) takes the nearest line's above, else the first break of the text, else LF."""
    lines = client_lines(text)
    ends = [line[len(line.rstrip("\r\n")) :] for line in lines]
    at, line = 0, 0
    while line < len(lines) and at + len(lines[line]) <= start and ends[line]:
        at, line = at + len(lines[line]), line + 1
    if insertion and start == at and line > 0:
        line -= 1  # at a line's start: the new lines follow the line above
    for i in range(min(line, len(ends) - 1), -1, -1):
        if ends[i]:
            return ends[i]
    first = _BREAK.search(text)
    return first.group() if first else "\n"


def ending_mismatches(text: str, edits: Sequence[lsp.TextEdit]) -> list[str]:
    """The edits (of `text`, as the client applies them) whose new text breaks a line with another ending than
    the line it replaces or follows (expected_ending): a `\\n` written into a CR or mixed file."""
    out = []
    for e in edits:
        start, end = offset(text, e.range.start, clamp=True), offset(text, e.range.end, clamp=True)
        want = expected_ending(text, start, insertion=start == end)
        wrong = sorted({b for b in _BREAK.findall(e.new_text) if b != want})
        if wrong:
            r = e.range.start
            out.append(f"the edit at {r.line}:{r.character} writes {wrong} where the line ends in {want!r}")
    return out


# -- what a quick fix must keep -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reading:
    """A text's top-level keys (key, value, the span of the pair as string indices) and its comments."""

    keys: list[tuple[str, Any, int, int]]
    comments: Counter[str]


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.allow_duplicate_keys = True
    return y


def _value(node: Node, depth: int = 0) -> Any:
    if depth > 40:
        return "..."
    if isinstance(node, ScalarNode):
        return (node.tag.value if hasattr(node.tag, "value") else str(node.tag), node.value)
    if isinstance(node, SequenceNode):
        return tuple(_value(n, depth + 1) for n in node.value)
    if isinstance(node, MappingNode):
        return tuple((_value(k, depth + 1), _value(v, depth + 1)) for k, v in node.value)
    return repr(node)


def comments(text: str) -> Counter[str]:
    """The comments of `text`: from a `#` at a line's start or after a blank, outside quotes, to the line's end."""
    found: Counter[str] = Counter()
    for line in client_lines(text):
        body = line.rstrip("\r\n")
        quote = None
        for i, ch in enumerate(body):
            if quote is not None:
                quote = None if ch == quote else quote
            elif ch in "'\"" and (i == 0 or body[i - 1] in " \t:[{,-"):
                quote = ch
            elif ch == "#" and (i == 0 or body[i - 1] in " \t"):
                found[body[i:]] += 1
                break
    return found


def read(text: str) -> Reading | None:
    """The reading of `text`, or None when it is not a YAML document (or not a mapping) a plain parser reads."""
    try:
        node = _yaml().compose(text)
    except Exception:  # any parse failure (and a recursion error on deep nesting): not a document
        return None
    if node is None:
        return Reading([], comments(text))
    if not isinstance(node, MappingNode):
        return None
    pairs = [(k, v) for k, v in node.value if isinstance(k, ScalarNode)]
    keys = [(str(k.value), _value(v), k.start_mark.index, _pair_end(text, k, v)) for k, v in pairs]
    return Reading(keys, comments(text))


def _pair_end(text: str, key: Node, value: Node) -> int:
    """Where a top-level pair's text ends: its value's end, or for an alias (the node is the anchor's, written
    before) the end of the key's line."""
    if value.start_mark.index >= key.start_mark.index:
        return max(key.end_mark.index, value.end_mark.index)
    found = _BREAK.search(text, key.end_mark.index)
    return found.start() if found else len(text)


def fix_violations(before: str, after: str, spans: Iterable[tuple[int, int]]) -> list[str]:
    """What a quick fix broke: `before` read as YAML and `after` not; a top-level key, or its value, gone or
    changed where the fix did not edit that pair; a comment gone. `spans`: the edits' spans in `before`."""
    old = read(before)
    if old is None:
        return []  # nothing to keep
    new = read(after)
    if new is None:
        return ["the fixed text is not a YAML mapping a parser reads"]
    problems: list[str] = []
    spans = list(spans)
    untouched = [(k, v) for k, v, s, e in old.keys if not any(a <= e and s <= b for a, b in spans)]
    kept = Counter((k, repr(v)) for k, v, _, _ in new.keys)
    for k, v in untouched:
        if kept[(k, repr(v))] <= 0:
            changed = [repr(nv)[:120] for nk, nv, _, _ in new.keys if nk == k]
            problems.append(f"key {k!r} (not edited) lost or changed: {repr(v)[:120]} -> {changed or 'gone'}")
        kept[(k, repr(v))] -= 1
    # a comment still in the text counts as kept (commenting a key out keeps its comment inside the new one)
    lost = [c for c in old.comments - new.comments if after.count(c) < before.count(c)]
    if lost:
        problems.append(f"comments lost: {sorted(lost)[:5]}")
    return problems
