"""Mesh validation: the three layers MaxText and JAX apply at launch (DOMAIN.md §2),
checked against the declared slice before the job gets one.

1. per list (ICI, DCN): at most one -1, the -1 resolvable, the product equal to the
   devices per slice (ICI) or the number of slices (DCN);
2. no DCN axis above 1 on a single slice;
3. every logical axis placed on whole physical torus axes (JAX's own assignment).

The DCN list is checked in MaxText's own order (`_check_dcn`): on a single slice MaxText never fills or reads
it, so only its product can fail there, and what would fail on several slices is a warning, not an error.

Plus the sharding rules MaxText asserts later: heads divisible by tensor parallelism, the
global batch divisible by the batch-sharding axes, fractional batch covered by
tensor/context parallelism, and keys current MaxText ignores.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from server.common.codes import DiagCode
from server.common.findings import Finding, Fix, Related, Severity, Span, TextEdit
from server.config.axes import AXES, IGNORED_KEYS, KEY_TO_AXIS, Axis
from server.config.integers import INT_KEYS, read_int, spelling
from server.config.placement import Placement, jax_physical_shape, place
from server.config.resolve import WRITTEN_HERE, Config, Value, batch_size_problem, written
from server.config.slices import MAX_SLICES, Slice, SliceError, parse_slice


@dataclass
class Degree:
    """One `ici_*`/`dcn_*` key: what is written and what it resolves to."""

    axis: Axis
    net: str  # 'ici' or 'dcn'
    key: str
    raw: Any  # the integer MaxText's config reads (2 for 2.0, "2" or true), else the value as written
    value: Value | None
    degree: int | None = None  # resolved (-1 filled); None when invalid or unresolvable
    problem: str | None = None  # why MaxText's config refuses the value as written (not an integer to pydantic)

    @property
    def valid_int(self) -> bool:
        return isinstance(self.raw, int) and not isinstance(self.raw, bool) and (self.raw >= 1 or self.raw == -1)


@dataclass
class MeshCheck:
    """The result of checking one config: the slice, the resolved mesh and the findings."""

    config: Config
    slice: Slice | None
    slice_source: str  # 'compile_topology', 'comment', 'setting', ''
    ici: list[Degree] = field(default_factory=list)
    dcn: list[Degree] = field(default_factory=list)
    placement: Placement | None = None
    findings: list[Finding] = field(default_factory=list)

    def degree(self, axis: str) -> int | None:
        """Total degree of a mesh axis (ICI x DCN), None if unresolved."""
        i = next(d for d in self.ici if d.axis.name == axis).degree
        j = next(d for d in self.dcn if d.axis.name == axis).degree
        return None if i is None or j is None else i * j

    def by_key(self, key: str) -> Degree | None:
        return next((d for d in [*self.ici, *self.dcn] if d.key == key), None)

    def degrees(self, net: str, *, drop_ones: bool = False) -> dict[str, int]:
        """{mesh axis: degree} over "ici" or "dcn", unresolved degrees as 1, in `mesh_axes` order; with
        `drop_ones`, only the axes that shard (degree > 1). The one place a checked mesh becomes a dict."""
        ds = self.ici if net == "ici" else self.dcn
        out = {d.axis.name: int(d.degree or 1) for d in ds}
        return {a: n for a, n in out.items() if n != 1} if drop_ones else out

    @property
    def resolved(self) -> bool:
        return all(d.degree is not None for d in [*self.ici, *self.dcn])

    @property
    def consistent(self) -> bool:
        """Every degree resolved and the ICI and DCN products match the slice (layers 1 and 2)."""
        if self.slice is None or not self.resolved:
            return False
        ici = math.prod(d.degree or 1 for d in self.ici)
        dcn = math.prod(d.degree or 1 for d in self.dcn)
        return ici == self.slice.devices_per_slice and dcn == self.slice.num_slices

    def mesh_dict(self) -> dict[str, Any]:
        return {
            "ici": {d.axis.name: d.degree for d in self.ici},
            "dcn": {d.axis.name: d.degree for d in self.dcn},
            "mesh_axes": [a.mesh_axis for a in AXES],
            "placement": None
            if self.placement is None
            else {
                "ok": self.placement.ok,
                "split_physical_axes": self.placement.split,
                "handler": self.placement.handler or None,
                "physical_mesh": list(jax_physical_shape(self.slice)) if self.slice else None,
                "axes": {
                    AXES[i].name: [{"physical_axis": p, "size": s} for p, s in a]
                    for i, a in enumerate(self.placement.assignment)
                    if a
                },
            },
        }


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _finding(cfg: Config, code: str, sev: Severity, msg: str, key: str, **kw: Any) -> Finding:
    path, span = cfg.anchor(key)
    v = cfg.values.get(key)
    if v is not None and v.origin == "parent" and v.entry is not None and v.entry.file is not None:
        msg += f" (set in {v.entry.file.name}:{v.entry.key_span.line + 1})"
        kw.setdefault("related", []).append(Related(v.entry.file, v.entry.key_span, f"{key} is set here"))
    elif v is not None and v.origin == "parent" and v.where is not None:  # one of MaxText's configs, from the catalog
        msg += f" (set in {v.where})"
    return Finding(code, sev, msg, key, path, span, **kw)


def _slice_counts(cfg: Config, findings: list[Finding]) -> dict[str, int]:
    """The slice counts the config sets (`num_slices`, `compile_topology_num_slices`), each as MaxText's config
    reads it; -1 (MaxText's default: not set) and a count MaxText refuses (reported as ASAP005) are left out."""
    counts: dict[str, int] = {}
    for key in ("num_slices", "compile_topology_num_slices"):
        v = cfg.values.get(key)
        if v is None or v.origin == "default":
            continue
        n, problem = read_int(v.value)
        if n is not None and (n == -1 or 1 <= n <= MAX_SLICES):
            if n != -1:
                counts[key] = n
            continue
        why = problem or ("zero" if n == 0 else "negative" if n is not None and n < 0 else f"over {MAX_SLICES}")
        findings.append(
            _finding(
                cfg,
                DiagCode.UNKNOWN_SLICE,
                Severity.ERROR,
                f"{key} must be a whole number from 1 to {MAX_SLICES} (or -1), got {v.value!r} ({why})",
                key,
            )
        )
    return counts


def _resolve_slice(cfg: Config, default_slice: str | None) -> tuple[Slice | None, str, list[Finding]]:
    """The declared slice and its slice count. The count is MaxText's (max_utils.get_num_slices): `num_slices`
    unless it is -1, else `compile_topology_num_slices` when it is > 0, else the `# asap:` comment's, else 1."""
    findings: list[Finding] = []
    counts = _slice_counts(cfg, findings)
    num_slices = counts.get("num_slices") or counts.get("compile_topology_num_slices") or cfg.declared_num_slices or 1

    topo = cfg.values.get("compile_topology")
    if topo is not None and topo.value not in (None, ""):
        if len(set(counts.values())) > 1:
            findings.append(_counts_disagree(cfg, counts, str(topo.value)))
        try:
            return parse_slice(str(topo.value), num_slices), "compile_topology", findings
        except SliceError as e:
            f = _finding(cfg, DiagCode.UNKNOWN_SLICE, Severity.ERROR, f"compile_topology: {e}", "compile_topology")
            if topo.origin in WRITTEN_HERE and topo.entry is not None:
                f.span = topo.entry.value_span
            return None, "", [*findings, f]
    if cfg.declared_slice:
        try:
            return parse_slice(cfg.declared_slice, num_slices), "comment", findings
        except SliceError as e:
            span = cfg.declared_slice_span or Span.point(0)
            return (
                None,
                "",
                [
                    *findings,
                    Finding(DiagCode.UNKNOWN_SLICE, Severity.ERROR, f"asap slice comment: {e}", None, cfg.path, span),
                ],
            )
    if default_slice:
        try:
            return parse_slice(default_slice, num_slices), "setting", findings
        except SliceError as e:
            return (
                None,
                "",
                [
                    *findings,
                    Finding(
                        DiagCode.UNKNOWN_SLICE,
                        Severity.ERROR,
                        f"asap.defaultSlice setting: {e}",
                        None,
                        cfg.path,
                        Span.point(0),
                    ),
                ],
            )
    findings.append(
        Finding(
            DiagCode.NO_SLICE,
            Severity.INFORMATION,
            "No TPU slice declared, so the mesh cannot be checked against one. Declare it with "
            "`compile_topology: v5e-256` (and `compile_topology_num_slices` for multislice), a comment "
            "`# asap: slice=v5e-256`, or the editor setting `asap.defaultSlice`.",
            None,
            cfg.path,
            Span.point(0),
        )
    )
    return None, "", findings


def _counts_disagree(cfg: Config, counts: dict[str, int], topology: str) -> Finding:
    """ASAP005 at num_slices: it and compile_topology_num_slices name different counts. MaxText takes num_slices
    for the mesh and compile_topology_num_slices for the devices (train_compile's topology), and the mesh step
    fails: 'Number of slices N must equal the product of dcn_mesh_shape', or one slice's mesh over several."""
    ns, ct = counts["num_slices"], counts["compile_topology_num_slices"]
    f = _finding(
        cfg,
        DiagCode.UNKNOWN_SLICE,
        Severity.ERROR,
        f"num_slices: {ns} and compile_topology_num_slices: {ct} disagree: MaxText takes num_slices first, so it "
        f"builds the mesh for {ns} slice{'s' if ns != 1 else ''} over the devices of {ct} slice"
        f"{'s' if ct != 1 else ''} of {topology}, and the mesh step fails. Set one count, or the same in both.",
        "num_slices",
    )
    other = cfg.values.get("compile_topology_num_slices")
    if other is not None and other.entry is not None:
        f.related.append(Related(other.entry.file, other.entry.key_span, f"compile_topology_num_slices: {ct}"))
    return f


def _degrees(cfg: Config, net: str) -> list[Degree]:
    """Each degree as MaxText's config reads it (server/config/integers.py): 2.0, "2" and true are 2, 2 and 1."""
    out = []
    for a in AXES:
        key = a.ici_key if net == "ici" else a.dcn_key
        v = cfg.values.get(key)
        n, problem = read_int(v.value if v else None)
        out.append(Degree(a, net, key, n if problem is None else (v.value if v else None), v, problem=problem))
    return out


def _fmt_product(ds: list[Degree], values: list[int]) -> str:
    parts = [f"{d.key.removesuffix('_parallelism')}={v}" for d, v in zip(ds, values, strict=True) if v != 1]
    return " x ".join(parts) or "all 1"


def _value_edit(cfg: Config, key: str, new: int) -> TextEdit | None:
    e = cfg.entry(key)
    if e is None:
        return None
    return TextEdit(e.file, e.value_span, str(new))


def _insert_edit(cfg: Config, key: str, new: int, after: list[str]) -> TextEdit | None:
    """Insert `key: new` after the last of `after` written in the document (same indentation)."""
    doc = cfg.document
    if doc is None:
        return None
    written = [doc.entries[k] for k in after if k in doc.entries]
    if not written:
        return None
    last = max(written, key=lambda e: e.key_span.line)
    line = last.value_span.end_line
    return TextEdit(doc.path, Span.point(line + 1, 0), f"{key}: {new}\n")


def _check_values(ds: list[Degree], cfg: Config, findings: list[Finding]) -> bool:
    """Every degree a whole number >= 1 or -1; zero, negative and fractional degrees are errors."""
    ok = True
    for d in ds:
        if d.valid_int:
            continue
        ok = False
        number = d.problem is None and isinstance(d.raw, int)
        what = (
            "zero"
            if number and d.raw == 0
            else "negative; only -1 means 'fill'"
            if number and d.raw < 0
            else f"not a whole number MaxText's config reads: {d.problem or 'not an integer'}"
        )
        findings.append(
            _finding(
                cfg,
                DiagCode.INVALID_DEGREE,
                Severity.ERROR,
                f"{d.key} must be a whole number >= 1 or -1, got {d.raw!r} ({what})",
                d.key,
            )
        )
    return ok


def _given(d: Degree) -> Any:
    """The value the fill sees: the written one, or the one MaxText resolves before the fill
    (`dcn_diloco_parallelism: -1`, `_resolve_diloco`)."""
    return d.raw if d.degree is None else d.degree


def _check_unspecified(ds: list[Degree], label: str, cfg: Config, findings: list[Finding]) -> bool:
    """At most one -1 per list."""
    unspecified = [d for d in ds if _given(d) == -1]
    if len(unspecified) <= 1:
        return True
    names = ", ".join(x.key for x in unspecified)
    for d in unspecified[1:]:
        related = [
            Related(x.value.entry.file, x.value.entry.key_span, f"{x.key}: -1")
            for x in unspecified
            if x is not d and x.value is not None and x.value.entry is not None
        ]
        findings.append(
            _finding(
                cfg,
                DiagCode.SEVERAL_FILL_AXES,
                Severity.ERROR,
                f"More than one unspecified (-1) {label} axis: {names}. At most one axis per list can be -1.",
                d.key,
                related=related,
            )
        )
    return False


def _fill(ds: list[Degree], target: int, label: str, cfg: Config, findings: list[Finding]) -> None:
    """Layer 1 for one list: at most one -1, the -1 resolvable, the product equal to the target."""
    if not _check_values(ds, cfg, findings) or not _check_unspecified(ds, label, cfg, findings):
        return
    raws = [int(_given(d)) for d in ds]
    known = math.prod(r for r in raws if r != -1)
    unspecified = next((d for d in ds if _given(d) == -1), None)
    if unspecified is not None:
        if target % known:
            unit = "devices per slice" if label == "ICI" else "slices"
            findings.append(
                _finding(
                    cfg,
                    DiagCode.FILL_UNRESOLVED,
                    Severity.ERROR,
                    f"{unspecified.key}: -1 cannot be determined: {target} {unit} / {known} (product of the other "
                    f"{label} axes: {_fmt_product(ds, raws)}) is not a whole number.",
                    unspecified.key,
                )
            )
            return
        for d in ds:
            d.degree = target // known if d is unspecified else int(_given(d))
        return
    for d in ds:
        d.degree = int(_given(d))
    if known != target:
        _mismatch(ds, target, known, label, cfg, findings)


def _mismatch(ds: list[Degree], target: int, product: int, label: str, cfg: Config, findings: list[Finding]) -> None:
    what = "devices per slice" if label == "ICI" else "slices (DCN)"
    desc = _fmt_product(ds, [int(_given(x)) for x in ds])
    written = [d for d in ds if cfg.entry(d.key) is not None]
    fill_axis = "fsdp" if label == "ICI" else "data"
    primary = next((d for d in ds if d.axis.name == fill_axis and cfg.entry(d.key)), None)
    primary = primary or next((d for d in written if d.raw != 1), None) or (written[0] if written else ds[0])
    fixes: list[Fix] = []
    for name in dict.fromkeys((fill_axis, "fsdp", "data")):  # the fill axis first, each axis once
        d = next(x for x in ds if x.axis.name == name)
        others = product // d.raw
        if target % others == 0:
            new = target // others
            edit = _value_edit(cfg, d.key, new) or _insert_edit(cfg, d.key, new, [x.key for x in ds])
            if edit is not None:
                fixes.append(Fix(f"Set {d.key} to {new} ({label} product {target})", (edit,), preferred=not fixes))
    d_fill = next(x for x in ds if x.axis.name == fill_axis)
    if (edit := _value_edit(cfg, d_fill.key, -1)) is not None and target % (product // d_fill.raw) == 0:
        fixes.append(Fix(f"Set {d_fill.key} to -1 (fill the remaining {label} devices)", (edit,)))
    msg = f"Number of {what} {target} does not match the product of the {label} parallelism {product} ({desc})"
    # the other factors of the product written in this document: where the user may have made the change
    related = [
        Related(e.file, e.key_span, f"{d.key}: {d.raw} (a factor of the {label} product)")
        for d in written
        if d is not primary and d.raw != 1 and (e := cfg.entry(d.key)) is not None
    ]
    findings.append(
        _finding(
            cfg,
            DiagCode.ICI_PRODUCT_MISMATCH if label == "ICI" else DiagCode.DCN_PRODUCT_MISMATCH,
            Severity.ERROR,
            msg,
            primary.key,
            fixes=fixes,
            related=related,
            data={"target": target, "product": product, "factors": [d.key for d in written]},
        )
    )


def _resolve_diloco(chk: MeshCheck, num_slices: int | None) -> bool:
    """`dcn_diloco_parallelism: -1`, which MaxText resolves on its own before the mesh (types.py): to the slices
    over the product of the other DCN degrees that are not -1, a product that must be > 0 and divide the slices.
    So `dcn_diloco_parallelism: -1` beside the default `dcn_data_parallelism: -1` is not two -1s to the fill. Sets
    its degree (with a slice count); False after an ASAP103. Every degree must be an integer."""
    d = next(x for x in chk.dcn if x.axis.name == "diloco")
    if d.raw != -1:
        return True
    others = [x for x in chk.dcn if x.raw != -1]
    other = math.prod(int(x.raw) for x in others)
    if other > 0 and (num_slices is None or num_slices % other == 0):
        if num_slices is not None:
            d.degree = num_slices // other
        return True
    slices = "the slices" if num_slices is None else f"{num_slices} slice{'s' if num_slices != 1 else ''}"
    chk.findings.append(
        _finding(
            chk.config,
            DiagCode.FILL_UNRESOLVED,
            Severity.ERROR,
            f"{d.key}: -1 cannot be determined: MaxText resolves it before the mesh, to {slices} / {other} (product "
            f"of the other DCN axes that are not -1: {_fmt_product(others, [int(x.raw) for x in others])}), and "
            "that is not a whole number >= 1.",
            d.key,
        )
    )
    return False


def _one_slice_note(sl: Slice | None) -> str:
    where = f"a single slice ({sl.name})" if sl is not None else "a single slice"
    return (
        f" MaxText ignores the DCN list on {where}, so this launches there; with more than one slice it would be "
        "rejected."
    )


def _check_dcn(chk: MeshCheck) -> None:
    """The DCN list, in MaxText's order: pydantic's types (an integer each, any slice count); types.py's check that
    on one slice the DCN degrees multiply to at most 1 in absolute value ('DCN parallelism requested but only one
    slice available.'; the product includes dcn_sequence_parallelism, outside mesh_axes); `dcn_diloco_parallelism:
    -1` resolved first; then, with more than one slice only, create_device_mesh's fill (layer 1). On one slice
    MaxText never fills nor reads the list, so several -1s, a zero or a negative degree whose product stays within
    1 launch: ASAP warns (the config fails once it has more slices), never an error. Without a declared slice the
    slice count is unknown, and only what fails on any slice count is an error."""
    cfg, ds, sl = chk.config, chk.dcn, chk.slice
    single = sl is not None and sl.num_slices == 1

    def ignored() -> None:  # one slice: create_device_mesh never reads the list (no slice: the degrees written)
        for d in ds:
            d.degree = 1 if single else (int(d.raw) if d.valid_int and d.raw != -1 else None)

    if any(_int(d.raw) is None for d in ds):  # pydantic refuses a non-integer whatever the slice count
        _check_values([d for d in ds if _int(d.raw) is None], cfg, chk.findings)
        if single:
            ignored()
        return
    if sl is not None and not single:
        if _check_values(ds, cfg, chk.findings) and _resolve_diloco(chk, sl.num_slices):
            _fill(ds, sl.num_slices, "DCN", cfg, chk.findings)
        return
    seq_raw = cfg.get("dcn_sequence_parallelism")  # the integer MaxText reads, None when unset or refused
    product = math.prod(int(d.raw) for d in ds) * (seq_raw if seq_raw is not None else 1)
    negative = [d for d in ds if int(d.raw) < -1]
    if abs(product) > 1 and (single or negative):  # rejected on one slice (and a negative degree on any)
        _check_values(negative, cfg, chk.findings)
        over = [(d.key, int(d.raw)) for d in ds if int(d.raw) > 1]
        if seq_raw is not None and seq_raw > 1:
            over.append(("dcn_sequence_parallelism", seq_raw))
        if sl is not None:
            chk.findings += [
                _finding(
                    cfg,
                    DiagCode.DCN_ON_ONE_SLICE,
                    Severity.ERROR,
                    f"{key}={raw} but the job runs on a single slice ({sl.name}): DCN parallelism above 1 needs "
                    "compile_topology_num_slices (or num_slices) > 1.",
                    key,
                )
                for key, raw in over
            ]
        ignored()
        return
    # accepted on one slice: what the fill would reject on several slices is a warning
    found: list[Finding] = []
    if _check_values(ds, cfg, found):
        # a diloco -1 is resolved before the fill, so it is not one of the -1s the fill counts
        _check_unspecified([d for d in ds if not (d.axis.name == "diloco" and d.raw == -1)], "DCN", cfg, found)
    if sl is not None:  # one slice, and a degree above 1 beside a zero (which keeps the product at 0)
        found += [
            _finding(
                cfg,
                DiagCode.DCN_ON_ONE_SLICE,
                Severity.ERROR,
                f"{d.key}={d.raw} has no effect: the job runs on a single slice ({sl.name}), and DCN parallelism "
                "above 1 needs compile_topology_num_slices (or num_slices) > 1.",
                d.key,
            )
            for d in ds
            if int(d.raw) > 1
        ]
    note = _one_slice_note(sl)
    chk.findings += [
        dataclasses.replace(f, severity=Severity.WARNING, message=f.message.rstrip(".") + "." + note) for f in found
    ]
    _resolve_diloco(chk, 1 if single else None)  # its assertion holds on any slice count
    ignored()


PRODUCT_CODES = (DiagCode.ICI_PRODUCT_MISMATCH, DiagCode.DCN_PRODUCT_MISMATCH)


def on_key(f: Finding, cfg: Config, key: str) -> Finding:
    """A product mismatch (ASAP101, ASAP104) placed on `key` instead, when `key` is one of its factors written
    in the document (the one the user last edited, say): the key it was on becomes related information. Any
    other finding, or a key that is not a factor, is returned as it is. Its fixes do not depend on where it is."""
    if f.code not in PRODUCT_CODES or key == f.key or key not in f.data.get("factors", ()):
        return f
    e = cfg.entry(key)
    if e is None:
        return f
    related = [r for r in f.related if r.span != e.key_span or r.file != e.file]
    if f.key is not None and (old := cfg.entry(f.key)) is not None:
        old_v = cfg.values.get(f.key)
        raw = old_v.value if old_v is not None else "?"
        related.insert(0, Related(old.file, old.key_span, f"{f.key}: {raw} (a factor of the product)"))
    return dataclasses.replace(f, key=key, file=e.file, span=e.key_span, related=related)


def _subset_products(axes: tuple[int, ...]) -> list[int]:
    live = [a for a in axes if a > 1]
    prods = {math.prod(c) for k in range(len(live) + 1) for c in combinations(live, k)}
    return sorted(prods)


def _check_placement(chk: MeshCheck, allow_split: bool) -> None:
    sl, cfg = chk.slice, chk.config
    assert sl is not None
    shape = tuple(d.degree or 1 for d in chk.ici)
    try:
        p = place(sl, shape, allow_split)
    except ImportError as e:  # JAX missing or broken: say so, keep the other layers
        chk.findings.append(
            Finding(
                DiagCode.PLACEMENT_UNCHECKED,
                Severity.INFORMATION,
                f"Layer-3 placement not checked: JAX could not be imported ({e}). Install jax in ASAP's environment.",
                None,
                cfg.path,
                Span.point(0),
            )
        )
        return
    chk.placement = p
    if p.ok or p.failed_axis is None:
        return
    d = chk.ici[p.failed_axis]
    phys = "x".join(map(str, jax_physical_shape(sl)))
    remaining = [r for r in p.remaining if r > 1]
    fits = _subset_products(p.remaining)
    placed = [
        f"{x.key.removesuffix('_parallelism')}={x.degree}" for x in chk.ici[p.failed_axis + 1 :] if (x.degree or 1) > 1
    ]
    before = f" after placing {', '.join(placed)}" if placed else ""
    msg = (
        f"{d.key}={d.degree} cannot be placed on whole physical axes of {sl.name} (physical mesh {phys}): "
        f"{before.strip() or 'the'} remaining physical axes are "
        f"{'x'.join(map(str, remaining)) or 'none'}, and {d.degree} is not a product of any of them "
        f"(possible: {', '.join(map(str, fits))}). JAX raises NotImplementedError ('Failed to find assignment "
        f"for logical_axis_index {p.failed_axis}') at launch. Choose such a degree, or set "
        "allow_split_physical_axes: true (slower collectives on the split axis)."
    )
    chk.findings.append(
        _finding(
            cfg,
            DiagCode.AXIS_NOT_PLACEABLE,
            Severity.ERROR,
            msg,
            d.key,
            data={"axis": d.axis.name, "physical_mesh": list(jax_physical_shape(sl)), "possible": fits},
        )
    )


def _primary_key(chk: MeshCheck, axes: list[str]) -> str:
    """The key to locate a finding about these axes at: the first one written in the document
    with a degree above 1, else the first written, else the first."""
    keys = [d.key for d in [*chk.ici, *chk.dcn] if d.axis.name in axes]
    cfg = chk.config
    for k in keys:
        d = chk.by_key(k)
        if cfg.entry(k) is not None and d is not None and (d.degree or 0) > 1:
            return k
    return next((k for k in keys if cfg.entry(k) is not None), keys[0])


def _check_heads(chk: MeshCheck) -> None:
    cfg, model = chk.config, chk.config.model
    if model is None:
        return
    head_axes = [a.name for a in AXES if a.shards_heads]
    degrees = [chk.degree(a) for a in head_axes]
    if any(d is None for d in degrees):
        return
    tp = math.prod(d for d in degrees if d is not None)
    if tp <= 1:
        return
    key = _primary_key(chk, head_axes)
    src = f" ({model.name})" if model.name else ""
    for what, n, code in (
        ("base_num_query_heads", model.num_query_heads, DiagCode.QUERY_HEADS_INDIVISIBLE),
        ("base_num_kv_heads", model.num_kv_heads, DiagCode.KV_HEADS_INDIVISIBLE),
    ):
        if isinstance(n, int) and n > 0 and n % tp:
            chk.findings.append(
                _finding(
                    cfg,
                    code,
                    Severity.ERROR,
                    f"{what} {n}{src} is not divisible by tensor parallelism {tp} "
                    f"({' x '.join(f'{a}={d}' for a, d in zip(head_axes, degrees, strict=True) if d != 1)}): "
                    "attention heads cannot be split evenly across the tensor-parallel devices.",
                    key,
                    data={"heads": n, "tensor_parallelism": tp},
                )
            )


def _check_batch(chk: MeshCheck) -> None:
    cfg, sl = chk.config, chk.slice
    problem = batch_size_problem(cfg.raw("per_device_batch_size"))  # (unset: "a number > 0, got None")
    if problem is not None:
        chk.findings.append(_finding(cfg, DiagCode.BAD_BATCH_SIZE, Severity.ERROR, problem, "per_device_batch_size"))
        return
    pdbs = cfg.get("per_device_batch_size")  # the checked value: a finite number in range
    if sl is None or not chk.consistent or not isinstance(pdbs, (int, float)):
        return
    batch_axes = [a.name for a in AXES if a.shards_batch]
    shards = math.prod(chk.degree(a) or 1 for a in batch_axes)
    devices = sl.devices
    cover = devices // shards  # devices that share one batch shard (tensor, context, pipeline...)
    global_batch = pdbs * devices
    desc = " x ".join(f"{a}={chk.degree(a)}" for a in batch_axes if chk.degree(a) != 1) or "1"
    if (pdbs < 1 and abs(pdbs * cover - round(pdbs * cover)) > 1e-9) or pdbs * cover < 1 - 1e-9:
        need = math.ceil(1 / pdbs - 1e-9)
        chk.findings.append(
            _finding(
                cfg,
                DiagCode.FRACTIONAL_BATCH_UNCOVERED,
                Severity.ERROR,
                f"per_device_batch_size {pdbs} is below 1, so each sequence must be shared by at least {need} "
                f"devices of tensor, context or pipeline parallelism; this mesh gives {cover} "
                f"({devices} devices / {shards} batch shards: {desc}).",
                "per_device_batch_size",
                data={"needed": need, "cover": cover},
            )
        )
        return
    if abs(global_batch - round(global_batch)) > 1e-9 or round(global_batch) % shards:
        chk.findings.append(
            _finding(
                cfg,
                DiagCode.BATCH_INDIVISIBLE,
                Severity.ERROR,
                f"Global batch {global_batch:g} (per_device_batch_size {pdbs} x {devices} devices) is not divisible "
                f"by the {shards} batch shards ({desc}).",
                "per_device_batch_size",
                data={"global_batch": global_batch, "batch_shards": shards},
            )
        )


def _check_keys(cfg: Config, findings: list[Finding]) -> None:
    doc = cfg.document
    if doc is None:
        return
    known = set(KEY_TO_AXIS)
    for key, v in cfg.values.items():
        if v.origin not in (*WRITTEN_HERE, "parent"):
            continue
        if key in IGNORED_KEYS:
            n, problem = read_int(v.value) if key in INT_KEYS else (_int(v.value), None)
            if n == 1 and problem is None:
                continue  # a removed axis of degree 1 shards nothing: MaxText's own base.yml sets them so
            fixes = []
            e = cfg.entry(key)
            if e is not None:
                line = doc.lines[e.key_span.line]
                indent = len(line) - len(line.lstrip())
                fixes.append(
                    Fix(
                        f"Comment out {key} (ignored by MaxText)",
                        (TextEdit(e.file, Span.point(e.key_span.line, indent), "# "),),
                        preferred=True,
                    )
                )
            effect = f"its value {n} is NOT applied; " if n is not None else ""
            if problem is not None:  # pydantic reads every key of types.py, an ignored one too, and refuses this
                findings.append(
                    _finding(
                        cfg,
                        DiagCode.INVALID_DEGREE,
                        Severity.ERROR,
                        f"{key} must be a whole number, got {v.value!r} ({problem}): MaxText's config refuses it "
                        "before it ignores the key.",
                        key,
                    )
                )
            findings.append(
                _finding(
                    cfg,
                    DiagCode.IGNORED_KEY,
                    Severity.WARNING,
                    f"{key} is ignored by current MaxText: {effect}{IGNORED_KEYS[key]}.",
                    key,
                    fixes=fixes,
                )
            )
        elif key.startswith(("ici_", "dcn_")) and key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
            if not close and not key.endswith("_parallelism"):
                continue  # some other ici_/dcn_ setting, not a misspelt degree
            hint = f"; did you mean {close[0]}?" if close else ""
            fixes = []
            if close and (e := cfg.entry(key)) is not None and close[0] not in doc.entries:
                fixes.append(Fix(f"Rename to {close[0]}", (TextEdit(e.file, e.key_span, close[0]),), preferred=True))
            findings.append(
                _finding(
                    cfg,
                    DiagCode.MISSPELT_KEY,
                    Severity.WARNING,
                    f"{key} is not a MaxText parallelism key{hint}",
                    key,
                    fixes=fixes,
                )
            )


# A whole number as written: digits with an optional sign. Any other plain scalar MaxText reads as an integer is a
# YAML 1.1 form (octal 010, base 60 2:00, hex 0x10, binary 0b10, 1_0).
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_NOT_PLAIN = ("'", '"', "!", "&", "*")


def _check_spelling(cfg: Config, findings: list[Finding]) -> None:
    """ASAP009: a whole-number key (a degree, a slice count) MaxText reads as an integer although it is not written
    as one. A hint for a float (2.0) or text ("2"); a warning where the number read is not the one written: a
    boolean (true is 1), YAML 1.1's octal (010 is 8) or base 60 (2:00 is 120). The quick fix writes the number
    MaxText reads. What MaxText refuses is not here: mesh.py's checks report it (ASAP100, ASAP005)."""
    doc = cfg.document
    for key, v in cfg.values.items():
        if key not in INT_KEYS or v.origin not in (*WRITTEN_HERE, "parent"):
            continue
        n, problem = read_int(v.value)
        if n is None or problem is not None:
            continue
        e = cfg.entry(key)
        token = written(doc, e) if doc is not None and e is not None else None
        shown = token if token is not None else repr(v.value)
        kind = spelling(v.value)
        severity = Severity.HINT
        if kind == "a boolean":
            severity = Severity.WARNING
            msg = (
                f"{key}: {shown} is a boolean (MaxText loads configs as YAML 1.1, where yes, on and true are true), "
                f"and MaxText's config reads it as the integer {n}: the run uses {key} {n}."
            )
        elif kind is not None:
            msg = f"{key} is written as {kind} ({shown}); MaxText's config reads it as the integer {n}, as ASAP does."
        elif token is None or token.startswith(_NOT_PLAIN) or _DECIMAL.fullmatch(token):
            continue  # an integer written as one
        else:
            decimal = read_int(token)[0]
            if decimal == n or (decimal is None and ":" not in token):
                continue  # 02, +2, 1_0, 0x10, 0b10: the number it says
            severity = Severity.WARNING
            form = "a base-60 number" if ":" in token else "an octal number (a leading 0)"
            msg = f"{key}: {token} is {form} in YAML 1.1, which MaxText loads configs with: the run uses {key} {n}" + (
                f", not {decimal}." if decimal is not None else "."
            )
        fixes = []
        if e is not None and token is not None and not token.startswith(("!", "&")):  # keep a tag or an anchor
            fixes.append(Fix(f"Write {key}: {n}", (TextEdit(e.file, e.value_span, str(n)),), preferred=True))
        findings.append(_finding(cfg, DiagCode.NUMBER_SPELLING, severity, msg, key, fixes=fixes, data={"value": n}))


def check(cfg: Config, default_slice: str | None = None) -> MeshCheck:
    """All static mesh checks for a loaded config."""
    if not cfg.is_maxtext or cfg.document is None:  # not MaxText, or YAML that does not parse
        return MeshCheck(cfg, None, "", _degrees(cfg, "ici"), _degrees(cfg, "dcn"))
    sl, source, findings = _resolve_slice(cfg, default_slice)
    chk = MeshCheck(cfg, sl, source, _degrees(cfg, "ici"), _degrees(cfg, "dcn"), findings=findings)
    _check_spelling(cfg, chk.findings)
    _check_keys(cfg, chk.findings)
    if sl is not None:
        _fill(chk.ici, sl.devices_per_slice, "ICI", cfg, chk.findings)
        _check_dcn(chk)
        ici_ok = all(d.degree is not None for d in chk.ici)
        if ici_ok and math.prod(d.degree or 1 for d in chk.ici) == sl.devices_per_slice:
            _check_placement(chk, bool(cfg.get("allow_split_physical_axes", False)))
    else:  # no slice: only what does not depend on the device count
        if _check_values(chk.ici, cfg, chk.findings) and _check_unspecified(chk.ici, "ICI", cfg, chk.findings):
            for d in chk.ici:
                d.degree = int(d.raw) if d.raw != -1 else None
        _check_dcn(chk)
    _check_heads(chk)
    _check_batch(chk)
    return chk
