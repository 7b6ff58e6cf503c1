"""The minimal edits that turn a config into a proposal: changed values replaced in place, missing keys
inserted next to the other parallelism keys, everything else (comments, other keys, formatting) untouched.

A key written as -1 stays -1 when it still resolves to the proposed degree: with every other axis of its
group set, -1 takes the devices (ICI) or slices (DCN) that are left, which is exactly the proposal's
degree because a valid proposal's product is the slice. Values are compared as resolved degrees, so
nothing is rewritten that already means the same.
"""

from __future__ import annotations

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
        block = "".join(_ordered(inserts))
        lines = doc.text.split("\n")
        if not doc.text.endswith("\n") and at.line >= len(lines) - 1 + (0 if doc.text else 1):
            # past the last line of a file without a final newline: start a line, keep the file's ending
            last = len(lines) - 1
            at, block = Span.point(last, len(lines[last])), "\n" + block.rstrip("\n")
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
    lines = doc.text.split("\n")
    return Span.point(len(lines) - 1 if doc.text.endswith("\n") else len(lines), 0)


def apply_text(text: str, edits: list[TextEdit]) -> str:
    """The document after `edits` (0-based line/column spans, code-point columns)."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)

    def pos(line: int, col: int) -> int:
        if line >= len(lines):
            return len(text)
        return offsets[line] + col

    out = text
    for e in sorted(edits, key=lambda e: (e.span.line, e.span.column), reverse=True):
        a, b = pos(e.span.line, e.span.column), pos(e.span.end_line, e.span.end_column)
        out = out[:a] + e.new_text + out[b:]
    return out
