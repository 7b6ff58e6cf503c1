"""Hover explanations: short Markdown for a key of an analysed config, with the numbers
behind the verdict and where they come from. No editor types here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from server.agents.report import AnalysisReport
from server.common import codes
from server.common.codes import DiagCode
from server.common.findings import Finding, Severity, Span
from server.config.axes import AXES, IGNORED_KEYS, KEY_TO_AXIS
from server.config.placement import jax_physical_shape
from server.config.slices import GB, SOURCES, Slice
from server.config.xla_flags import parse_xla_flags
from server.perf.estimate import Estimate, step_tokens
from server.perf.memory import RUNTIME_RESERVE, Memory, usable_hbm
from server.perf.wording import gib, readable_source
from server.presentation import verification
from server.presentation.agent_findings import mesh_label, nothing_fits_text
from server.presentation.verification import VerifiedTarget
from server.profiles import profile as prof
from server.services.analysis import Analysis
from server.services.profile_analysis import ProfileResult

PHYS_NAMES = ("x", "y", "z", "core")
# The reference documentation of the checkout the server runs from (docs/*.md): hovers link to its lines.
DOCS = Path(__file__).resolve().parents[2] / "docs"
GIB = 1024**3
ESTIMATE = DiagCode.ESTIMATE


def key_at(an: Analysis, line: int, column: int) -> str | None:
    """The top-level key whose key or value is at (line, column) in the document."""
    doc = an.config.document
    if doc is None:
        return None
    for key, e in doc.entries.items():
        for span in (e.key_span, e.value_span):
            if span.line == line and span.column <= column <= max(span.end_column, span.column):
                return key
    return None


def _within(span: Span | None, line: int, column: int) -> bool:
    return span is not None and span.line == line and span.column <= column <= span.end_column


def hover(an: Analysis, line: int, column: int, findings: Sequence[Finding] | None = None) -> tuple[str, Span] | None:
    """Markdown and the span it explains, or None where ASAP has nothing to say: at most about 15 lines. With
    `findings` (every finding ASAP has for the document), the errors and warnings at the position come first
    (diagnostic_md), then the key's own explanation, then the information entries there in brief."""
    if not an.config.is_maxtext:
        return None
    found = list(findings or ())
    # errors and warnings lead; an information line (the estimate) follows the key's own explanation
    urgent = diagnostic_md([f for f in found if f.severity < Severity.INFORMATION], line, column)
    info = diagnostic_md([f for f in found if f.severity >= Severity.INFORMATION], line, column)
    here = {f.code for f in found if _covers(f.span, line, column)}
    key = _key_md(an, line, column, here, short=urgent is not None)
    flags = an.config.run_flags.hover_line()
    if info is not None and ESTIMATE in here and (key is None or flags not in key[0]):  # what the estimate assumed
        info = (f"{info[0]}\n\n{flags}", info[1])
    parts = [p for p in (urgent, key, info) if p is not None]
    if not parts:
        return None
    span = key[1] if key is not None else parts[0][1]
    return no_paths("\n\n---\n\n".join(p[0] for p in parts)), span


def _key_md(
    an: Analysis, line: int, column: int, explained: set[str], short: bool = False, notes: bool = True
) -> tuple[str, Span] | None:
    """The key's own explanation, then its diagnostics by code and title (with their messages unless explained
    above); `short` (an error above already takes room): the explanation's first lines only."""
    if _within(an.config.declared_slice_span, line, column):
        return _slice_md(an), an.config.declared_slice_span  # type: ignore[return-value]
    flags = _flags_md(an, line)
    if flags is not None:
        return flags
    key = key_at(an, line, column)
    if key is None or an.config.document is None:
        return None
    span = an.config.document.entries[key].key_span
    if key in KEY_TO_AXIS:
        md = _axis_md(an, key, short)
    elif key in IGNORED_KEYS:
        md = f"**{key}** is ignored by current MaxText: {IGNORED_KEYS[key]}."
    elif key in ("compile_topology", "compile_topology_num_slices", "num_slices"):
        md = _slice_md(an) + ("" if short else _estimate_md(an))
    elif key in ("per_device_batch_size", "remat_policy"):
        md = _batch_md(an) if key == "per_device_batch_size" else f"**remat_policy** = `{an.config.get(key)}`"
        md += "" if short else _memory_md(an)
    elif key == "model_name":
        md = _model_md(an)
    else:
        return None
    listed = [f for f in an.diagnostics if f.key == key and f.code != ESTIMATE] if notes else []
    if listed:
        md += "\n\n" + "\n".join(_note_line(f, f.code in explained) for f in listed)
    return md, span


def key_md(an: Analysis, line: int, column: int, short: bool = True) -> str | None:
    """The explanation of the key at (line, column) alone (`short`: its first lines), for a hover that leads with
    something else (the agents' diagnosis)."""
    if not an.config.is_maxtext:
        return None
    found = _key_md(an, line, column, set(), short=short, notes=False)
    return no_paths(found[0]) if found is not None else None


def _note_line(f: Finding, explained: bool) -> str:
    """One diagnostic on the hovered key: its code and catalog title, and its message unless the
    same hover explains it above."""
    c = codes.lookup(f.code)
    title = f" **{c.title}**" if c else ""
    return f"- ⚠ `{f.code}`{title}" + (" (explained above)" if explained else f": {f.message}")


# Module paths the core's texts name (where a figure is computed), as readers name them.
_PATHS = (
    (
        re.compile(r"`?server/perf/architecture\.py`?(\s*\(MaxText's decoder code\))?"),
        "ASAP's reading of MaxText's decoder code",
    ),
    (re.compile(r"`?server/perf/steptime\.py`?(\s*\([^)]*\))?"), "ASAP's step-time model"),
    (re.compile(r"`?server/perf/memory\.py`?"), "ASAP's memory model"),
    (re.compile(r"`?server/[\w/]+\.py`?(\s*\([^)]*\))?"), "ASAP's model"),
)


def no_paths(md: str) -> str:
    """A hover's text without ASAP's internal module paths (a reader cannot open them; docs/ explains the
    model): each named as what it is."""
    for pattern, name in _PATHS:
        md = pattern.sub(name, md)
    return md


def _covers(span: Span, line: int, column: int) -> bool:
    """Whether the editor shows a finding at (line, column): inside its span, or anywhere on the line
    of an empty span (a finding about the whole file, shown on line 1)."""
    if (span.line, span.column) == (span.end_line, span.end_column):
        return span.line == line
    return (span.line, span.column) <= (line, column) <= (span.end_line, span.end_column)


def diagnostic_md(findings: Sequence[Finding], line: int, column: int) -> tuple[str, Span] | None:
    """What the ASAP diagnostics at (line, column) mean, one paragraph each: per code its title and the findings'
    own messages (each once), its meaning, what the verdict rests on, the fix, and "more" as links to the
    knowledge notes and the code's row in docs/diagnostics.md. None where no diagnostic is. The span is the first
    finding's (errors first)."""
    here = sorted(
        (f for f in findings if f.code.startswith("ASAP") and _covers(f.span, line, column)),
        key=lambda f: (f.severity, f.code, f.span),
    )
    if not here:
        return None
    by_code: dict[str, list[Finding]] = {}
    for f in here:
        by_code.setdefault(f.code, []).append(f)
    sections = [_code_md(code, [f.message for f in fs]) for code, fs in by_code.items()]
    return "\n\n---\n\n".join(sections), here[0].span


def _code_md(code: str, messages: list[str]) -> str:
    c = codes.lookup(code)
    if c is None:  # a code without a catalog entry (a test keeps this from shipping): the messages alone
        return "\n\n".join([f"**{code}**", *dict.fromkeys(messages)])
    said = list(dict.fromkeys(messages))
    head = f"**{code}** {c.title} ({c.layer})" + (f": {said[0]}" if len(said) == 1 else "")
    out = [head] if len(said) == 1 else [head, "\n".join(f"- {m}" for m in said)]
    out.append(c.meaning)
    out += [f"**Rests on:** {c.basis}", f"**Fix:** {c.fix}"]
    more = [_note_link(n) for n in c.notes]
    if (row := doc_link("diagnostics.md", f"{code} in the documentation", f"| {code} |")) is not None:
        more.append(row)
    if more:
        out.append("More: " + " · ".join(more))
    return "\n\n".join(out)


def _first_sentence(text: str) -> str:
    """The first sentence of a catalog text (the rest is in docs/diagnostics.md and the notes)."""
    m = re.search(r"(?<=[a-z0-9)%])\.\s+(?=[A-Z])", text)
    return text[: m.start() + 1] if m else text


def _note_link(name: str) -> str:
    found = note_title(name)
    if found is None:
        return f"`{name}`"
    title, path = found
    return f"[{title}]({path.as_uri()})"


@cache
def _doc_lines(name: str) -> tuple[str, ...]:
    """docs/<name> of the checkout the server runs from (none when installed without it)."""
    try:
        return tuple((DOCS / name).read_text(encoding="utf-8").splitlines())
    except OSError:
        return ()


def doc_link(name: str, text: str, starts: str) -> str | None:
    """A Markdown link that opens docs/<name> at the first line starting with `starts` (a heading, a table row);
    None when the file or the line is not there."""
    for i, ln in enumerate(_doc_lines(name)):
        if ln.startswith(starts):
            return f"[{text}]({(DOCS / name).as_uri()}#L{i + 1})"
    return None


def kb_link(ref: str) -> str:
    """A knowledge-base reference ('kb/docs/note.md#Heading', 'kb/history/run.yaml') as a link that opens the file
    at the heading; its note's title as the text. A reference to nothing readable stays plain text."""
    from server.kb.store import kb_dir

    rel, _, heading = ref.partition("#")
    path = kb_dir() / rel.removeprefix("kb/")
    found = note_title(path.name) if rel.startswith("kb/docs/") else None
    title = found[0] if found else path.stem.replace("-", " ")
    if not path.is_file():
        return title + (f" ({heading})" if heading else "")
    line = _heading_line(path, heading) if heading else None
    text = f"{title}: {heading}" if heading else title
    return f"[{text}]({path.resolve().as_uri()}{f'#L{line}' if line else ''})"


@cache
def _heading_line(path: Path, heading: str) -> int | None:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for i, ln in enumerate(lines):
        if ln.startswith("#") and ln.lstrip("#").strip() == heading:
            return i + 1
    return None


def warm_up() -> None:
    """Read every note the code catalog cites (the first diagnostic hover would otherwise pay for it)."""
    for c in codes.CODES.values():
        for n in c.notes:
            note_title(n)


@cache
def note_title(name: str) -> tuple[str, Path] | None:
    """The title (front matter) and path of a knowledge note, by file name under the knowledge content's
    docs/; None if it is not there or does not parse. Read once per process."""
    from server.kb.records import RecordError, load_note
    from server.kb.store import kb_dir

    path = kb_dir() / "docs" / name
    try:
        return load_note(path).title, path.resolve()
    except (OSError, RecordError):
        return None


def _phys_desc(sl: Slice, assignment: tuple[tuple[int, int], ...]) -> str:
    phys = jax_physical_shape(sl)
    parts = []
    for p, size in assignment:
        name = PHYS_NAMES[p] if p < len(PHYS_NAMES) else str(p)
        if name == "core":
            parts.append(f"the {size} cores of each chip")
            continue
        whole = size == phys[p]
        wrap = p < len(sl.wrap) and sl.wrap[p] and whole
        parts.append(
            f"{name} ({size}{'' if whole else f' of {phys[p]}, split'}, {'ring' if wrap else 'no wraparound'})"
        )
    return " × ".join(parts)


def _axis_md(an: Analysis, key: str, short: bool = False) -> str:
    net, axis = KEY_TO_AXIS[key]
    chk, sl = an.check, an.check.slice
    d = chk.by_key(key)
    over = "ICI (within a slice)" if net == "ici" else "DCN (across slices)"
    lines = [f"**{key}**: the `{axis.mesh_axis}` mesh axis over {over}. {_first_sentence(axis.meaning)}", ""]
    raw = d.raw if d else None
    if d is not None and d.degree is not None:
        how = ""
        if raw == -1 and sl is not None:
            target = sl.devices_per_slice if net == "ici" else sl.num_slices
            others = math.prod((x.degree or 1) for x in (chk.ici if net == "ici" else chk.dcn) if x is not d)
            how = f" (−1 fills {target} {'devices per slice' if net == 'ici' else 'slices'} / {others})"
        total = chk.degree(axis.name)
        whole = (
            f"; total `{axis.mesh_axis}` ICI × DCN **{total}**-way over {sl.devices} devices"
            if total is not None and sl is not None
            else ""
        )
        lines.append(f"- Degree: **{d.degree}**{how}{whole}")
    else:
        lines.append(f"- Degree: `{raw!r}` (unresolved)")
    if sl is not None and net == "ici" and chk.placement is not None and d is not None:
        idx = AXES.index(axis)
        p = chk.placement
        if p.ok and p.handler:
            lines.append(f"- Placement: JAX's {p.handler} on {sl.name} (any mesh shape fits)")
        elif p.ok and idx < len(p.assignment) and p.assignment[idx]:
            lines.append(f"- Physical axes: {_phys_desc(sl, p.assignment[idx])} of {sl.name} ({sl.topology_str})")
        elif p.ok and (d.degree or 1) == 1:
            lines.append("- Physical axes: none (degree 1)")
    if short:
        return "\n".join(lines)
    shards = [
        w
        for w, on in (
            ("weights", axis.shards_weights),
            ("the batch", axis.shards_batch),
            ("attention heads", axis.shards_heads),
        )
        if on
    ]
    if shards:
        lines.append(f"- Shards: {', '.join(shards)}")
    lines += _axis_traffic(an, axis.name)
    notes = [_AXIS_NOTES.get(axis.name), "dcn-vs-ici-placement.md" if net == "dcn" else "physical-axis-assignment.md"]
    lines += ["", "More: " + " · ".join(_note_link(n) for n in notes if n)]
    return "\n".join(lines)


# The knowledge note about each mesh axis (kb/docs/), linked from its key's hover.
_AXIS_NOTES = {
    "data": "fsdp-vs-data-parallelism.md",
    "fsdp": "fsdp-memory-savings.md",
    "fsdp_transpose": "fsdp-transpose.md",
    "tensor": "tensor-parallel-ceiling.md",
    "context": "context-parallelism-long-sequences.md",
    "expert": "expert-parallelism-all-to-all.md",
    "pipeline": "pipeline-bubbles.md",
}


def _slice_md(an: Analysis) -> str:
    sl = an.check.slice
    if sl is None:
        return "**No TPU slice resolved.** Declare one with `compile_topology: v5e-256`."
    c = sl.chip
    wraps = ", ".join(f"{PHYS_NAMES[i]}={'ring' if w else 'open'}" for i, w in enumerate(sl.wrap))
    src = {k: _cited(v) for k, v in c.sources.items()}
    lines = [
        f"**{sl.name}**: TPU {c.generation}, declared by {an.check.slice_source or 'default'}",
        "",
        f"- {sl.chips} chips, topology {sl.topology_str} ({wraps}), {sl.devices_per_slice} JAX devices per slice"
        + (f", {sl.num_slices} slices = {sl.devices} devices" if sl.num_slices > 1 else ""),
        f"- Per chip: {c.peak_bf16_flops / 1e12:g} TFLOP/s bf16; HBM {c.hbm_bw / GB:g} GB/s; ICI "
        f"{c.ici_links} links × {c.ici_link_bw / GB:g} GB/s one way; HBM ridge point {c.hbm_ridge:.0f} FLOP/byte",
        f"- {usable_hbm_text(c.hbm_bytes, c.compiler_hbm_bytes)}",
        "",
        f"_Spec: {src.get('peak_bf16_flops')}"
        + ("; usable HBM: libtpu's stated limit" if c.compiler_hbm_bytes is not None else "")
        + "._",
    ]
    return "\n".join(lines)


def _cited(key: str) -> str:
    """A spec source's short name (its citation up to the first comma)."""
    return SOURCES.get(key, key).split(",")[0].split(" (")[0]


def usable_hbm_text(hbm_bytes: float, compiler_limit: float | None) -> str:
    """The one usable-HBM figure (server/perf/memory.py usable_hbm: what the memory verdicts compare with) and what
    it is: 'HBM 32 GiB per chip, 31.25 GiB usable by one program (the TPU compiler's limit, libtpu)'."""
    usable = usable_hbm(hbm_bytes, compiler_limit)
    what = (
        "the TPU compiler's limit, libtpu"
        if compiler_limit is not None
        else f"capacity less the {RUNTIME_RESERVE:.0%} runtime reserve"
    )
    return f"HBM {hbm_bytes / GIB:g} GiB per chip, **{gib(usable)} GiB usable** by one program ({what})"


def _batch_md(an: Analysis) -> str:
    cfg, chk, sl = an.config, an.check, an.check.slice
    pdbs = cfg.get("per_device_batch_size")  # None when ASAP112 refuses it: shown as written, nothing computed
    seq = cfg.get("max_target_length")
    gas = cfg.get("gradient_accumulation_steps", 1)
    lines = [
        f"**per_device_batch_size** = {cfg.raw('per_device_batch_size')}",
        "",
        "Sequences per device per step; global batch = per_device_batch_size × devices "
        "(× gradient_accumulation_steps).",
    ]
    if sl is not None and pdbs is not None:
        micro = int(sl.devices * pdbs)
        lines.append(
            f"- Global batch: {pdbs:g} × {sl.devices} devices = **{micro}** sequences"
            + (f" × {gas} accumulation steps" if isinstance(gas, int) and gas > 1 else "")
        )
        if isinstance(seq, int):
            tokens = step_tokens(pdbs, seq, sl.devices, gas if isinstance(gas, int) else 1)
            lines.append(f"- Tokens per step: {tokens:,.0f} (max_target_length {seq})")
        if chk.consistent:
            batch_axes = [a.name for a in AXES if a.shards_batch]
            shards = math.prod(chk.degree(a) or 1 for a in batch_axes)
            lines.append(
                f"- Batch shards (data × fsdp × fsdp_transpose × expert): {shards} → "
                f"{micro / shards:g} sequences per shard"
            )
    return "\n".join(lines)


def _model_md(an: Analysis) -> str:
    """The resolved block structure and parameter counts, with the model file they come from."""
    from server.perf import model_summary
    from server.perf.arith import ArithError

    try:
        return model_summary.of_config(an.config).markdown()
    except ArithError as e:
        return f"**model_name** `{an.config.get('model_name')}`: cannot be priced ({e.key}: {e})."


def _mfu_peak_md(e: Estimate) -> str:
    """Which peak the MFU is against, when the config quantizes: MaxText's MFU counts the bf16 peak."""
    if e.matmuls.quantized:
        return (
            f" (MaxText's, against the bf16 peak; {e.mfu_at_matmul_peak:.1%} of the peak the step runs at, with "
            f"{e.matmuls.describe()})"
        )
    return f" ({e.matmuls.describe()})" if e.quantization else ""


def _uncertain_md(m: Memory) -> str:
    """The parts of the memory estimate counted in full that the compiler may not keep: an upper bound, said."""
    if not m.uncertain:
        return ""
    parts = ", ".join(f"{k} {m.components.get(k, 0.0) / GIB:.1f} GiB" for k, _ in m.uncertain)
    return f"; an upper bound: counts {parts}, which the compiler may not keep (`asap verify` compiles it)"


def _estimate_md(an: Analysis) -> str:
    e = an.estimate
    if e is None:
        return ""
    kind, _, parts = e.time.bottleneck()
    t = e.time
    return "\n".join(
        [
            "",
            "",
            f"**Estimate** (ASAP's step-time model, not a measurement): {e.mfu:.1%} MFU{_mfu_peak_md(e)}, "
            f"{e.tflops_per_chip:.0f} TFLOP/s per chip, step {t.step_s * 1e3:,.0f} ms, **{kind}-bound** "
            f"({_shares(parts, t.step_s)})",
            f"- compute {t.compute_s * 1e3:,.0f} ms · HBM {t.hbm_s * 1e3:,.0f} ms · "
            f"collectives {t.comm_s * 1e3:,.0f} ms ({t.exposed_comm_s * 1e3:,.0f} ms not hidden by compute)",
            f"- HBM per chip {e.memory.total / GIB:.1f} of {gib(e.memory.usable)} GiB usable ({e.memory.verdict})"
            + _uncertain_md(e.memory),
            f"- {an.config.run_flags.hover_line()}",
        ]
    )


def _flags_md(an: Analysis, line: int) -> tuple[str, Span] | None:
    """On a `# LIBTPU_INIT_ARGS=...` comment line: what ASAP read from the config's flags comments (the groups,
    with the constant of MaxText's flag library each mirrors, and the flags it does not know, kept)."""
    src, doc = an.config.flags_comment, an.config.document
    if src is None or doc is None or line not in src.lines or not 0 <= line < len(doc.lines):
        return None
    rf = an.config.run_flags
    out = [f"**{' / '.join(src.variables)}** — {rf.hover_line()}"]
    if rf.source is not src:  # another source wins (the command line's): this comment is not what was priced
        out.append(f"- This comment is not used: {rf.describe()} takes precedence.")
    flags = parse_xla_flags(src.text) if rf.source is not src else rf.flags
    if flags is not None:
        groups = [(n, g) for n, g in flags.groups().items() if g.is_set]
        if groups:
            out.append(
                "- Groups: "
                + ", ".join(f"{n} (`{g.library_constant}`)" if g.library_constant else n for n, g in groups[:12])
                + (f" and {len(groups) - 12} more" if len(groups) > 12 else "")
            )
        if flags.unknown:
            shown = ", ".join(f"`--{u.name}`" for u in flags.unknown[:10])
            more = f" and {len(flags.unknown) - 10} more" if len(flags.unknown) > 10 else ""
            out.append(f"- Not in MaxText's flag library (kept, not modelled): {shown}{more}")
    return "\n".join(out), Span(line, 0, line, len(doc.lines[line]))


def _shares(parts: dict[str, float], step_s: float) -> str:
    """The two largest parts of the step in plain words: 'compute 49% of the step, next communication 41%'."""
    (k1, v1), (k2, v2) = sorted(parts.items(), key=lambda kv: kv[1], reverse=True)[:2]
    names = {"hbm": "memory-bound work", "communication": "communication not hidden by compute"}
    return f"{names.get(k1, k1)} {v1 / step_s:.0%} of the step, next {names.get(k2, k2)} {v2 / step_s:.0%}"


def _memory_md(an: Analysis) -> str:
    e = an.estimate
    if e is None:
        return ""
    m = e.memory
    top = sorted(m.components.items(), key=lambda kv: kv[1], reverse=True)[:4]
    parts = " · ".join(f"{k} {v / GIB:.1f}" for k, v in top if v > 0)
    return (
        f"\n\n**HBM per device** (estimate, remat `{e.remat.name}`): {m.total / GIB:.1f} of "
        f"{gib(m.usable)} GiB usable, {m.verdict}\n- largest parts (GiB): {parts}\n"
        f"- usable: {_usable_what(m.compiler_limit)}"
    )


def _usable_what(compiler_limit: float | None) -> str:
    return (
        "what the TPU compiler (libtpu) lets one program use per chip"
        if compiler_limit is not None
        else f"the chip's HBM less a {RUNTIME_RESERVE:.0%} runtime reserve"
    )


# The cost model prices collectives per group of mesh axes that share a pattern (server/perf/layout.py).
_GROUP = {
    "fsdp": "fsdp",
    "fsdp_transpose": "fsdp",
    "tensor": "tensor",
    "tensor_sequence": "tensor",
    "autoregressive": "tensor",
    "context": "context",
    "context_usp_ulysses": "context",
    "expert": "expert",
    "data": "data",
    "pipeline": "pipeline",
}


def _axis_traffic(an: Analysis, axis: str) -> list[str]:
    """What this axis' collectives cost per step in the estimate, and whether they hide behind compute."""
    e = an.estimate
    group = _GROUP.get(axis)
    if e is None or group is None or group not in e.time.comm_by_axis:
        return []
    total = e.time.comm_by_axis[group]
    exposed = e.time.exposed_by_axis.get(group, 0.0)
    link = e.time.comm.paths[group].physical if group in e.time.comm.paths else "?"
    kinds = ", ".join(sorted({c.kind for c in e.time.comm.collectives if c.axis == group}))
    hidden = (
        "hidden behind compute"
        if exposed == 0
        else f"{exposed * 1e3:,.0f} ms exposed (not hidden by compute: {exposed / e.time.step_s:.0%} of the step)"
    )
    # whether how much hides was measured on the compiler (the overlap table) or assumed (server/perf/overlap.py)
    terms = [t for t in e.time.overlap if t.axis == group]
    n = sum(t.source.startswith("measured") for t in terms)
    basis = "assumed overlap" if n == 0 else "measured overlap" if n == len(terms) else "overlap partly measured"
    return [
        f"- Collectives ({group} group, estimate): {kinds}, {total * 1e3:,.0f} ms per step over {link}; {hidden} "
        f"({basis})"
    ]


def profile_hover(result: ProfileResult, line: int, column: int) -> tuple[str, Span] | None:
    """The linked profile's report, on the line that links it (comment, base_output_directory)."""
    link, report = result.link, result.report
    if link is None or report is None or link.span.line != line:
        return None
    return profile_md(report, result.files.describe() if result.files else str(link.path)), link.span


def profile_md(report: prof.Report, source: str) -> str:
    """The profile report as Markdown: verdict and evidence, steps, top ops, collectives, comparison."""
    v, k = report.verdict, report.kpis
    out = [f"**Profile: {v.bottleneck}-bound** (confidence {v.confidence:.0%}; rule: {v.rule})", ""]
    out += [f"- {e}" for e in v.evidence[:PROFILE_EVIDENCE]]
    head = f"Source: XProf profile `{source}`" + (f", {k.device_type}" if k.device_type else "")
    if k.steps is not None:
        st = k.steps
        dropped = f", {len(st.outliers)} outlier steps dropped" if st.outliers else ""
        head += (
            f"; steps: {st.n}, median {st.median_ms:.1f} ms, mean {st.mean_ms:.1f} ms, "
            f"stddev {st.stddev_ms:.1f} ms{dropped}"
        )
    out += ["", head]
    if report.top_ops:
        out += [
            "",
            "| op | category | self time | FLOP/s of peak | HBM BW of peak | bound by |",
            "|---|---|---|---|---|---|",
        ]
        for o in report.top_ops[:PROFILE_OPS]:
            fu = (
                "not believed"
                if o.implausible
                else (f"{o.flop_utilization:.0%}" if o.flop_utilization is not None else "-")
            )
            bu = f"{o.hbm_bw_utilization:.0%}" if o.hbm_bw_utilization is not None else "-"
            out.append(
                f"| `{o.name[:40]}` {o.layer or ''} | {o.category} | {o.self_time_fraction:.1%} | {fu} | {bu} | "
                f"{o.bound_by or '-'} |"
            )
    c = report.collectives
    if c.by_kind:
        kinds = ", ".join(f"{n} {g.fraction:.1%}" for n, g in c.by_kind.items())
        out += ["", f"Collectives: {c.share:.1%} of the step ({kinds})"]
        if c.by_axis:
            out.append("By mesh axis: " + ", ".join(f"{a} {g.fraction:.1%}" for a, g in c.by_axis.items()))
    cmp = report.comparison
    if cmp:
        out += [
            "",
            f"Against the estimate: step {cmp['measured_step_s'] * 1e3:.1f} ms measured vs "
            f"{cmp['expected_step_s'] * 1e3:.1f} ms expected ({cmp['step_gap']:+.0%}); MFU "
            f"{cmp['measured_mfu']:.1%} vs {cmp['expected_mfu']:.1%}; expected {cmp['expected_bottleneck']}-bound",
        ]
    out += [
        "",
        "_Shares are of the step; op utilizations against the chip's per-TensorCore peaks. The whole report: "
        "`asap profile`._",
    ]
    return no_paths("\n".join(out))


PROFILE_EVIDENCE = 2  # the profile hover's evidence lines (the rest: `asap profile`)
PROFILE_OPS = 5  # and its top ops


def agent_md(result: AnalysisReport, stale: bool, verified: list[VerifiedTarget] | None = None) -> str:
    """The agents' diagnosis and proposals as Markdown (the hover on a key the diagnosis implicates), at most about
    15 lines: what (bottleneck and confidence), the proposals table, why (the first piece of evidence and its
    source, by name), and "more" as links (the knowledge notes the proposals cite, the documentation's section).
    `verified`: the TPU compiler's verification of the current mesh and the proposals
    (server/presentation/verification.py), when run."""
    d = result.diagnosis
    out = []
    if stale:
        out += ["*Stale: the config changed since this analysis; save to refresh.*", ""]
    if d is not None:  # the hover is on the diagnosis' finding: there is one
        src = "the linked XProf profile" if d.source == "profile" else "ASAP's step-time model"
        out += [f"**{d.bottleneck}-bound** (confidence {d.confidence:.0%}, from {src}){_rest(d.summary)}", ""]
    props = result.proposals
    by_rank = {e.rank: e.result for e in verified or []}
    if props:
        compiler = bool(verified)
        head = "| # | mesh and changes | expected | confidence |" + (" TPU compiler |" if compiler else "")
        out += [head, "|---|---|---|---|" + ("---|" if compiler else "")]
        for p in props:
            sp = p.expected.speedup
            exp = f"x{sp:.2f}, MFU {p.expected.mfu:.1%}" if sp is not None else f"MFU {p.expected.mfu:.1%}"
            label = "keep the current mesh" if p.keep_current else mesh_label(p)
            row = f"| {p.rank} | {label} | {exp} | {p.confidence:.0%} |"
            if compiler:
                r = by_rank.get(None if p.keep_current else p.rank)
                row += f" {verification.summary(r) if r else 'not compiled'} |"
            out.append(row)
        out.append("")
    elif result.nothing_fits is not None:
        out += [f"Nothing fits: {nothing_fits_text(result.nothing_fits)}", ""]
    out += _withdrawn_md(result)
    if d is not None and d.evidence:
        ev = d.evidence[0]
        out += [f"**Why:** {ev.text} ({readable_source(ev.source)})", ""]
    if props:
        out += [f"Confidence rests on: {_clause(props[0].confidence_basis)}", ""]
    if result.calibration:
        out += [f"*{result.calibration}*", ""]
    refs = list(dict.fromkeys(r for p in props for r in p.references))[:3]
    more = [kb_link(r) for r in refs]
    if (section := doc_link("cli.md", "how ASAP diagnoses (documentation)", "## `asap analyze`")) is not None:
        more.append(section)
    backend = result.backend
    agents = f"Backend: {backend.name}" + (f" ({backend.fallback_reason})" if backend.fallback_reason else "")
    out.append(("More: " + " · ".join(more) + " · " if more else "") + f"*{agents}*")
    return no_paths("\n".join(out))


WITHDRAWN_WORDS = 140  # characters of the compiler's words on a withdrawn proposal's line (the JSON has them all)


def _withdrawn_md(result: AnalysisReport) -> list[str]:
    """The proposals the TPU compiler withdrew, one line each with the compiler's words, and the estimate's
    disagreement with the compiler once (the report's compiler_note): a compute-bound diagnosis is not in Problems,
    so the hover is where they are read."""
    out: list[str] = []
    for w in result.withdrawn or []:
        words = w.compiler.message if w.compiler is not None and w.compiler.message else "rejected"
        if len(words) > WITHDRAWN_WORDS:
            words = words[: WITHDRAWN_WORDS - 1].rstrip() + "…"
        out.append(f"- Withdrawn: {mesh_label(w)} (TPU compiler: {words})")
    if result.compiler_note:
        out.append(f"*{result.compiler_note}*")
    return [*out, ""] if out else []


_AHEAD = re.compile(r" ?\((\d+%) of the step ahead of the next\)")  # older reports' words
_SHARES = re.compile(
    r"^ \([a-z -]+ \d+% of the step(, [^()]*points more than[^()]*)?\)"
)  # the estimate's shares: "Why" says them
_VERDICT = re.compile(r"^\w+-bound (by the estimate|in the profile)")


def _clause(text: str) -> str:
    """A producer's sentence in plain words: "(9% of the step ahead of the next)" says what it measures."""
    return _AHEAD.sub(r" (\1 of the step more than the next-largest part)", text)


def _rest(summary: str) -> str:
    """The diagnosis' summary after the verdict the headline already says (its figures are in "Why")."""
    m = _VERDICT.match(summary)
    if m is None:
        return f": {_clause(summary)}"
    return _SHARES.sub("", _AHEAD.sub("", summary[m.end() :], count=1), count=1)
