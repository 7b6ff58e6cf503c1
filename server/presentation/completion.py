"""Completion in a MaxText config: the top-level keys ASAP knows (with what it knows about each: a one-line
meaning and base.yml's default) at a key's position, and at a value's position the values a key takes when they
form a closed set: slice names after `compile_topology:` (and `# asap: slice=`), model names after `model_name:`,
MaxText's remat policies after `remat_policy:`, `true`/`false` for a boolean key.

Built from the tables ASAP already has, never typed twice: the keys are base.yml's (server/config/defaults.py, the
model catalog's `base` section), the markers of a MaxText config (server/config/resolve.py) and the mesh axes
(server/config/axes.py); the values come from the slice catalog (server/config/slices.py), the model catalog and
the `models/` folders model_name is looked up in (server/config/models.py), and the remat policies the cost model
prices (server/perf/remat.py).

Fast and total: `complete` reads the text line by line (one outline of the top-level keys per text, kept for the
last few texts), never parses the YAML or runs an analysis, and answers [] for any text it cannot place (a comment,
a nested line, a document that is not a mapping or not a MaxText config). Positions are code points.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from server.common.findings import Span
from server.config import models, slices
from server.config.axes import IGNORED_KEYS, KEY_TO_AXIS
from server.config.defaults import BASE_YML, base_defaults
from server.config.resolve import MAXTEXT_MARKERS, SLICE_COMMENT, is_maxtext_key
from server.config.source import split_lines
from server.perf import remat


@dataclass(frozen=True)
class KeyDoc:
    key: str
    summary: str  # one line: what the key means
    default: Any = None  # base.yml's value (None: not in ASAP's table of base.yml)
    has_default: bool = False
    group: int = 2  # 0: the keys of nearly every config, 1: the mesh, 2: the rest (completion's sort order)

    @property
    def markdown(self) -> str:
        default = f"\n\nDefault ({BASE_YML}): `{_yaml(self.default)}`" if self.has_default else ""
        return f"**{self.key}**: {self.summary}{default}"

    @property
    def detail(self) -> str:
        return f"MaxText key, default {_yaml(self.default)}" if self.has_default else "MaxText key"


@dataclass(frozen=True)
class ValueDoc:
    value: str  # as written in YAML
    detail: str  # one line shown beside it
    doc: str = ""  # Markdown


# One line each, for the keys a MaxText config sets most; the parallelism keys get theirs from axes.py.
SUMMARIES: dict[str, str] = {
    "base_config": "the parent config this file extends, relative to this file (MaxText: or to its configs/)",
    "model_name": "the model file (`configs/models/<name>.yml`) whose dimensions replace the config's",
    "compile_topology": "the TPU slice to compile and plan for, e.g. `v5e-256` (ASAP prices the mesh on it)",
    "compile_topology_num_slices": "how many slices of `compile_topology` the job spans (multislice over DCN)",
    "num_slices": "how many slices the job runs on; -1: as many as the runtime finds",
    "per_device_batch_size": "sequences per device per step (a fraction needs tensor/context/pipeline sharding)",
    "max_target_length": "sequence length in tokens",
    "gradient_accumulation_steps": "micro-steps whose gradients are summed before one optimizer step",
    "remat_policy": "which per-layer activations are kept for the backward pass; the rest are recomputed",
    "allow_split_physical_axes": "let one logical mesh axis span part of a physical torus axis",
    "dtype": "activation dtype",
    "weight_dtype": "dtype the weights are stored in",
    "opt_type": "the optimizer (`adamw`, `adam_pax`, `sgd`, ...); its state counts in HBM",
    "global_parameter_scale": "scales every base_* dimension (MaxText's quick model resizing)",
    "quantization": "matmul quantization mode (`int8`, `fp8`, `fp8_full`, ...; empty: none)",
    "attention": "the attention kernel (`autoselected`, `dot_product`, `flash`, ...)",
    "scan_layers": "run the decoder layers under one `jax.lax.scan` (faster compiles)",
    "steps": "training steps",
    "run_name": "the run's name: its outputs go to `base_output_directory/run_name`",
    "base_output_directory": "where checkpoints, logs and profiles are written (often gs://)",
    "hardware": "the accelerator kind (`tpu`, `gpu`, ...)",
    "dataset_type": "the input pipeline (`synthetic`, `tfds`, `grain`, `hf`)",
    "decoder_block": "the decoder layer architecture (`llama2`, `mistral`, `deepseek`, ...)",
    "mesh_axes": "the logical mesh's axis names, least to most network-intense",
    "logical_axis_rules": "which mesh axes each logical tensor axis is sharded over",
    "base_emb_dim": "model width (embedding dimension), before global_parameter_scale",
    "base_num_query_heads": "attention query heads",
    "base_num_kv_heads": "attention key/value heads (fewer than query heads: grouped-query attention)",
    "base_mlp_dim": "MLP hidden dimension",
    "base_num_decoder_layers": "decoder layers",
    "head_dim": "dimension of one attention head",
    "vocab_size": "vocabulary size",
    "num_experts": "MoE experts per layer (1: dense)",
    "num_experts_per_tok": "experts each token is routed to (top-k)",
    "override_model_config": "let command-line overrides win over the model file's keys",
}
COMMON = (
    "base_config",
    "model_name",
    "compile_topology",
    "compile_topology_num_slices",
    "per_device_batch_size",
    "max_target_length",
    "remat_policy",
    "gradient_accumulation_steps",
)


def _yaml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if v == "":
        return "''"
    return str(v)


def _axis_summary(key: str) -> str:
    part, axis = KEY_TO_AXIS[key]
    where = "within a slice (ICI)" if part == "ici" else "across slices (DCN)"
    fill = "; -1 takes the devices left" if part == "ici" else "; -1 takes the slices left"
    return f"degree of {axis.mesh_axis} parallelism {where}{fill}. {axis.meaning}"


@lru_cache(maxsize=1)
def key_docs() -> dict[str, KeyDoc]:
    """Every top-level key ASAP knows (base.yml's, the config markers, the mesh keys), without the keys current
    MaxText ignores (axes.IGNORED_KEYS)."""
    defaults = base_defaults()
    names = {*defaults, *MAXTEXT_MARKERS, *KEY_TO_AXIS} - set(IGNORED_KEYS)
    out: dict[str, KeyDoc] = {}
    for key in sorted(names):
        if key in KEY_TO_AXIS:
            summary, group = _axis_summary(key), 1
        else:
            summary = SUMMARIES.get(key) or (
                "a model dimension or option (model files set it)" if key in models.catalog().base else "MaxText option"
            )
            group = 0 if key in COMMON else 2
        out[key] = KeyDoc(key, summary, defaults.get(key), key in defaults, group)
    return out


def boolean_keys() -> frozenset[str]:
    return frozenset(k for k, d in key_docs().items() if isinstance(d.default, bool))


@lru_cache(maxsize=1)
def slice_values() -> tuple[ValueDoc, ...]:
    """Every `compile_topology` name of the slice catalog, smallest first per generation."""
    out = []
    for gen in slices.CHIPS:
        for name in slices.known_names(gen):
            sl = slices.parse_slice(name)
            hbm = sl.chip.hbm_bytes / slices.GiB
            detail = f"{sl.chips} chips {sl.topology_str}, {sl.devices_per_slice} devices, {hbm:g} GiB HBM per chip"
            out.append(ValueDoc(name, detail, f"**{name}**: {gen}, {detail}; ICI wraparound {_wraps(sl.wrap)}"))
    return tuple(out)


def _wraps(wrap: Iterable[bool]) -> str:
    w = list(wrap)
    return (
        "on every axis"
        if all(w)
        else "on no axis"
        if not any(w)
        else "on " + ", ".join("xyz"[i] for i, on in enumerate(w) if on)
    )


def _model_doc(name: str, keys: dict[str, Any], where: str) -> ValueDoc:
    shape = [
        f"{label} {keys[k]}"
        for label, k in (
            ("block", "decoder_block"),
            ("layers", "base_num_decoder_layers"),
            ("width", "base_emb_dim"),
            ("experts", "num_experts"),
        )
        if k in keys
    ]
    detail = ", ".join(shape) or where
    return ValueDoc(name, detail, f"**{name}** ({where})" + (f": {detail}" if shape else ""))


@lru_cache(maxsize=1)
def _catalog_models() -> tuple[ValueDoc, ...]:
    cat = models.catalog()
    where = f"MaxText {cat.models_dir} at {cat.short_commit}, ASAP's catalog"
    return tuple(_model_doc(n, dict(m.keys), where) for n, m in cat.models.items())


def model_values(config_path: Path | None, maxtext_path: Path | None) -> list[ValueDoc]:
    """The names model_name can take: `default`, the `models/` files MaxText would find first (next to the
    config, in the checkout `maxtext_path` names), then ASAP's catalog. Lists those folders' names only (no file
    is read)."""
    seen: set[str] = set()
    out = [ValueDoc("default", "base.yml's dimensions (no model file)")]
    for d, _origin in models.search_dirs(config_path, (), maxtext_path):
        try:
            names = sorted(e.name[:-4] for e in os.scandir(d) if e.name.endswith(".yml") and e.is_file())
        except OSError:
            continue
        for n in names:
            if n not in seen:
                seen.add(n)
                out.append(ValueDoc(n, f"model file in {d}", f"**{n}**: `{d / (n + '.yml')}`"))
    out += [v for v in _catalog_models() if v.value not in seen]
    return out


def remat_values() -> list[ValueDoc]:
    """MaxText's policies, most memory first, as the cost model prices them, then `custom`."""
    out = []
    for name, p in remat.POLICIES.items():
        kept = ", ".join(sorted(p.saved - {"decoder_layer_input"})) or "only each layer's input"
        again = ", ".join(sorted(p.recomputed())) or "nothing"
        off = f"; offloads {', '.join(sorted(p.offloaded))} to host memory" if p.offloaded else ""
        doc = f"**{name}**: keeps {kept}{off}; recomputes {again} in the backward pass"
        out.append(ValueDoc(name, p.note or f"recomputes {again}", doc))
    out.append(ValueDoc("custom", "per tensor from the config's keys", CUSTOM_DOC))
    return out


CUSTOM_DOC = (
    "**custom**: each tensor as its own key says: `device` (keep), `offload` (host memory) or `remat` (recompute); "
    f"keys: {', '.join(f'`{k}`' for keys in remat.CUSTOM_KEYS.values() for k in keys)}"
)


BOOLEANS = (ValueDoc("true", "boolean"), ValueDoc("false", "boolean"))


def values_for(key: str, config_path: Path | None, maxtext_path: Path | None) -> list[ValueDoc]:
    """The closed set of values `key` takes, or [] when ASAP has none for it."""
    if key == "compile_topology":
        return list(slice_values())
    if key == "model_name":
        return model_values(config_path, maxtext_path)
    if key == "remat_policy":
        return remat_values()
    if key in boolean_keys():
        return list(BOOLEANS)
    return []


# -- where the cursor is ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Item:
    """One completion: `new_text` replaces `span` (on the cursor's line, code points)."""

    label: str
    kind: Literal["key", "value"]
    detail: str
    doc: str  # Markdown
    new_text: str
    span: Span
    sort: str
    filter: str
    suggest_after: bool = False  # a key whose values ASAP completes: ask for them once it is inserted


_KEY = r"(?:\"[^\"]*\"|'[^']*'|[A-Za-z_][\w.\-]*)"
_TOP_KEY = re.compile(rf"(?P<key>{_KEY})[ \t]*:(?:[ \t]|$)")
_NOT_MAPPING = re.compile(r"-(?:[ \t]|$)|[\[{]")  # a block sequence or a flow collection at the top level
_KEY_PREFIX = re.compile(r"[A-Za-z_][\w.\-]*")
_WORD = re.compile(r"[\w.\-]*")
_PLAIN = re.compile(r"\S*")
_VALUE_AT = re.compile(r"(?P<key>[A-Za-z_][\w.\-]*)[ \t]*:(?P<space>[ \t]*)(?P<value>.*)")
_SLICE_AT = re.compile(r"(?P<head>.*\bslice\s*=\s*)(?P<value>[^\s,]*)", re.I)


@dataclass(frozen=True)
class _Outline:
    lines: tuple[str, ...]  # without their line breaks
    keys: dict[str, tuple[int, ...]]  # top-level key -> the lines it is written on
    odd: tuple[int, ...]  # lines (up to 2) whose top-level content is not a `key:` of a block mapping
    asap_comment: bool  # a `# asap:` line
    maxtext: tuple[tuple[str, tuple[int, ...]], ...]  # up to 2 MaxText keys and their lines (one may be the cursor's)

    def set_elsewhere(self, key: str, line: int) -> bool:
        """Whether `key` is written on a line other than `line` (the one being typed)."""
        where = self.keys.get(key)
        return where is not None and where != (line,)


@lru_cache(maxsize=4)
def _outline(text: str) -> _Outline:
    lines = tuple(line.rstrip("\r\n") for line in split_lines(text, keepends=True))
    if not lines or text.endswith(("\n", "\r")):
        lines += ("",)  # the empty line after a final line break is a line the cursor can be on
    keys: dict[str, list[int]] = {}
    odd: list[int] = []
    asap = False
    for i, line in enumerate(lines):
        if not line or line[0] in " \t":
            continue
        if line[0] == "#":
            asap = asap or SLICE_COMMENT.match(line) is not None
            continue
        if line.startswith(("---", "...", "%", "<<")):
            continue
        m = _TOP_KEY.match(line)
        if m:
            keys.setdefault(m["key"].strip("\"'"), []).append(i)
        elif len(odd) < 2 and (_NOT_MAPPING.match(line) or ":" not in line):
            odd.append(i)
    maxtext = tuple((k, tuple(v)) for k, v in keys.items() if is_maxtext_key(k))[:2]
    return _Outline(lines, {k: tuple(v) for k, v in keys.items()}, tuple(odd), asap, maxtext)


def complete(
    text: str, line: int, column: int, path: Path | None = None, maxtext_path: Path | None = None
) -> list[Item]:
    """What to offer at (line, column) of `text` (code points); [] where ASAP has nothing to offer."""
    out = _outline(text)
    if not 0 <= line < len(out.lines) or any(i != line for i in out.odd):
        return []
    others = len(out.keys) > 1 or any(where != (line,) for where in out.keys.values())
    if not (out.asap_comment or not others or any(where != (line,) for _, where in out.maxtext)):
        return []  # some other YAML file: ASAP has nothing to offer there
    text_line = out.lines[line]
    if line == 0 and text_line.startswith("\ufeff"):  # a byte-order mark: the line starts after it
        return [_shift(i, 1) for i in complete(text[1:], line, column - 1, path, maxtext_path)] if column else []
    column = max(0, min(column, len(text_line)))
    before, after = text_line[:column], text_line[column:]
    if before.lstrip().startswith("#"):
        m = _SLICE_AT.fullmatch(before) if SLICE_COMMENT.match(before) else None
        return _values(line, m.end("head"), column + _word_len(after), "", slice_values()) if m else []
    if before[:1] in (" ", "\t"):
        return []  # nested: ASAP completes top-level keys only
    if before == "" or _KEY_PREFIX.fullmatch(before):
        return _keys(line, column + _word_len(after), after, out)
    m = _VALUE_AT.fullmatch(before)
    if m is None:
        return []
    choices = values_for(m["key"], path, maxtext_path)
    value = m["value"]
    if not choices or value[:1] in ("[", "{", "&", "*", "!", "|", ">") or " #" in f" {value}":
        return []
    if value[:1] not in ("'", '"') and re.search(r"\s", value):
        return []  # a space in a plain value: the value is done (no name ASAP offers has one)
    start, quote = m.start("value"), ""
    if value[:1] in ("'", '"'):
        quote, value, start = value[0], value[1:], start + 1
        if quote in value:
            return []  # past the closing quote
    rest = after.split(quote, 1)[0] if quote else after[: _plain_len(after)]
    lead = "" if m["space"] or quote else " "
    return _values(line, start, column + len(rest), lead, choices)


def _plain_len(text: str) -> int:
    """How many characters of `text` continue the plain value the cursor is in (up to a space)."""
    m = _PLAIN.match(text)
    return m.end() if m else 0


def _word_len(text: str) -> int:
    """How many characters of `text` continue the word the cursor is in."""
    m = _WORD.match(text)
    return m.end() if m else 0


def _keys(line: int, end: int, after: str, out: _Outline) -> list[Item]:
    span = Span(line, 0, line, end)
    has_colon = after[_word_len(after) :].lstrip(" \t").startswith(":")
    items = []
    for key, d in key_docs().items():
        if out.set_elsewhere(key, line):
            continue
        more = not has_colon and (key in _HAS_VALUES or isinstance(d.default, bool))
        items.append(
            Item(
                key,
                "key",
                d.detail,
                d.markdown,
                key if has_colon else f"{key}: ",
                span,
                f"{d.group}{key}",
                key,
                suggest_after=more,
            )
        )
    return items


def _shift(item: Item, by: int) -> Item:
    sp = item.span
    return replace(item, span=Span(sp.line, sp.column + by, sp.end_line, sp.end_column + by))


_HAS_VALUES = frozenset({"compile_topology", "model_name", "remat_policy"})


def _values(line: int, start: int, end: int, lead: str, choices: Iterable[ValueDoc]) -> list[Item]:
    span = Span(line, start, line, end)
    return [
        Item(v.value, "value", v.detail, v.doc, lead + v.value, span, f"{i:04d}", lead + v.value)
        for i, v in enumerate(choices)
    ]
