"""One YAML file read with ruamel.yaml round-trip: top-level keys with the exact span of
each key and scalar value, so findings point at the key and fixes edit only the value.

Also what every reader of a config shares: lines as editors count them (`split_lines`: only `\n`, `\r\n` and
`\r` end a line; Python's `str.splitlines` and pygls also break at U+2028, U+2029, U+0085, `\v`, `\f` and
`\x1c`-`\x1e`, which LSP clients do not), a file's text (`read_text`: UTF-8 or a located error), and the
limits past which a document is refused with a located finding instead of exhausting the parser: its size
(`MAX_DOCUMENT_BYTES`, `MAX_DOCUMENT_LINES`, `too_large`: ASAP007), its nesting (`MAX_DEPTH`), the length of
an integer (`MAX_INT_DIGITS`) and what its aliases expand to (`MAX_COLLECTION_ALIASES`, `MAX_ALIAS_NODES`: ASAP008,
checked by `BoundedComposer`, which every ruamel loader of user text uses).
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.composer import Composer
from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, ReusedAnchorWarning, YAMLError
from ruamel.yaml.events import MappingEndEvent, MappingStartEvent, SequenceEndEvent, SequenceStartEvent
from ruamel.yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode
from ruamel.yaml.reader import ReaderError

from server.common.codes import DiagCode
from server.common.findings import Finding, Severity, Span

log = logging.getLogger("asap")

# YAML 1.2 lets an anchor be defined again (later aliases take the new one); ruamel warns on stderr each time.
warnings.filterwarnings("ignore", category=ReusedAnchorWarning)

# -- limits -------------------------------------------------------------------------------------------------
# A MaxText config is a few kilobytes, a few levels deep, its integers a few digits. Past these limits the
# document gets one located finding and nothing else is analysed: ruamel's composer recurses once per level
# (Python's recursion limit ends it near 250 levels) and Python refuses to convert integers of more than 4300
# digits (both ASAP001); the analysis grows with the text (MaxText's own base.yml, the largest config it ships, is
# about 50 KB and 1,000 lines and takes a tenth of a second; 60 KB of new keys about a second, 50,000 keys about
# eight), so a document over MAX_DOCUMENT_BYTES or MAX_DOCUMENT_LINES is not a hand-written config and gets
# ASAP007, in the editor and on the command line alike.
MAX_DOCUMENT_BYTES = 512 * 1024  # UTF-8
MAX_DOCUMENT_LINES = 10_000
MAX_READ_BYTES = 16 * MAX_DOCUMENT_BYTES  # past this a file is not even read into memory (SourceReadError)
MAX_DEPTH = 64  # nested collections (a top-level mapping of lists is 2)
MAX_INT_DIGITS = 64
# An alias (`*name`) stands for the whole node its anchor names. ruamel shares that node (loading is cheap), but
# every consumer that walks a value (plain(), the fix vetting's comparison, messages that show the value) expands
# it: ten lists of ten aliases of the list before, six deep, is 10^6 values from 300 bytes ("billion laughs"), and
# `asap analyze` on a config using one as a value took 70-90 s, a code action on it 14 s. YAML parsers bound it:
# SnakeYAML and Symfony count the aliases of collections (50 and 128; an alias of a scalar adds one value, as writing
# it out would), go-yaml the ratio of values that aliases bring in. ASAP does both; a MaxText config uses a handful
# of aliases of a few values. Past either bound (or MAX_DEPTH levels reached through aliases) the document gets
# ASAP008 at the top-level key where it is crossed, and nothing in it is expanded by anyone.
MAX_COLLECTION_ALIASES = 100  # aliases of a list or mapping in one document (merge keys' `<<: *a` included)
MAX_ALIAS_NODES = 1_000  # values those aliases bring in, nested aliases counted as expanded

# -- lines ----------------------------------------------------------------------------------------------------
_BREAK = re.compile(r"\r\n|\r|\n")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
# Characters Python's str.splitlines (and so pygls) takes for line breaks that LSP clients do not; YAML's
# scanner ends a comment or a plain scalar at the first three, but counts lines only at \n, \r\n and \r.
ODD_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_YAML_BREAKS = re.compile("[\x85\u2028\u2029]")


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """The lines of `text` as LSP clients and ASAP count them: only `\n`, `\r\n` and `\r` end a line. Like
    `str.splitlines` otherwise: no empty last line after a final line break, `[]` for an empty text."""
    if keepends:
        return _LINE.findall(text)
    lines = _BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def position(text: str, offset: int) -> tuple[int, int]:
    """The 0-based (line, column) of a code-point offset, lines as split_lines counts them."""
    offset = max(0, min(offset, len(text)))
    line, start = 0, 0
    for m in _BREAK.finditer(text, 0, offset):
        if m.end() > offset:  # between the \r and \n of one break: still on its line
            break
        line, start = line + 1, m.end()
    return line, offset - start


def _char_name(ch: str) -> str:
    return f"U+{ord(ch):04X} {unicodedata.name(ch, 'control character')}"


# -- reading a file -------------------------------------------------------------------------------------------
class SourceReadError(OSError):
    """A file that exists but cannot be read as a config: not UTF-8, or larger than MAX_READ_BYTES.
    An OSError, so callers that report unreadable files report these too; `strerror` says why and where, `line`
    and `column` (0-based) locate it in the file."""

    def __init__(self, path: Path | None, reason: str, line: int = 0, column: int = 0):
        super().__init__(reason)
        self.strerror = reason
        self.filename = str(path) if path is not None else None
        self.line = line
        self.column = column


def decode_error(e: UnicodeDecodeError, path: Path | None = None) -> SourceReadError:
    """A UnicodeDecodeError as a located SourceReadError: "not UTF-8 (byte 0xe9 at line 3)"."""
    data = bytes(e.object)
    before = data[: e.start]
    line = len(re.findall(rb"\r\n|\r|\n", before))
    start = max(before.rfind(b"\n"), before.rfind(b"\r")) + 1
    column = len(before[start:].decode("utf-8", errors="replace"))
    byte = data[e.start] if e.start < len(data) else 0
    return SourceReadError(path, f"not UTF-8 (byte 0x{byte:02x} at line {line + 1})", line, column)


def read_text(path: Path) -> str:
    """A config file's text. Raises OSError: SourceReadError, located, for a file that is not UTF-8 or is larger
    than MAX_READ_BYTES (only that much is read). A file between MAX_DOCUMENT_BYTES and MAX_READ_BYTES is read,
    and `parse` refuses it with its located ASAP007."""
    with open(path, "rb") as f:
        data = f.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise SourceReadError(path, f"too large: more than {_size(MAX_READ_BYTES)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise decode_error(e, path) from None


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB" if n >= 1024 * 1024 else f"{n / 1024:.0f} kB"


def oversize(text: str) -> tuple[str, Span] | None:
    """Why a text is over the size limits and where to say so (its first line), else None. Cheap: counting line
    breaks runs in C, and only a text near the byte limit is encoded."""
    size = len(text)  # characters: at most the UTF-8 bytes, at least a quarter of them
    if MAX_DOCUMENT_BYTES // 4 < size <= MAX_DOCUMENT_BYTES:
        size = len(text.encode("utf-8", "surrogatepass"))
    lines = max(text.count("\n"), text.count("\r")) + 1
    if size <= MAX_DOCUMENT_BYTES and lines <= MAX_DOCUMENT_LINES:
        return None
    head = text[:200]
    first = min((i for i in (head.find("\n"), head.find("\r")) if i >= 0), default=len(head))
    what = f"{size / 1024:,.0f} KiB" if size > MAX_DOCUMENT_BYTES else f"{lines:,} lines"
    return (
        f"Not analysed: the document is {what}, over ASAP's limit "
        f"({MAX_DOCUMENT_BYTES // 1024} KiB, {MAX_DOCUMENT_LINES:,} lines)",
        Span(0, 0, 0, min(first, 200)),
    )


def too_large(text: str, path: Path | None = None, severity: Severity = Severity.ERROR) -> Finding | None:
    """The one finding (ASAP007) for a document over the size limits, else None. A front end can call it before
    deciding to analyse at all; `parse` raises it as a YamlSyntaxError."""
    over = oversize(text)
    return None if over is None else Finding(DiagCode.DOCUMENT_TOO_LARGE, severity, over[0], None, path, over[1])


class YamlSyntaxError(Exception):
    """The text is not valid YAML (or is past one of the limits); `span` is the error's position, `key` the
    top-level key whose entry holds it (None before the first key), `code` the finding's (ASAP001, ASAP007 for
    a document over the size limits, ASAP008 for one whose aliases expand too far)."""

    def __init__(self, message: str, span: Span, key: str | None = None, code: DiagCode = DiagCode.INVALID_YAML):
        super().__init__(message)
        self.message = message
        self.span = span
        self.key = key
        self.code = code


@dataclass(frozen=True)
class Entry:
    """A top-level `key: value` of one file."""

    key: str
    value: Any
    file: Path | None
    key_span: Span
    value_span: Span  # the scalar token (quotes included); for a collection, its first line
    # Brought in by a YAML merge key (`<<: {k: v}`, `<<: *anchor`): both spans are on the `<<` line, which a
    # fix must not rewrite as this key's value (writing `key: value` beside it overrides the merge).
    merged: bool = False


@dataclass
class YamlSource:
    path: Path | None
    text: str
    entries: dict[str, Entry]  # the keys written in the top-level mapping, in file order
    is_mapping: bool
    lines: list[str]  # split_lines(text)
    merged: dict[str, Entry] = field(default_factory=dict)  # keys only a merge key (`<<`) brings in

    def all_entries(self) -> dict[str, Entry]:
        """Every top-level key as YAML loads it: the merged ones, then the written ones (which win)."""
        return {**self.merged, **self.entries} if self.merged else self.entries


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


class _Constructor(RoundTripConstructor):
    """ruamel's round-trip constructor with MAX_INT_DIGITS: a longer integer is a located error, not Python's
    ValueError from int() (4300 digits) or seconds of quadratic conversion below that."""

    def construct_yaml_int(self, node: Any) -> Any:
        digits = sum(c.isdigit() for c in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise ConstructorError(
                None,
                None,
                f"integer of {digits} digits: ASAP reads integers of at most {MAX_INT_DIGITS} digits",
                node.start_mark,
            )
        return super().construct_yaml_int(node)


_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_yaml_int)


# -- aliases --------------------------------------------------------------------------------------------------
class AliasExpansionError(MarkedYAMLError):
    """A document whose aliases expand past MAX_COLLECTION_ALIASES, MAX_ALIAS_NODES or MAX_DEPTH; `problem_mark`
    is the top-level key where the bound is crossed (the document's start when it is not a mapping)."""


class BoundedComposer(Composer):
    """ruamel's composer, refusing a document whose aliases expand too far (AliasExpansionError) before anything
    is constructed from it. A loader of user text sets `yaml.Composer = BoundedComposer`."""

    asap_aliases = 0  # aliases in the document being composed

    def compose_document(self) -> Any:
        self.asap_aliases = 0
        node = super().compose_document()
        if self.asap_aliases and node is not None:  # a document without aliases has nothing to expand
            check_aliases(node)
        return node

    def return_alias(self, a: Any) -> Any:
        self.asap_aliases += 1
        return a


def check_aliases(root: Node) -> None:
    """Raise AliasExpansionError when the composed document `root` (aliases are its nodes reached again) expands
    past the bounds. Walks each node once, in document order, so an alias's node is already measured; an alias
    inside its own anchor (`a: &a [*a]`, which ruamel constructs as None there) counts as one value."""
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values, levels) once expanded
    open_: set[int] = set()
    aliases, brought = 0, 0
    key: Node | None = None

    def refuse(problem: str) -> AliasExpansionError:
        mark = key.start_mark if key is not None else root.start_mark
        return AliasExpansionError(problem=f"Not analysed: {problem}", problem_mark=mark)

    def where() -> str:
        name = key.value if isinstance(key, ScalarNode) else None
        return name if isinstance(name, str) else "the document"

    def too_deep() -> AliasExpansionError:
        return refuse(
            f"through its aliases, {where()} is nested more than {MAX_DEPTH} levels deep; ASAP reads configs at "
            f"most {MAX_DEPTH} levels deep"
        )

    def visit(node: Node) -> tuple[int, int]:
        nonlocal aliases, brought
        seen = measured.get(id(node))
        if seen is not None or id(node) in open_:  # an alias
            if not isinstance(node, CollectionNode):
                return 1, 0
            values, levels = seen or (1, 1)
            aliases += 1
            brought += values
            if aliases > MAX_COLLECTION_ALIASES:
                raise refuse(
                    f"with the alias *{node.anchor} in {where()}, the document has more than "
                    f"{MAX_COLLECTION_ALIASES} aliases of lists or mappings; ASAP expands at most "
                    f"{MAX_COLLECTION_ALIASES} (a guard against alias bombs)"
                )
            if brought > MAX_ALIAS_NODES:
                raise refuse(
                    f"with the alias *{node.anchor} in {where()}, the document's aliases expand to more than "
                    f"{MAX_ALIAS_NODES:,} values; ASAP expands at most {MAX_ALIAS_NODES:,} (a guard against alias "
                    "bombs)"
                )
            return values, levels
        if not isinstance(node, CollectionNode):
            measured[id(node)] = (1, 0)
            return 1, 0
        open_.add(id(node))
        children = [c for pair in node.value for c in pair] if isinstance(node, MappingNode) else node.value
        values, levels = 1, 0
        for child in children:
            v, lv = visit(child)
            values, levels = values + v, max(levels, lv)
        levels += 1
        if levels > MAX_DEPTH:
            raise too_deep()
        open_.discard(id(node))
        measured[id(node)] = (values, levels)
        return values, levels

    if not isinstance(root, MappingNode):
        visit(root)
        return
    for k, v in root.value:  # the top-level mapping's own level is counted at each key, to refuse that key
        key = k
        if max(visit(k)[1], visit(v)[1]) + 1 > MAX_DEPTH:
            raise too_deep()


_local = threading.local()


def _yaml() -> YAML:
    """One round-trip loader per thread (ruamel's YAML objects are not thread-safe)."""
    y = getattr(_local, "yaml", None)
    if y is None:
        y = _local.yaml = YAML(typ="rt")
        y.Composer = BoundedComposer
        y.Constructor = _Constructor
        y.allow_duplicate_keys = False
    y.doc_infos.clear()  # ruamel adds one per load and drops none: a reused loader grew with every parse (issue 25)
    return y


# -- nesting ----------------------------------------------------------------------------------------------
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_PAIR = re.compile(r"[\[{][\]}]")
_BLOCK_PREFIX = re.compile(r"^(?:[ ]|[-?:](?=[ ]|$))*", re.M)
_SHALLOW = 16  # a block prefix shorter than this on every line: at most 2 x 16 levels of block nesting
_DEEP_PREFIX = re.compile(r"^[ ?:-]{" + str(_SHALLOW) + "}", re.M)  # a superset of the prefixes: quick


def _depth_bound(text: str) -> int:
    """A bound on the nesting depth, cheap enough for every keystroke: each level of block nesting starts at
    least one column to the right of the one above (a list under a key may share its column, hence x2), and
    each flow level opens a bracket. Brackets in strings and comments count too: opening ones raise the bound,
    closing ones could lower it below the truth, which the parse's RecursionError then catches."""
    indent = _SHALLOW - 1
    if _DEEP_PREFIX.search(text):
        indent = max(m.end() - m.start() for m in _BLOCK_PREFIX.finditer(text))
    opening = text.count("[") + text.count("{")
    if opening + 2 * (indent + 1) <= MAX_DEPTH:
        return opening + 2 * (indent + 1)
    brackets = _NOT_BRACKET.sub("", text)
    depth = 0  # each pass removes the innermost pairs: as many passes as levels
    while depth <= MAX_DEPTH:
        brackets, removed = _BRACKET_PAIR.subn("", brackets)
        if not removed:
            break
        depth += 1
    unclosed = brackets.count("[") + brackets.count("{")
    return depth + unclosed + 2 * (indent + 1)


_BRACKET = re.compile(r"[\[\]{}]")


def _deep_flow_end(text: str) -> int | None:
    """Just past the first bracket that opens a flow collection MAX_DEPTH + 1 levels deep, counting every bracket
    (in quotes and comments too: a guess), or None when no bracket does."""
    depth = 0
    for m in _BRACKET.finditer(text):
        depth += 1 if m.group() in "[{" else -1
        if depth > MAX_DEPTH:
            return m.end()
    return None


def _too_deep(text: str) -> tuple[int, int] | None:
    """Where the first collection deeper than MAX_DEPTH starts, or None. YAML errors are left to the parse proper.

    ruamel's scanner looks ahead on a line for the `:` that would make each open bracket a key, and checks every
    open bracket at each token: a line of 1,000 nested brackets took it 2 s. So the events are first read from the
    text cut just past where the brackets guess the limit is crossed (a prefix of the text parses into the same
    collections, as deep or shallower: a `:` after them can only add a mapping level), and from the whole text only
    when that does not find it (the guess counted brackets in quotes or comments)."""
    end = _deep_flow_end(text)
    if end is not None:
        at = _first_too_deep(text[:end])
        if at is not None:
            return at
    return _first_too_deep(text)


def _first_too_deep(text: str) -> tuple[int, int] | None:
    """Where the first collection deeper than MAX_DEPTH starts in ruamel's events (its parser makes them without
    recursing), or None."""
    depth = 0
    try:
        for ev in YAML(typ="rt").parse(text):
            if isinstance(ev, (MappingStartEvent, SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    return ev.start_mark.line, ev.start_mark.column
            elif isinstance(ev, (MappingEndEvent, SequenceEndEvent)):
                depth -= 1
    except (YAMLError, RecursionError):
        return None
    return None


def _check_depth(text: str, lines: list[str]) -> None:
    if _depth_bound(text) <= MAX_DEPTH:
        return
    at = _too_deep(text)
    if at is not None:
        raise _nested_too_deeply(lines, *at)


def _nested_too_deeply(lines: list[str], line: int, col: int) -> YamlSyntaxError:
    end = len(lines[line]) if 0 <= line < len(lines) else col
    return YamlSyntaxError(
        f"Invalid YAML: document nested too deeply (more than {MAX_DEPTH} levels); ASAP reads configs "
        f"at most {MAX_DEPTH} levels deep",
        Span(line, col, line, max(col, end)),
    )


# A raw top-level entry: key, plain value, (key line, key col), (value line, value col), merged; lines relative
# to the text that was parsed.
_Raw = tuple[str, Any, tuple[int, int], tuple[int, int], bool]
_MERGE_KEY = re.compile(r"^([ ]*)<<[ ]*:[ ]*")


def _merge_position(data: CommentedMap, text: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """Where the top-level mapping's merge key (`<<`) and its value are: the position merged keys take."""
    col = data.lc.col or 0
    for i, line in enumerate(split_lines(text)):
        m = _MERGE_KEY.match(line)
        if m and len(m[1]) == col:
            return (i, col), (i, m.end())
    return (0, 0), (0, 0)


def _load_entries(text: str) -> list[_Raw] | None:
    """Round-trip load; None when the document is not a mapping. Raises ruamel's errors."""
    data = _yaml().load(text)
    if not isinstance(data, CommentedMap):
        return None
    out: list[_Raw] = []
    merge_at: tuple[tuple[int, int], tuple[int, int]] | None = None
    for k in data:
        if not isinstance(k, str):
            continue
        if k in data.lc.data:
            out.append((k, plain_scalar(data[k]), data.lc.key(k), data.lc.value(k), False))
            continue
        if merge_at is None:  # a key only the merge key brings in: ruamel keeps no position for it
            merge_at = _merge_position(data, text)
        out.append((k, plain_scalar(data[k]), *merge_at, True))
    return out


# Incremental parsing. MaxText configs are flat top-level mappings, and a keystroke changes one
# entry: the text is cut where a top-level key starts, and each piece is parsed (and cached) on its
# own, so an edit re-parses only its piece. Anything unusual (anchors, aliases, merge keys,
# directives, several documents, tabs) or any piece that fails to parse alone goes to a parse of the
# whole document, which alone decides errors and their positions.
_TOP_KEY = re.compile(r"""^(?P<key>"[^"\n]*"|'[^'\n]*'|[A-Za-z_][\w.\-]*)[ ]*:(?:[ ]|$)""")
_UNUSUAL = re.compile(r"(?:^|[\s\[{,])[&*][\w-]|<<\s*:|^(?:---|\.\.\.|%)|[\t\x85\u2028\u2029]", re.M)
_PIECES: OrderedDict[str, list[_Raw]] = OrderedDict()
_PIECES_MAX = 8192
# and at most this many characters: a piece's parsed value takes about 38 bytes a character when it is a long list,
# and each edit inside a 480 KB list value was a new piece kept (18 MiB a version, issue 25). The newest piece stays.
_PIECES_MAX_CHARS = 1_000_000
_pieces_chars = 0
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
    global _pieces_chars
    with _PIECES_LOCK:
        if piece not in _PIECES:
            _pieces_chars += len(piece)
        _PIECES[piece] = raw
        while len(_PIECES) > 1 and (len(_PIECES) > _PIECES_MAX or _pieces_chars > _PIECES_MAX_CHARS):
            gone, _ = _PIECES.popitem(last=False)
            _pieces_chars -= len(gone)
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
        except Exception:  # a YAML error, or anything else: the whole-document parse decides and locates it
            return None
        if raw is None:
            return None
        for key, value, (kl, kc), (vl, vc), merged in raw:
            if key in seen:
                return None  # a duplicate key: let the whole-document parse report it
            seen.add(key)
            out.append((key, value, (kl + start, kc), (vl + start, vc), merged))
    return out or None


def parse(text: str, path: Path | None = None, incremental: bool = True) -> YamlSource:
    """Parse one file. Raises YamlSyntaxError located at the parser's mark, or at the first place past one of
    the limits (MAX_DOCUMENT_BYTES and MAX_DOCUMENT_LINES: ASAP007; MAX_DEPTH, MAX_INT_DIGITS; the aliases'
    MAX_COLLECTION_ALIASES and MAX_ALIAS_NODES: ASAP008)."""
    over = oversize(text)
    if over is not None:
        raise YamlSyntaxError(over[0], over[1], code=DiagCode.DOCUMENT_TOO_LARGE)
    lines = split_lines(text)
    try:
        _check_depth(text, lines)
        raw = _incremental(text, lines) if incremental else None
        if raw is None:
            raw = _load_whole(text, lines)
    except YamlSyntaxError as e:
        e.key = _key_of_line(lines, e.span.line)
        raise
    entries: dict[str, Entry] = {}
    merged: dict[str, Entry] = {}
    if raw is None:
        return YamlSource(path, text, entries, False, lines)
    bom = int(text.startswith("\ufeff"))  # ruamel does not count a byte-order mark as a column; the text has it
    for key, value, (kl, kc), (vl, vc), is_merged in raw:
        kc, vc = kc + (bom if kl == 0 else 0), vc + (bom if vl == 0 else 0)
        line = lines[kl] if 0 <= kl < len(lines) else ""
        if is_merged:
            key_span = Span(kl, kc, kl, kc + 2)  # the `<<`
            value_span = Span(vl, vc, vl, max(vc, len(line)))
            merged[key] = Entry(key, value, path, key_span, value_span, merged=True)
            continue
        kc = _key_start(line, kc)
        key_end = kc + len(key)
        if line[kc : kc + 1] in ("'", '"'):
            key_end = _scalar_end(line, kc)
        if value is None:  # `key:` with nothing after it: the point just past the colon
            vl, vc = kl, key_end + 1
        elif (vl, vc) < (kl, kc):  # an alias (`key: *name`): ruamel gives the anchored node's position
            vl, vc = kl, _after_colon(line, key_end)
        if isinstance(value, (dict, list)):
            v_end = (vl, len(lines[vl]) if vl < len(lines) else vc)
        else:
            v_end = (vl, _scalar_end(lines[vl], vc) if vl < len(lines) else vc)
        entries[key] = Entry(key, value, path, Span(kl, kc, kl, key_end), Span(vl, vc, *v_end))
    return YamlSource(path, text, entries, True, lines, merged)


def _key_of_line(lines: list[str], line: int) -> str | None:
    """The top-level key whose entry holds `line`: the last one that starts at or above it."""
    for i in range(min(line, len(lines) - 1), -1, -1):
        m = _TOP_KEY.match(lines[i])
        if m:
            return m["key"][1:-1] if m["key"][0] in "'\"" else m["key"]
    return None


_NODE_PROPERTIES = re.compile(r"(?:[&!][^\s]*[ ]+)+")


def _key_start(line: str, col: int) -> int:
    """The key's own text: past an anchor or a tag written before it (`&k key: 1`)."""
    m = _NODE_PROPERTIES.match(line, col)
    return m.end() if m else col


def _after_colon(line: str, key_end: int) -> int:
    m = re.compile(r"[ ]*:[ ]*").match(line, key_end)
    return m.end() if m else key_end


def _load_whole(text: str, lines: list[str]) -> list[_Raw] | None:
    """The whole document's entries; every way the parser can fail becomes a located YamlSyntaxError."""
    try:
        return _load_entries(text)
    except AliasExpansionError as e:  # valid YAML that expands too far: its own code, at the key
        line, col = e.problem_mark.line, e.problem_mark.column
        col += int(line == 0 and text.startswith("\ufeff"))
        span = _token_span(lines, line, col)
        raise YamlSyntaxError(str(e.problem), span, code=DiagCode.ALIASES_EXPAND_TOO_FAR) from None
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        if e.context_mark is not None and (e.context or "").startswith("while scanning"):
            # the scanner gives up where the token it was reading should have ended (often the next line or the
            # end of the text); the token itself (an unclosed quote, a key without `:`) starts at the context mark
            mark = e.context_mark
        line, col = (mark.line, mark.column) if mark else (0, 0)
        col += int(line == 0 and text.startswith("\ufeff"))  # a byte-order mark is no column to ruamel
        problem = e.problem or e.context or "invalid YAML"
        detail = f"{e.context}: {problem}" if e.context and e.problem else problem
        index = getattr(mark, "index", None) if mark else None
        raise _syntax_error(f"Invalid YAML: {detail}", lines, line, col, text, index) from None
    except ReaderError as e:  # a character YAML does not allow: located by its offset
        line, col = position(text, e.position)
        what = _char_name(chr(e.character)) if isinstance(e.character, int) else repr(e.character)
        msg = f"Invalid YAML: {what} is not allowed in YAML (special characters are not allowed)"
        raise YamlSyntaxError(msg, Span(line, col, line, col + 1)) from None
    except RecursionError:  # deeper than the cheap bound guessed: find where, without recursing
        at = _too_deep(text)
        raise _nested_too_deeply(lines, *(at or (0, 0))) from None
    except YAMLError as e:  # errors without a mark (rare): put them on the first line
        raise YamlSyntaxError(f"Invalid YAML: {e}", Span.point(0)) from None
    except Exception as e:  # ruamel failing on input it should have refused: an error, never a crash
        log.warning("ruamel.yaml failed on a document: %s: %s", type(e).__name__, e)
        raise YamlSyntaxError(
            f"Invalid YAML: ASAP cannot read this document ({type(e).__name__}: {e})", Span.point(0)
        ) from None


def _syntax_error(msg: str, lines: list[str], line: int, col: int, text: str, index: int | None) -> YamlSyntaxError:
    """A parser error at (line, col); when a character YAML reads as a line break (U+2028, U+2029, U+0085) and
    editors do not comes before it, the message says where: it is the usual cause of an error nobody can see."""
    before = _YAML_BREAKS.findall(text, 0, index + 1 if index is not None else len(text))
    if before:  # the last one before the error: the likeliest cause
        odd = text.rindex(before[-1], 0, index + 1 if index is not None else len(text))
        ol, oc = position(text, odd)
        if ol <= line:
            msg += (
                f" (line {ol + 1}, column {oc + 1} has {_char_name(text[odd])}, which YAML reads as a line break "
                "and editors do not)"
            )
    return YamlSyntaxError(msg, _token_span(lines, line, col))


_TOKEN_END = re.compile(r"\s|:(?:\s|$)|,|\]|\}")


def _token_span(lines: list[str], line: int, col: int) -> Span:
    """The token at (line, col) a parser error is about, never empty: a `:`, a quoted scalar (to its closing
    quote or the end of the line), a tab, or the word there; at the end of a line or past the last one, the last
    token before it (an editor shows a zero-width mark at a line's end as nearly nothing)."""
    while 0 <= line < len(lines) and not lines[line][col:].strip():  # nothing here: step back to the last token
        before = lines[line][:col].rstrip()
        if before:
            start = max(before.rfind(" "), before.rfind("\t")) + 1
            return Span(line, start, line, len(before))
        line -= 1
        col = len(lines[line]) if line >= 0 else 0
    if not 0 <= line < len(lines):
        return Span.point(0)
    text = lines[line]
    while col < len(text) and text[col] == " ":
        col += 1
    ch = text[col]
    if ch in ":\t,]}":
        return Span(line, col, line, col + 1)
    if ch in "'\"":
        return Span(line, col, line, max(col + 1, _scalar_end(text, col)))
    m = _TOKEN_END.search(text, col + 1)
    return Span(line, col, line, m.start() if m else len(text.rstrip()))
