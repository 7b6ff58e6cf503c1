"""The gate every quick fix passes before it is offered: `vet_fix`.

A fix is a handful of text edits computed from the parsed document; written blindly they can break the file. Here
each fix is (a) written the way the file is written: an inserted or replaced line takes the line ending (CRLF, CR
or LF) of the line it replaces or follows, even in a file that mixes them (server/config/apply.py as_written, the
one place every fix's text is given its line breaks), and a line inserted after a last line without a line break
starts its own line; (b) refused where the value does not live where the edit would write it: on an alias
(`*name`), inside a merge key's (`<<:`) value, or over an anchor (`&name`) that other keys share; an anchor only its
own key uses is edited after `&name`, which stays; and (c) applied to the text and read back: the result parses,
every key and comment of the original is still there (a key goes only when the fix edits that key itself), every
key the fix does not edit keeps its value, and the finding the fix is for is gone when the static checks run
again. A fix that fails (c) is never shown; one refused by (b) carries its reason, which an editor can show on a
disabled action.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceStartEvent,
)

from server.common.findings import Finding, Fix, Span, TextEdit
from server.config.apply import apply_text, as_written, ends_with_break, line_starts, offset
from server.config.mesh import check
from server.config.resolve import Reader, load
from server.config.source import Entry, YamlSource, YamlSyntaxError, parse, plain, split_lines

log = logging.getLogger("asap")

# The static checks of a text: its document as read (None when it is not valid YAML) and the findings.
Recheck = Callable[[str], tuple[YamlSource | None, list[Finding]]]


@dataclass(frozen=True)
class Vetted:
    """What became of one fix: `fix` (its edits as they will be written) and `text` (the document after it) when
    it is offered; else `reason`, and `refused` when the reason is one to show (the value lives where ASAP does not
    edit) rather than a fix that would break the file or not repair its finding (never shown)."""

    title: str
    fix: Fix | None = None
    text: str | None = None
    reason: str | None = None
    refused: bool = False

    @property
    def ok(self) -> bool:
        return self.fix is not None


def static_checks(path: Path | None, reader: Reader | None = None, default_slice: str | None = None) -> Recheck:
    """The static checks (config loading and the mesh rules, no estimate) of a text for `path`: what a rule fix
    must clear. The document they read is the one the result is read back from (one parse, not two)."""

    def run(text: str) -> tuple[YamlSource | None, list[Finding]]:
        cfg = load(path, text, reader) if reader else load(path, text)
        chk = check(cfg, default_slice)
        return cfg.document, [*cfg.findings, *chk.findings] if cfg.is_maxtext else list(cfg.findings)

    return run


def vet_fix(
    text: str,
    fix: Fix,
    *,
    path: Path | None = None,
    clears: tuple[str, str | None] | None = None,
    recheck: Recheck | None = None,
    document: YamlSource | None = None,
) -> Vetted:
    """`fix` made safe for `text` (the document at `path`), or why it is not offered. `clears`: the (code, key) of
    the finding the fix is for, which `recheck` (the findings of a text) must no longer report. `document`: `text`
    already parsed (the analysis has it), to save parsing it again."""
    try:
        return _vet(
            text, document if document is not None and document.text == text else None, fix, path, clears, recheck
        )
    except _Refusal as r:
        log.info("quick fix %r not offered: %s", fix.title, r.reason)
        return Vetted(fix.title, reason=r.reason, refused=r.show)


class _Refusal(Exception):
    def __init__(self, reason: str, show: bool = False):
        super().__init__(reason)
        self.reason, self.show = reason, show


@dataclass
class _Edit:
    start: int
    end: int
    new_text: str
    original: TextEdit

    def __post_init__(self) -> None:
        self.at = (self.start, self.end)  # where the fix wrote it, before any move past an anchor


def _vet(
    text: str,
    document: YamlSource | None,
    fix: Fix,
    path: Path | None,
    clears: tuple[str, str | None] | None,
    rc: Recheck | None,
) -> Vetted:
    if not fix.edits:
        raise _Refusal("it changes nothing")
    for te in fix.edits:
        if te.file is not None and path is not None and te.file != path and te.file.resolve() != path.resolve():
            raise _Refusal(f"it edits another file ({te.file.name})", show=True)
    starts = line_starts(text)
    edits = sorted(
        (
            _Edit(
                offset(text, e.span.line, e.span.column, starts),
                offset(text, e.span.end_line, e.span.end_column, starts),
                e.new_text,
                e,
            )
            for e in fix.edits
        ),
        key=lambda e: (e.start, e.end),
    )
    for x, y in itertools.pairwise(edits):
        if y.start < x.end:
            raise _Refusal("its edits overlap")

    shape = _shape(text)
    if shape is not None:
        for e in edits:
            _where_the_value_lives(text, e, shape)

    out: list[TextEdit] = []
    for e in edits:
        new = as_written(text, e.start, e.end, e.new_text, starts)
        if (e.start, e.end) == e.at and new == e.original.new_text:
            out.append(e.original)
        else:
            open_end = bool(text) and not ends_with_break(text)
            out.append(replace(e.original, span=_span(starts, e.start, e.end, open_end), new_text=new))
    after = apply_text(text, out)

    old = document or _parsed(text, path, "the document")
    if rc is None:
        _reads_back(old, _parsed(after, path, "the result"), out)
        return Vetted(fix.title, fix=replace(fix, edits=tuple(out)), text=after)
    try:
        reread, findings = rc(after)
    except Exception as ex:  # the loader's or a check's failure on the result: the fix is not known to be safe
        log.exception("quick fix %r: the checks failed on the result", fix.title)
        raise _Refusal(f"the checks failed on the result ({type(ex).__name__})") from None
    if reread is None:
        why = next((f.message for f in findings), "invalid YAML")
        raise _Refusal(f"the result would not be valid YAML ({why})")
    _reads_back(old, reread, out)
    if clears is not None and any((str(f.code), f.key) == (str(clears[0]), clears[1]) for f in findings):
        raise _Refusal(f"the result still has {clears[0]} on {clears[1]}")
    return Vetted(fix.title, fix=replace(fix, edits=tuple(out)), text=after)


def _span(starts: list[int], a: int, b: int, open_end: bool = False) -> Span:
    """The LSP span of offsets `a`..`b`. With `open_end` (the text's last line has no line break) the end of the
    text is on that last line, never on a line after it, which the document does not have."""

    def pos(off: int) -> tuple[int, int]:
        line = bisect.bisect_right(starts, off) - 1
        line = min(line, len(starts) - 1)
        if open_end and line == len(starts) - 1 and len(starts) > 1:
            line -= 1
        return line, off - starts[line]

    return Span(*pos(a), *pos(b))


# -- (b) where the value lives -------------------------------------------------------------------------------


@dataclass
class _Node:
    """An anchored node, an alias or a merge key's value: its extent in the text and the top-level key holding it."""

    name: str
    start: int
    end: int
    key: str | None
    token: tuple[int, int] | None = None  # an anchor's `&name`


@dataclass
class _Shape:
    anchors: list[_Node] = field(default_factory=list)
    aliases: list[_Node] = field(default_factory=list)
    merges: list[_Node] = field(default_factory=list)


_MAYBE_SHARED = re.compile(r"(?:^|[\s\[{,:])[&*][^\s\[\]{},]|<<[ \t]*:", re.M)
_ANCHOR = re.compile(r"&\S+[ \t]*")
_local = threading.local()
_SHAPES: dict[str, _Shape | None] = {}
_SHAPES_LOCK = threading.Lock()


def _parser() -> YAML:
    y = getattr(_local, "yaml", None)
    if y is None:
        y = _local.yaml = YAML(typ="rt")
    y.doc_infos.clear()  # ruamel adds one per parse and drops none (as source.py's loader)
    return y


@dataclass
class _Frame:
    is_map: bool
    expect_key: bool = True
    merge_next: int | None = None  # where the `<<` key of the next value started
    closes: list[_Node] = field(default_factory=list)


def _shape(text: str) -> _Shape | None:
    """The anchors, aliases and merge keys of the text, from the parser's events; None when it has none. The
    last few texts' are kept: the fixes of one version are vetted one after another."""
    if ("&" not in text and "*" not in text and "<<" not in text) or not _MAYBE_SHARED.search(text):
        return None
    with _SHAPES_LOCK:
        if text in _SHAPES:
            return _SHAPES[text]
    shape = _read_shape(text)
    with _SHAPES_LOCK:
        _SHAPES[text] = shape
        while len(_SHAPES) > 4:
            _SHAPES.pop(next(iter(_SHAPES)))
    return shape


def _read_shape(text: str) -> _Shape | None:
    shape = _Shape()
    stack: list[_Frame] = []
    top: str | None = None
    try:
        for ev in _parser().parse(text):
            if isinstance(ev, CollectionEndEvent):
                for n in stack.pop().closes:
                    n.end = ev.end_mark.index
                continue
            if not isinstance(ev, (ScalarEvent, AliasEvent, MappingStartEvent, SequenceStartEvent)):
                continue
            parent = stack[-1] if stack else None
            is_key = parent is not None and parent.is_map and parent.expect_key
            merge_at: int | None = None
            if parent is not None and parent.is_map:
                parent.expect_key = not parent.expect_key
                if is_key:
                    if len(stack) == 1:
                        top = ev.value if isinstance(ev, ScalarEvent) else None
                    if isinstance(ev, ScalarEvent) and ev.value == "<<" and not ev.style:
                        parent.merge_next = ev.start_mark.index
                elif parent.merge_next is not None:
                    merge_at, parent.merge_next = parent.merge_next, None
            start, end = ev.start_mark.index, ev.end_mark.index
            frame = None
            if isinstance(ev, (MappingStartEvent, SequenceStartEvent)):
                frame = _Frame(is_map=isinstance(ev, MappingStartEvent))
                stack.append(frame)
            if isinstance(ev, AliasEvent):
                shape.aliases.append(_Node(str(ev.anchor), start, end, top))
            elif ev.anchor:
                name = str(ev.anchor)
                at = text.find("&" + name, start)
                node = _Node(name, start, end, top, (at, at + 1 + len(name)) if at >= 0 else None)
                shape.anchors.append(node)
                if frame is not None:
                    frame.closes.append(node)
            if merge_at is not None:
                node = _Node("<<", merge_at, end, top)
                shape.merges.append(node)
                if frame is not None:
                    frame.closes.append(node)
    except YAMLError:
        return None  # the reading back decides
    return shape if shape.anchors or shape.aliases or shape.merges else None


def _touches(e: _Edit, n: _Node) -> bool:
    """Whether an edit writes over or into a node: overlaps it, or inserts strictly inside it."""
    if e.start == e.end:
        return n.start < e.start < n.end
    return e.start < n.end and e.end > n.start


def _where_the_value_lives(text: str, e: _Edit, shape: _Shape) -> None:
    """Refuse an edit through an alias, into a merge key's value or over a shared anchor; an anchor only its own
    key uses is kept, the edit moved after it."""
    for a in shape.aliases:
        if _touches(e, a):
            held = next((n for n in shape.anchors if n.name == a.name and n.start < a.start), None)
            where = f", whose value is the anchor &{a.name}{_of(held.key if held else None)}" if held else ""
            raise _Refusal(
                f"{a.key or 'the value'} is the alias *{a.name}{where}: ASAP does not edit through an alias", True
            )
    for m in shape.merges:
        if _touches(e, m):
            raise _Refusal(f"the value is inside the merge key <<{_of(m.key)}: ASAP does not edit a merged value", True)
    for n in sorted(shape.anchors, key=lambda n: n.start, reverse=True):  # innermost first
        if not _touches(e, n):
            continue
        users = sorted({a.key or "another value" for a in shape.aliases if a.name == n.name and a.key != n.key})
        if users:
            raise _Refusal(
                f"the value is the anchor &{n.name}{_of(n.key)}, which {', '.join(users)} also use"
                f"{'s' if len(users) == 1 else ''} through *{n.name}: editing it would change "
                f"{'it' if len(users) == 1 else 'them'} too; ASAP does not edit a shared anchor",
                True,
            )
        if n.token is None:
            raise _Refusal(f"the anchor &{n.name} was not found in the text", True)
        ts, te = n.token
        if (e.start < te and e.end > ts) or (e.start == e.end and ts < e.start < te):
            anchor = _ANCHOR.match(text, ts)
            keep = anchor.end() if anchor else te
            if e.start < ts or e.end <= keep:
                raise _Refusal(f"the edit would remove the anchor &{n.name}{_of(n.key)}", True)
            e.start = keep  # write the value after `&name `, which stays


def _of(key: str | None) -> str:
    return f" (of {key})" if key else ""


# -- (c) reading the result back -----------------------------------------------------------------------------


def _reads_back(old: YamlSource, new: YamlSource, edits: list[TextEdit]) -> None:
    if old.is_mapping and not new.is_mapping:
        raise _Refusal("the result would not be a YAML mapping")
    for key, entry in old.entries.items():
        renamed = any(_on_key(x, entry) for x in edits)
        got = new.entries.get(key)
        if got is None:
            if not renamed:
                raise _Refusal(f"the result would lose the key {key}")
            continue
        if not renamed and not any(_on_value(x, entry) for x in edits) and plain(got.value) != plain(entry.value):
            raise _Refusal(f"the result would change {key}, which the fix does not edit")
    kept = Counter(_comments(new.text))
    for c, n in (Counter(_comments(old.text)) - kept).items():  # a comment not kept as is: inside a new one?
        if sum(m for k, m in kept.items() if c in k) < n:
            raise _Refusal(f"the result would lose the comment {c!r}")


def _parsed(text: str, path: Path | None, what: str) -> YamlSource:
    try:
        return parse(text, path)
    except YamlSyntaxError as ex:
        raise _Refusal(f"{what} would not be valid YAML (line {ex.span.line + 1}: {ex.message})") from None
    except Exception as ex:  # the reader's own failure on unusual YAML: not known to be safe
        log.exception("quick fixes: %s could not be read back", what)
        raise _Refusal(f"{what} could not be read back ({type(ex).__name__})") from None


def _lines(e: TextEdit) -> tuple[int, int]:
    return e.span.line, e.span.end_line


def _inserts_lines(e: TextEdit) -> bool:
    """A point insertion of whole lines at the start of a line (or a line of its own at the end of the file)."""
    sp = e.span
    whole = sp.column == 0 and e.new_text.endswith(("\n", "\r"))
    return sp.line == sp.end_line and sp.column == sp.end_column and (whole or e.new_text.startswith(("\n", "\r")))


def _on_key(e: TextEdit, entry: Entry) -> bool:
    """Whether an edit rewrites the key itself on its line (a rename, or commenting the line out): the one way a
    fix may make a key go. Deleting lines is not."""
    ks, sp = entry.key_span, e.span
    return (
        bool(e.new_text) and not _inserts_lines(e) and sp.line == sp.end_line == ks.line and sp.column <= ks.end_column
    )


def _on_value(e: TextEdit, entry: Entry) -> bool:
    """Whether an edit lies on the lines of the key's entry or its value (a changed value is the fix's to make)."""
    if _inserts_lines(e):
        return False
    lo, hi = _lines(e)
    for span in (entry.key_span, entry.value_span):
        if lo <= max(span.end_line, entry.key_span.line) and hi >= span.line:
            return True
    return False


def _comments(text: str) -> list[str]:
    """Every comment of the text (from `#` to the end of its line), outside quoted scalars on the line."""
    out = []
    for line in split_lines(text):
        if "#" not in line:
            continue
        quote = ""
        for i, ch in enumerate(line):
            if quote:
                if ch == quote and not (quote == '"' and _escaped(line, i)):
                    quote = ""
            elif ch in "'\"" and (i == 0 or line[i - 1] in " \t:[{,-"):
                quote = ch
            elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
                out.append(line[i:].rstrip())
                break
    return out


def _escaped(line: str, i: int) -> bool:
    n = 0
    while i - n - 1 >= 0 and line[i - n - 1] == "\\":
        n += 1
    return n % 2 == 1
