"""The MaxText config model: one document plus its `base_config` parents, resolved to
values that remember where they were set (file, line, key) and the model's dimensions.

Resolution order, lowest first: MaxText's defaults for the keys ASAP reads, the model
file named by `model_name`, then the `base_config` chain from the root parent down to the
document. Explicit `base_*` keys anywhere in the chain override the model file's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server.perf.findings import Finding, Severity, Span
from server.perf.models import FIELD_KEYS, MODELS, ModelDims
from server.perf.source import Entry, YamlSource, YamlSyntaxError, parse

Reader = Callable[[Path], str]

# Keys that mark a YAML file as a MaxText config. A file with none of them gets no diagnostics.
MAXTEXT_MARKERS = frozenset(
    {
        "base_config",
        "model_name",
        "per_device_batch_size",
        "compile_topology",
        "compile_topology_num_slices",
        "max_target_length",
        "remat_policy",
        "base_emb_dim",
        "base_num_decoder_layers",
        "base_num_query_heads",
        "base_mlp_dim",
        "steps",
        "run_name",
        "base_output_directory",
        "mesh_axes",
        "logical_axis_rules",
        "num_slices",
        "allow_split_physical_axes",
        "weight_dtype",
        "opt_type",
        "scan_layers",
        "attention",
        "gradient_accumulation_steps",
        "hardware",
        "dataset_type",
        "decoder_block",
    }
)
_PARALLELISM = re.compile(r"^(ici|dcn)_[a-z_]+_parallelism$")

SLICE_COMMENT = re.compile(r"^\s*#\s*asap\s*:\s*(?P<body>.*)$", re.I)


def is_maxtext_key(key: str) -> bool:
    return key in MAXTEXT_MARKERS or bool(_PARALLELISM.match(key))


_KEY_LINE = re.compile(r"^\s*([A-Za-z_][\w]*)\s*:")


def _looks_like_maxtext(text: str) -> bool:
    """For text that does not parse: does any line start with a MaxText key?"""
    return any((m := _KEY_LINE.match(line)) and is_maxtext_key(m[1]) for line in text.splitlines())


@dataclass(frozen=True)
class Value:
    """A resolved config value and where it came from."""

    key: str
    value: Any
    origin: str  # 'document', 'parent', 'model', 'default'
    entry: Entry | None = None  # where it is written, when it is written in a file

    @property
    def file(self) -> Path | None:
        return self.entry.file if self.entry else None


@dataclass
class Config:
    path: Path | None
    document: YamlSource | None
    values: dict[str, Value] = field(default_factory=dict)
    chain: list[Path] = field(default_factory=list)  # parents, nearest first
    findings: list[Finding] = field(default_factory=list)
    model: ModelDims | None = None
    is_maxtext: bool = False
    declared_slice: str | None = None  # from the `# asap: slice=...` comment
    declared_slice_span: Span | None = None
    declared_num_slices: int | None = None

    def get(self, key: str, default: Any = None) -> Any:
        v = self.values.get(key)
        return v.value if v is not None else default

    def entry(self, key: str) -> Entry | None:
        """Where `key` is written in the document itself (None if inherited or defaulted)."""
        v = self.values.get(key)
        return v.entry if v is not None and v.origin == "document" else None

    def anchor(self, key: str) -> tuple[Path | None, Span]:
        """Where to put a finding about `key`: its own line in the document, else the
        `base_config` line that brings it in, else the first line of the document."""
        v = self.values.get(key)
        if v is not None and v.entry is not None and v.origin == "document":
            return v.entry.file, v.entry.key_span
        if self.document is not None:
            base = self.document.entries.get("base_config")
            if v is not None and v.origin == "parent" and base is not None:
                return self.path, base.key_span
        return self.path, Span.point(0)


def _read_file(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _load_parents(doc: YamlSource, path: Path | None, reader: Reader, cfg: Config) -> list[YamlSource]:
    """Follow base_config from the document; nearest parent first. Errors are located at
    the `base_config` line of the document (the only file the user is looking at)."""
    parents: list[YamlSource] = []
    seen = {path.resolve()} if path else set()
    current, current_path = doc, path
    while True:
        entry = current.entries.get("base_config")
        if entry is None:
            return parents
        anchor = doc.entries["base_config"].key_span
        where = "" if current is doc else f" (in {current_path})"
        if not isinstance(entry.value, str) or not entry.value.strip():
            cfg.findings.append(
                Finding(
                    "ASAP002",
                    Severity.ERROR,
                    f"base_config must be a file name, got {entry.value!r}{where}",
                    "base_config",
                    path,
                    anchor,
                )
            )
            return parents
        base_dir = current_path.parent if current_path else Path.cwd()
        parent_path = (base_dir / entry.value).resolve()
        if parent_path in seen:
            cfg.findings.append(
                Finding(
                    "ASAP003",
                    Severity.ERROR,
                    f"base_config cycle: {entry.value} is already in the chain "
                    f"({' -> '.join(p.name for p in [*([path] if path else []), *cfg.chain, parent_path])})",
                    "base_config",
                    path,
                    anchor,
                )
            )
            return parents
        try:
            text = reader(parent_path)
        except OSError:
            if Path(entry.value).name == "base.yml" and Path(entry.value).parent in (Path("."), Path("configs")):
                # MaxText looks next to the config, then in its own configs directory: its base.yml holds the
                # defaults ASAP already applies (server/perf/defaults.py), so the chain ends here, correctly
                return parents
            cfg.findings.append(
                Finding(
                    "ASAP002",
                    Severity.ERROR,
                    f"base_config '{entry.value}' not found (looked for {parent_path}){where}; "
                    "keys it would set fall back to MaxText's defaults",
                    "base_config",
                    path,
                    anchor,
                )
            )
            return parents
        try:
            parent = parse(text, parent_path)
        except YamlSyntaxError as e:
            cfg.findings.append(
                Finding(
                    "ASAP001",
                    Severity.ERROR,
                    f"base_config '{entry.value}' is not valid YAML at line {e.span.line + 1}: {e.message}",
                    "base_config",
                    path,
                    anchor,
                )
            )
            return parents
        seen.add(parent_path)
        cfg.chain.append(parent_path)
        parents.append(parent)
        current, current_path = parent, parent_path


def parse_asap_comment(lines: list[str]) -> tuple[str | None, int | None, Span | None]:
    """`# asap: slice=v5e-256 [slices=2]` anywhere in the document's comment lines."""
    for i, line in enumerate(lines):
        m = SLICE_COMMENT.match(line)
        if not m:
            continue
        fields = dict(re.findall(r"([a-z_]+)\s*=\s*([^\s,]+)", m["body"], re.I))
        if "slice" in fields:
            num = fields.get("slices")
            col = line.index(fields["slice"], m.start("body"))
            return (
                fields["slice"],
                int(num) if num and num.isdigit() else None,
                Span(i, col, i, col + len(fields["slice"])),
            )
    return None, None, None


def load(path: Path | None, text: str | None = None, reader: Reader = _read_file) -> Config:
    """Load a config (the document's text may come from an editor buffer)."""
    if text is None:
        if path is None:
            raise ValueError("load() needs a path or a text")
        text = reader(path)
    try:
        doc = parse(text, path)
    except YamlSyntaxError as e:
        cfg = Config(path, None, is_maxtext=_looks_like_maxtext(text))
        cfg.findings.append(Finding("ASAP001", Severity.ERROR, e.message, None, path, e.span))
        return cfg
    cfg = Config(path, doc)
    cfg.is_maxtext = doc.is_mapping and any(is_maxtext_key(k) for k in doc.entries)
    if not cfg.is_maxtext:
        return cfg
    parents = _load_parents(doc, path, reader, cfg)

    from server.perf.defaults import DEFAULTS

    values: dict[str, Value] = {k: Value(k, v, "default") for k, v in DEFAULTS.items()}
    layered: dict[str, Value] = {}
    for src in [*reversed(parents), doc]:
        origin = "document" if src is doc else "parent"
        for key, ent in src.entries.items():
            layered[key] = Value(key, ent.value, origin, ent)

    name_v = layered.get("model_name") or values.get("model_name")
    if name_v is not None and isinstance(name_v.value, str) and name_v.value != "default":
        model = MODELS.get(name_v.value)
        if model is None:
            f, span = (name_v.file, name_v.entry.value_span) if name_v.entry else (path, Span.point(0))
            close = [m for m in MODELS if m.split("-")[0] == name_v.value.split("-")[0]]
            hint = f"; known {name_v.value.split('-')[0]} models: {', '.join(close)}" if close else ""
            cfg.findings.append(
                Finding(
                    "ASAP004",
                    Severity.ERROR,
                    f"unknown model_name '{name_v.value}': ASAP has no dimensions for it{hint}. "
                    "Set base_emb_dim, base_num_query_heads, base_num_kv_heads, base_mlp_dim, "
                    "base_num_decoder_layers and head_dim explicitly.",
                    "model_name",
                    f if name_v.origin == "document" else path,
                    span if name_v.origin == "document" else cfg.anchor("model_name")[1],
                )
            )
        else:
            for fld, key in FIELD_KEYS.items():
                values[key] = Value(key, getattr(model, fld), "model")
    values.update(layered)
    cfg.values = values
    cfg.model = _resolve_model(cfg, MODELS.get(str(cfg.get("model_name"))))
    cfg.declared_slice, cfg.declared_num_slices, cfg.declared_slice_span = parse_asap_comment(doc.lines)
    return cfg


def _resolve_model(cfg: Config, base: ModelDims | None) -> ModelDims | None:
    """The model's dims after explicit base_* keys (wrong types are reported by the rules)."""
    import dataclasses

    overrides: dict[str, Any] = {}
    for fld, key in FIELD_KEYS.items():
        v = cfg.values.get(key)
        if v is not None and v.origin in ("document", "parent", "override"):  # above the model preset
            overrides[fld] = v.value
    if base is None:
        required = ("emb_dim", "num_query_heads", "num_kv_heads", "mlp_dim", "num_decoder_layers", "head_dim")
        if not all(f in overrides for f in required):
            return None
        base = ModelDims(
            name=str(cfg.get("model_name", "custom")),
            emb_dim=0,
            num_query_heads=0,
            num_kv_heads=0,
            mlp_dim=0,
            num_decoder_layers=0,
            head_dim=0,
            vocab_size=32000,
            source="explicit base_* keys",
        )
    try:
        return dataclasses.replace(base, **overrides)
    except TypeError:
        return base


def with_overrides(cfg: Config, overrides: dict[str, Any]) -> Config:
    """A copy of `cfg` with some keys set as on MaxText's command line (`key=value`)."""
    import copy

    new = copy.copy(cfg)
    new.values = dict(cfg.values)
    new.findings = list(cfg.findings)
    for k, v in overrides.items():
        new.values[k] = Value(k, v, "override")
    new.model = _resolve_model(new, MODELS.get(str(new.get("model_name"))))
    return new


def parse_override(text: str) -> dict[str, Any]:
    """`ici_fsdp_parallelism=64,ici_tensor_parallelism=4` (YAML scalars) as a dict."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise ValueError(f"expected key=value, got {part!r}")
        k, v = (x.strip() for x in part.split("=", 1))
        if not re.fullmatch(r"[A-Za-z_]\w*", k):
            raise ValueError(f"not a config key: {k!r}")
        src = parse(f"{k}: {v}\n")
        out[k] = src.entries[k].value
    return out
