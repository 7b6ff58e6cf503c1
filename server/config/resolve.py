"""The MaxText config model: one document plus its `base_config` parents, resolved to
values that remember where they were set (file, line, key) and the model's dimensions.

Resolution order, lowest first, as MaxText's pyconfig merges (src/maxtext/configs/pyconfig.py:430-517@e591f30cb):
ASAP's defaults and base.yml's values (server/config/defaults.py), the `base_config` chain from the root parent
down to the document (`_load_config`, 188-203: each parent next to the config naming it, else in MaxText's configs
directory, which server/config/config_files.py `find_config` finds in a checkout or ASAP's catalog), the model
file `model_name` names (server/config/models.py), then command-line overrides (`with_overrides`). The model file
replaces what the config files set (MaxText merges base_yml_config, model_cfg, overrides in that order, 514);
`override_model_config: true` only lets command-line overrides win over it (481-486). `logical_axis_rules` are
merged rule by rule, not replaced (166-185, 493-503).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from server.common.codes import DiagCode
from server.common.findings import Finding, Fix, Related, Severity, Span, TextEdit
from server.config import models
from server.config.config_files import BASE_YML, ConfigFile, find_config
from server.config.integers import INT_KEYS, read_int, reread
from server.config.models import DIM_KEYS, ORIGIN_CATALOG, ORIGIN_CONFIG, ModelDims, ModelFile, ModelFileError
from server.config.run_flags import FlagSource, RunFlags, comment_findings, read_comment, resolve_flags
from server.config.slices import MAX_SLICES
from server.config.source import (
    Entry,
    SourceReadError,
    YamlSource,
    YamlSyntaxError,
    decode_error,
    parse,
    read_text,
    split_lines,
)

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
    """For text that does not parse: does any line (of its first 64 kB) start with a MaxText key?"""
    return any((m := _KEY_LINE.match(line)) and is_maxtext_key(m[1]) for line in split_lines(text[:65536]))


# The first line of a launch command's run written as a YAML document (server/launch/project.py): every key but
# base_config is a command-line override, so every reader of that document (the fix vetting, the agents, Verify)
# resolves it as MaxText resolves the command.
RUN_DOCUMENT_MARKER = "# asap: one MaxText run of a launch file; its keys are command-line overrides"

# The origins of values written in the document being analysed (a fix can edit them where they are).
WRITTEN_HERE = ("document", "command")


@dataclass(frozen=True)
class Value:
    """A resolved config value and where it came from."""

    key: str
    value: Any
    # 'document', 'parent', 'model' (the model file), 'default' (ASAP's or base.yml's), 'override' (asked for: --mesh,
    # a proposal), 'command' (a `key=value` of a launch command: an override MaxText's command line sets, written in
    # the document being analysed, server/launch/)
    origin: str
    entry: Entry | None = None  # where it is written, when it is written in a file
    # Where a value of a parent with no file on disk is written, for messages: "MaxText's
    # src/maxtext/configs/inference/inference_jetstream.yml:12 (at e591f30cb, ASAP's catalog)".
    where: str | None = None

    @property
    def file(self) -> Path | None:
        return self.entry.file if self.entry else None


# The range of per_device_batch_size ASAP reads: below 1 it is the share of one sequence each device holds, so
# 1/MIN devices would share one sequence (no slice has that many); MAX sequences per device is far beyond any
# HBM. Inside it every product and quotient formed from it (global batch, tokens, devices per sequence) is an
# exact, finite number.
MIN_BATCH = 2.0**-24
MAX_BATCH = 2**20


def batch_size_problem(pdbs: Any) -> str | None:
    """What is wrong with a per_device_batch_size value (ASAP112), or None when it is a finite number in range."""
    if isinstance(pdbs, bool) or not isinstance(pdbs, (int, float)):
        return f"per_device_batch_size must be a number > 0, got {pdbs!r}"
    if isinstance(pdbs, float) and not math.isfinite(pdbs):
        return f"per_device_batch_size must be a finite number > 0, got {pdbs!r}"
    if pdbs <= 0:
        return f"per_device_batch_size must be a number > 0, got {pdbs!r}"
    if pdbs < MIN_BATCH:
        return (
            f"per_device_batch_size {pdbs:g} is too small: below 1 it is the share of one sequence each device "
            f"holds, and ASAP reads shares down to 2^-24 (one sequence over {round(1 / MIN_BATCH)} devices)"
        )
    if pdbs > MAX_BATCH:
        return f"per_device_batch_size {pdbs:g} is too large: ASAP reads at most {MAX_BATCH} sequences per device"
    return None


# The keys whose value is checked where the config is read (server/config/mesh.py reports the problem, located,
# as ASAP112). `Config.get` hands a consumer (estimate, agents, hover, code lens, verification) their value only
# when it passes, so none of them computes with a value the check refused: an infinite, NaN or subnormal batch
# size would overflow or divide by zero in each of them.
CHECKED_KEYS: dict[str, Callable[[Any], str | None]] = {"per_device_batch_size": batch_size_problem}
# The whole-number keys (mesh degrees, slice counts, server/config/integers.py) are read as MaxText's pydantic
# `int` reads them: `Config.get` gives the integer (2 for 2.0, "2" or " 2 ", 1 for true) and None for a value
# pydantic refuses (2.5, "2.", "0x10"), which `problem` describes and mesh.py reports (ASAP100, ASAP005).


@dataclass
class Config:
    path: Path | None
    document: YamlSource | None
    values: dict[str, Value] = field(default_factory=dict)
    chain: list[Path] = field(default_factory=list)  # parents on disk, nearest first
    parents: list[ConfigFile] = field(default_factory=list)  # every parent (catalog ones too), nearest first
    findings: list[Finding] = field(default_factory=list)
    model: ModelDims | None = None  # the resolved dimensions (None only for a file that is not a MaxText config)
    is_maxtext: bool = False
    declared_slice: str | None = None  # from the `# asap: slice=...` comment
    declared_slice_span: Span | None = None
    declared_num_slices: int | None = None
    model_file: ModelFile | None = None  # the model file model_name loads, None for "default" or an unknown name
    maxtext_path: Path | None = None  # the MaxText checkout to look for model files in
    # The values below the model file (defaults, base.yml, the chain), the reader, and the findings that
    # resolving the model produced: with_overrides resolves again from them.
    chain_values: dict[str, Value] = field(default_factory=dict, repr=False)
    reader: Reader | None = field(default=None, repr=False, compare=False)
    model_findings: list[Finding] = field(default_factory=list, repr=False)
    # The run's XLA flags (server/config/run_flags.py): the document's `# LIBTPU_INIT_ARGS=...` comment, and the
    # flags the estimate is priced under (the command line's or the setting's, by precedence; libtpu's defaults
    # when none is stated). with_overrides' copies keep them, so every estimate of this config sees them.
    flags_comment: FlagSource | None = None
    run_flags: RunFlags = field(default_factory=RunFlags)
    # A launch command's `key=value` overrides (origin "command"): every resolution applies them over the model
    # file as MaxText's command line does, with_overrides' included.
    command_values: dict[str, Value] = field(default_factory=dict, repr=False)

    def get(self, key: str, default: Any = None) -> Any:
        """The resolved value of `key`, `default` when it is not set. A key of CHECKED_KEYS whose value fails its
        check reads as None (not `default`: the config sets it, to something no consumer may compute with);
        `raw` and `problem` say what is written and what is wrong with it. A whole-number key (INT_KEYS) reads as
        the integer MaxText reads, None when MaxText refuses its value."""
        v = self.values.get(key)
        if v is None:
            return default
        if key in INT_KEYS:
            return read_int(v.value)[0]
        check = CHECKED_KEYS.get(key)
        if check is not None and check(v.value) is not None:
            return None
        return v.value

    def raw(self, key: str, default: Any = None) -> Any:
        """The value of `key` as resolved, unchecked: for the check that reports it and for showing what is
        written, never for computing with."""
        v = self.values.get(key)
        return v.value if v is not None else default

    def problem(self, key: str) -> str | None:
        """What the check of a key of CHECKED_KEYS, or the reading of a whole-number key, finds wrong with its
        resolved value (None: set and fine, or not set, or a key without a check)."""
        v = self.values.get(key)
        if v is not None and key in INT_KEYS:
            return read_int(v.value)[1]
        check = CHECKED_KEYS.get(key)
        return check(v.value) if v is not None and check is not None else None

    def entry(self, key: str) -> Entry | None:
        """Where `key` is written in the document itself (None if inherited, defaulted, or brought in by a
        merge key: its value is not on a line of its own that a fix could rewrite)."""
        v = self.values.get(key)
        if v is None or v.origin not in WRITTEN_HERE or v.entry is None or v.entry.merged:
            return None
        return v.entry

    def mesh_entries(self) -> list[Entry]:
        """The parallelism keys written in the document itself, in file order (the mesh block)."""
        entries = self.document.entries.values() if self.document is not None else []
        return sorted((e for e in entries if e.key.endswith("_parallelism")), key=lambda e: e.key_span)

    def mesh_anchor(self) -> Entry | None:
        """The first parallelism key written in the document: where findings about the mesh as a whole go."""
        mesh = self.mesh_entries()
        return mesh[0] if mesh else None

    def anchor(self, key: str) -> tuple[Path | None, Span]:
        """Where to put a finding about `key`: its own line in the document, else the
        `base_config` line that brings it in (for a model file's value: where `model_name` is), else the first
        line of the document."""
        v = self.values.get(key)
        if v is not None and v.origin == "model" and key != "model_name":
            return self.anchor("model_name")  # a model file's value: where model_name is written
        if v is not None and v.entry is not None and v.origin in WRITTEN_HERE:
            return v.entry.file, v.entry.key_span
        if self.document is not None:
            base = self.document.all_entries().get("base_config")
            if v is not None and v.origin == "parent" and base is not None:
                return self.path, base.key_span
        return self.path, Span.point(0)


def _read_file(path: Path) -> str:
    return read_text(path)  # UTF-8 within the size limit, else a located SourceReadError (an OSError)


def _unreadable(e: Exception, path: Path | None) -> SourceReadError | None:
    """A reader's failure on a file that exists but is not a config's text (not UTF-8, too large), located;
    None for any other failure (a missing file)."""
    if isinstance(e, SourceReadError):
        return e
    if isinstance(e, UnicodeDecodeError):  # a reader of its own (the editor's) decoding with str.decode
        return decode_error(e, path)
    return None


def _file_id(path: Path) -> tuple[int, int] | None:
    """The file's identity on disk (device, inode), None when it has none to tell (missing, or a file system that
    reports no inode numbers)."""
    try:
        st = path.stat()
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if st.st_ino else None


def _load_parents(
    doc: YamlSource, path: Path | None, reader: Reader, cfg: Config
) -> list[tuple[YamlSource, ConfigFile]]:
    """Follow base_config from the document, nearest parent first, each with where it was found (a file on disk,
    or one of MaxText's configs in ASAP's catalog: config_files.find_config's order, MaxText's). Errors are located
    at the `base_config` line of the document (the only file the user is looking at)."""
    parents: list[tuple[YamlSource, ConfigFile]] = []
    # Resolved paths on disk, and ("catalog", key) for MaxText's configs read from the catalog.
    seen: set[object] = {path.resolve()} if path else set()
    # The files of the chain by identity too: a name that resolve() does not map to the same path (a hard link,
    # another case on a case-insensitive disk) can still name a file of the chain, the document itself above all.
    # Read as a parent, the document's own text on disk (not the buffer being edited, not a fix's result) would
    # set its keys: a key renamed or removed would still be there, and a quick fix could never clear its finding.
    ids: dict[tuple[int, int], Path] = {}
    if path is not None and (own := _file_id(path)) is not None:
        ids[own] = path.resolve()
    current: YamlSource = doc
    current_file: ConfigFile | None = None  # None: the document
    while True:
        entry = current.all_entries().get("base_config")
        if entry is None:
            return parents
        anchor = doc.all_entries()["base_config"].key_span
        where = "" if current_file is None else f" (in {current_file.where})"

        def error(message: str, code: str = DiagCode.BASE_CONFIG_NOT_FOUND) -> list[tuple[YamlSource, ConfigFile]]:
            cfg.findings.append(Finding(code, Severity.ERROR, message, "base_config", path, anchor))  # noqa: B023
            return parents

        if not isinstance(entry.value, str) or not entry.value.strip():
            return error(f"base_config must be a file name, got {entry.value!r}{where}")
        relative_to = current_file if current_file is not None else (path.parent if path is not None else None)
        try:
            found, looked = find_config(entry.value, relative_to, cfg.maxtext_path)
        except (OSError, ValueError, RuntimeError) as e:  # not a path the system can look up
            return error(f"base_config must be a file name, got {entry.value!r}{where}: {e}")
        if found is None:
            if Path(entry.value) == Path("configs", BASE_YML):
                # Read as MaxText's base.yml since ASAP first took it so (0cd5483): its values are ASAP's defaults
                return parents
            return error(
                f"base_config '{entry.value}' not found (looked in {_places(looked)}){where}; "
                "keys it would set fall back to MaxText's defaults"
            )
        if found.is_maxtext_base and found.origin != ORIGIN_CONFIG:
            # MaxText's own base.yml from its configs directory: its values are ASAP's defaults, which every config
            # starts from (server/config/defaults.py), so the chain ends here, correctly. One next to the naming
            # config is read as any parent (it may be the user's own base.yml).
            return parents
        identity: object = found.path if found.path is not None else ("catalog", found.key)
        fid = _file_id(found.path) if found.path is not None else None
        same = ids.get(fid) if fid is not None else None
        if identity in seen or same is not None:
            alias = f"; it is {same.name} under another name" if same is not None and same != found.path else ""
            names = [*([path.name] if path else []), *(_short(p) for p in cfg.parents), _short(found)]
            return error(
                f"base_config cycle: {entry.value} is already in the chain ({' -> '.join(names)}{alias})",
                DiagCode.BASE_CONFIG_CYCLE,
            )
        try:
            text = found.read(reader)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            bad = _unreadable(e, found.path)
            why = bad.strerror if bad is not None else (getattr(e, "strerror", None) or str(e))
            return error(
                f"base_config '{entry.value}' cannot be read: {why} in {found.where}{where}; "
                "keys it would set fall back to MaxText's defaults"
            )
        try:
            parent = parse(text, found.path)
        except YamlSyntaxError as e:
            catalog = f" ({found.where})" if found.origin == ORIGIN_CATALOG else ""
            return error(
                f"base_config '{entry.value}'{catalog} is not valid YAML at line {e.span.line + 1}: {e.message}",
                DiagCode.INVALID_YAML,
            )
        seen.add(identity)
        if fid is not None and found.path is not None:
            ids[fid] = found.path
        if found.path is not None:
            cfg.chain.append(found.path)
        cfg.parents.append(found)
        parents.append((parent, found))
        current, current_file = parent, found


def _short(f: ConfigFile) -> str:
    """A parent's name in a cycle's chain: the file's name, or a catalog entry's path in MaxText's configs."""
    return f.path.name if f.path is not None else f"{f.key} (ASAP's catalog)"


def _places(looked: list[str]) -> str:
    return looked[0] if len(looked) == 1 else f"{', '.join(looked[:-1])} and {looked[-1]}"


_FIELD = re.compile(r"([a-z_]+)\s*=\s*([^\s,]+)", re.I)


def parse_asap_comment(lines: list[str]) -> tuple[str | None, int | None, Span | None]:
    """`# asap: slice=v5e-256 [slices=2]` anywhere in the document's comment lines."""
    sl, num, span, _ = _asap_comment(lines)
    return sl, num, span


def _asap_comment(lines: list[str]) -> tuple[str | None, int | None, Span | None, tuple[str, Span] | None]:
    """The comment's slice, its slice count, the slice name's span, and what is wrong with a `slices=` that is
    not a whole number from 1 to MAX_SLICES in ASCII digits (with its span)."""
    for i, line in enumerate(lines):
        m = SLICE_COMMENT.match(line)
        if not m:
            continue
        found = {f[1].lower(): f for f in _FIELD.finditer(line, m.start("body"))}
        if "slice" not in found:
            continue
        sl = found["slice"]
        span = Span(i, sl.start(2), i, sl.end(2))
        count = found.get("slices")
        if count is None:
            return sl[2], None, span, None
        text = count[2]
        if text.isascii() and text.isdecimal() and len(text) <= 7 and 1 <= int(text) <= MAX_SLICES:
            return sl[2], int(text), span, None
        problem = (
            f"asap slice comment: slices must be a whole number from 1 to {MAX_SLICES} in digits 0-9, got {text!r}"
        )
        return sl[2], None, span, (problem, Span(i, count.start(2), i, count.end(2)))
    return None, None, None, None


def load(
    path: Path | None,
    text: str | None = None,
    reader: Reader = _read_file,
    maxtext_path: Path | str | None = None,
    flags: FlagSource | None = None,
    command_keys: frozenset[str] = frozenset(),
    maxtext_run: bool = False,
) -> Config:
    """Load a config (the document's text may come from an editor buffer). `maxtext_path`: a MaxText checkout
    whose models/ folder to read model files from (default: models.default_maxtext_path()). `flags`: the run's
    XLA flags from the command line or the editor setting, weighed against the document's comment by
    server/config/run_flags.py's PRECEDENCE. `command_keys`: the document's keys that are a launch command's
    `key=value` overrides (server/launch/project.py writes a command as a document): resolved as MaxText's command
    line, over the model file, with origin "command". `maxtext_run`: the document is a MaxText run whatever keys it
    has (a launch command's)."""
    if text is None:
        if path is None:
            raise ValueError("load() needs a path or a text")
        try:
            text = reader(path)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            bad = _unreadable(e, path)
            if bad is None:
                raise  # a missing file: the caller says so, as for any file it cannot open
            return _unreadable_config(path, bad)
    try:
        doc = parse(text, path)
    except YamlSyntaxError as e:
        cfg = Config(path, None, is_maxtext=_looks_like_maxtext(text))
        cfg.findings.append(Finding(e.code, Severity.ERROR, e.message, e.key, path, e.span))
        return cfg
    cfg = Config(path, doc)
    if doc.lines and doc.lines[0] == RUN_DOCUMENT_MARKER:  # a launch command's run, written as a document
        maxtext_run = True
        command_keys = frozenset(k for k in doc.entries if k != "base_config")
    cfg.is_maxtext = doc.is_mapping and (maxtext_run or any(is_maxtext_key(k) for k in doc.all_entries()))
    if not cfg.is_maxtext:
        return cfg
    cfg.maxtext_path = Path(maxtext_path).expanduser() if maxtext_path else models.default_maxtext_path()
    parents = _load_parents(doc, path, reader, cfg)
    cfg.reader = reader

    from server.config.defaults import base_defaults

    values: dict[str, Value] = {k: Value(k, v, "default") for k, v in base_defaults().items()}
    for src, found in [*reversed(parents), (doc, None)]:
        origin = "document" if src is doc else "parent"
        for key, ent in src.all_entries().items():
            value = Value(key, _as_loaded(src, ent) if key in INT_KEYS else ent.value, origin, ent)
            if found is not None and found.path is None:  # one of MaxText's configs read from ASAP's catalog
                value = Value(key, value.value, origin, None, found.at(ent.key_span.line + 1))
            if src is doc and key in command_keys:
                cfg.command_values[key] = Value(key, value.value, "command", ent)
            else:
                values[key] = value
    cfg.chain_values = values
    _resolve(cfg, {})
    cfg.declared_slice, cfg.declared_num_slices, cfg.declared_slice_span, problem = _asap_comment(doc.lines)
    if problem is not None:
        cfg.findings.append(Finding(DiagCode.UNKNOWN_SLICE, Severity.ERROR, problem[0], None, path, problem[1]))
    cfg.flags_comment = read_comment(doc.lines)
    if cfg.flags_comment is not None and doc.lines[0] == RUN_DOCUMENT_MARKER:
        cfg.flags_comment = replace(cfg.flags_comment, kind="launch", label="LIBTPU_INIT_ARGS of the launch command")
    cfg.run_flags = resolve_flags(flags, cfg.flags_comment)
    cfg.findings += comment_findings(cfg.flags_comment, path)
    return cfg


def written(src: YamlSource, ent: Entry) -> str | None:
    """The scalar token `ent`'s value is written as (quotes, tag and anchor included), None when it is not on a
    line of its own (brought in by a merge key, or over several lines)."""
    sp = ent.value_span
    if ent.merged or sp.line != sp.end_line or not 0 <= sp.line < len(src.lines):
        return None
    return src.lines[sp.line][sp.column : sp.end_column].strip()


def _as_loaded(src: YamlSource, ent: Entry) -> Any:
    """A whole-number key's value as MaxText's YAML loader (YAML 1.1) reads the token it is written as: `010` is 8,
    `yes` true, `2:00` 120, `0o2` text (ruamel's YAML 1.2 reads 10, 'yes', '2:00' and 2)."""
    token = written(src, ent)
    return ent.value if token is None else reread(token, ent.value)


def _unreadable_config(path: Path, e: SourceReadError) -> Config:
    """The config of a document that cannot be read (not UTF-8, too large): one ASAP001 where it fails."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536).decode("utf-8", errors="replace")
    except OSError:
        head = ""
    cfg = Config(path, None, is_maxtext=_looks_like_maxtext(head))
    msg = f"Invalid YAML: cannot read: {e.strerror}"
    cfg.findings.append(Finding(DiagCode.INVALID_YAML, Severity.ERROR, msg, None, path, Span.point(e.line, e.column)))
    return cfg


def with_overrides(cfg: Config, overrides: dict[str, Any], maxtext_path: Path | str | None = None) -> Config:
    """A copy of `cfg` with some keys set as on MaxText's command line (`key=value`): they win over the config
    files and the model file. MaxText accepts an override of a key the model file sets to another value only
    with `override_model_config=true` (pyconfig.py:481-486@e591f30cb); ASAP prices it as that run and warns."""
    import copy

    new = copy.copy(cfg)
    new.values = dict(cfg.values)
    if maxtext_path:
        new.maxtext_path = Path(maxtext_path).expanduser()
    if not cfg.chain_values:  # not a resolved MaxText config: keep the old behaviour of plain overrides
        new.findings = list(cfg.findings)
        for k, v in overrides.items():
            new.values[k] = Value(k, v, "override")
        return new
    new.findings = [f for f in cfg.findings if not any(f is m for m in cfg.model_findings)]
    same_name = overrides.get("model_name", cfg.get("model_name")) == cfg.get("model_name")
    lookup = None
    if same_name and not maxtext_path:  # the same file: no second look on disk
        lookup = (cfg.model_file, [f for f in cfg.model_findings if f.code == DiagCode.INVALID_YAML])
    _resolve(new, {k: Value(k, v, "override") for k, v in overrides.items()}, lookup)
    return new


def _truthy(v: Any) -> bool:
    """A flag as MaxText tests it (`if temp_cfg.get(...)`), for a YAML or command-line value."""
    if isinstance(v, Value):
        v = v.value
    return bool(v) and str(v).lower() not in ("false", "0", "none")


def _fmt(v: Any) -> str:
    return "''" if v == "" else str(v)


def _model_where(mf: ModelFile) -> str:
    if mf.origin == models.ORIGIN_CATALOG:
        return f"MaxText's {mf.file} (at {(mf.commit or '')[:9]}, ASAP's catalog)"
    return str(mf.file)


def _merge_rules(base: Any, new: Any, replace: bool) -> Any:
    """pyconfig's _apply_rules / _merge_logical_axis_rules (pyconfig.py:166-185@e591f30cb): the new list's rules
    replace every base rule of the same logical name, unless `override_logical_axis_rules` replaces all."""
    if replace or not isinstance(base, list):
        return new
    if not isinstance(new, list) or not new:
        return base
    names = {r[0] for r in new if _rule_name(r) is not None}
    return [r for r in base if _rule_name(r) not in names] + list(new)


def _rule_name(rule: Any) -> str | None:
    """A logical axis rule's name (`[name, mesh axes]`); None for anything else (the mesh rules report it)."""
    return rule[0] if isinstance(rule, list) and rule and isinstance(rule[0], str) else None


def _chain_anchor(cfg: Config, v: Value) -> tuple[Path | None, Span, list[Related]]:
    """Where a finding about a value written in the chain goes: its line in the document, else the
    document's base_config line with the parent's line as related information."""
    if v.origin in WRITTEN_HERE and v.entry is not None:
        return v.entry.file, v.entry.key_span, []
    base = cfg.document.all_entries().get("base_config") if cfg.document is not None else None
    span = base.key_span if base is not None else Span.point(0)
    related = [Related(v.entry.file, v.entry.key_span, f"{v.key} is set here")] if v.entry is not None else []
    return cfg.path, span, related


def _lookup(cfg: Config, name_v: Value | None) -> tuple[ModelFile | None, list[Finding]]:
    """The model file model_name loads (None for "default" or none found), or the error reading it."""
    if name_v is None or name_v.value == "default":
        return None, []
    try:
        return models.find_model(_name_str(name_v.value), cfg.path, cfg.chain, cfg.maxtext_path, cfg.reader), []
    except ModelFileError as e:
        path, span = _name_anchor(cfg, name_v)
        msg = f"model file for model_name '{name_v.value}' is not valid YAML ({e}); MaxText cannot load it"
        return None, [Finding(DiagCode.INVALID_YAML, Severity.ERROR, msg, "model_name", path, span)]


def _resolve(
    cfg: Config,
    overrides: dict[str, Value],
    lookup: tuple[ModelFile | None, list[Finding]] | None = None,
) -> None:
    """cfg.values, model_file, model and the model's findings from cfg.chain_values, the model file and the
    overrides (`lookup`: the model file already found for the same name, and the error reading it)."""
    chain = cfg.chain_values
    overrides = {**cfg.command_values, **overrides}
    temp = {**chain, **overrides}  # what MaxText reads model_name and override_model_config from (pyconfig.py:453)
    name_v = temp.get("model_name")
    name = name_v.value if name_v is not None else "default"
    mf, errors = lookup if lookup is not None else _lookup(cfg, name_v)
    findings = list(errors)
    if mf is None and not errors and name_v is not None and name != "default":
        findings.append(_unknown_model(cfg, name_v, temp))
    omc = _truthy(temp.get("override_model_config"))
    values = dict(chain)
    if mf is not None:
        for key, mv in mf.keys.items():
            if key in overrides and omc:
                continue  # only keys not on the command line are applied (pyconfig.py:481-482)
            cv = chain.get(key)
            if cv is not None and key != "logical_axis_rules":
                f = _replaced(cfg, mf, cv, mv, omc)
                if f is not None:
                    findings.append(f)
            if key == "logical_axis_rules" and cv is not None:
                mv = _merge_rules(cv.value, mv, _truthy(mf.keys.get("override_logical_axis_rules")))
            values[key] = Value(key, mv, "model", mf.entries.get(key))
        for key, ov in overrides.items():
            if key in mf.keys and not omc and ov.value != mf.keys[key] and key != "logical_axis_rules":
                findings.append(_refused_override(cfg, mf, ov))
    for key, ov in overrides.items():
        if key == "logical_axis_rules" and key in values:
            ov = Value(
                key,
                _merge_rules(values[key].value, ov.value, _truthy(temp.get("override_logical_axis_rules"))),
                ov.origin,
            )
        values[key] = ov
    cfg.values = values
    cfg.model_file = mf
    cfg.model_findings = findings
    cfg.findings.extend(findings)
    cfg.model = models.dims_from_values(_name_str(name), cfg.get, _dims_source(cfg, mf, name))


def _name_str(name: Any) -> str:
    return name if isinstance(name, str) else str(name)


def _name_anchor(cfg: Config, name_v: Value) -> tuple[Path | None, Span]:
    if name_v.origin in WRITTEN_HERE and name_v.entry is not None:
        return name_v.file, name_v.entry.value_span
    if name_v.origin == "parent":
        base = cfg.document.all_entries().get("base_config") if cfg.document is not None else None
        return cfg.path, base.key_span if base is not None else Span.point(0)
    return cfg.path, Span.point(0)


def _dims_source(cfg: Config, mf: ModelFile | None, name: Any) -> str:
    cat = models.catalog()
    if mf is not None:
        return mf.source
    set_here = [k for k in DIM_KEYS if (v := cfg.values.get(k)) is not None and v.origin != "default"]
    if name == "default" and not set_here:
        return f"MaxText {cat.base_file}@{cat.short_commit} (model_name: default)"
    if len(set_here) == len(DIM_KEYS):
        return f"base_* keys of the config (model_name '{name}' has no model file)"
    return f"MaxText {cat.base_file}@{cat.short_commit} defaults and the config's base_* keys"


def _unknown_model(cfg: Config, name_v: Value, values: dict[str, Value]) -> Finding:
    """ASAP004: no model file for the name. MaxText logs a warning and trains what the config and base.yml
    give (pyconfig.py:487-488@e591f30cb): information when the config sets the dimensions, else a warning."""
    name = _name_str(name_v.value)
    cat = models.catalog()
    dirs = models.search_dirs(cfg.path, cfg.chain, cfg.maxtext_path)
    checkout = [str(d) for d, o in dirs if o == models.ORIGIN_CHECKOUT]
    where = f"ASAP's catalog of MaxText {cat.short_commit} nor in models/ next to the config" + (
        f" or in the MaxText checkout ({', '.join(checkout)})" if checkout else ""
    )
    path, span = _name_anchor(cfg, name_v)
    missing = [k for k in DIM_KEYS if (v := values.get(k)) is None or v.origin in ("default", "model")]
    if not missing:
        dims = ", ".join(f"{k} {_fmt(values[k].value)}" for k in DIM_KEYS)
        return Finding(
            DiagCode.UNKNOWN_MODEL,
            Severity.INFORMATION,
            f"model_name '{name}' is not in {where}; priced from the base_* keys set here ({dims}).",
            "model_name",
            path,
            span,
        )
    family = name.split("-")[0]
    close = [m for m in models.catalog_names() if m.split("-")[0] == family]
    hint = f" Known {family} models: {', '.join(close)}." if close else ""
    defaults = ", ".join(f"{k} {_fmt(values[k].value)}" for k in missing if k in values)
    checkout_hint = "" if checkout else " or name a MaxText checkout that has it (asap.maxtextPath, --maxtext-path),"
    return Finding(
        DiagCode.UNKNOWN_MODEL,
        Severity.WARNING,
        f"model_name '{name}' is not in {where}: MaxText logs \"Model config for '{name}' not found\" and trains "
        f"base.yml's default {'dimensions' if len(missing) == len(DIM_KEYS) else 'for the dimensions not set here'}"
        f", and ASAP prices those ({defaults}).{hint} Fix the name,{checkout_hint} or set {', '.join(missing)}.",
        "model_name",
        path,
        span,
        fixes=_did_you_mean(cfg, name_v, dirs),
    )


def close_model_names(name: str, known: list[str], n: int = 3) -> list[str]:
    """The known model names closest to `name` (difflib's similarity, case ignored; at least 0.6), closest first."""
    by_lower: dict[str, str] = {}
    for k in known:
        by_lower.setdefault(k.lower(), k)
    return [by_lower[m] for m in difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=0.6)]


def _did_you_mean(cfg: Config, name_v: Value, dirs: list[tuple[Path, str]]) -> list[Fix]:
    """The quick fixes "Did you mean 'llama3-8b'?": model_name's value in the document replaced by one of the
    closest names MaxText would find (the model files of `dirs`, then the catalog). Nothing for a name set in a
    parent or by a merge key, or written as anything but a plain or quoted scalar on its line."""
    entry = name_v.entry
    if name_v.origin not in WRITTEN_HERE or entry is None or entry.merged or cfg.document is None:
        return []
    sp = entry.value_span
    if sp.line != sp.end_line or not 0 <= sp.line < len(cfg.document.lines):
        return []
    token = cfg.document.lines[sp.line][sp.column : sp.end_column]
    quote = token[0] if token[:1] in ("'", '"') and len(token) > 1 and token[-1] == token[0] else ""
    if not (quote or token == name_v.value):
        return []
    known = set(models.catalog_names())
    for d, _origin in dirs:
        try:
            known.update(f.stem for f in d.glob("*.yml") if f.is_file())
        except OSError:
            continue
    return [
        Fix(f"Did you mean '{m}'?", (TextEdit(entry.file, sp, f"{quote}{m}{quote}"),), preferred=i == 0)
        for i, m in enumerate(close_model_names(models.base_name(_name_str(name_v.value)), sorted(known)))
    ]


def _replaced(cfg: Config, mf: ModelFile, cv: Value, mv: Any, omc: bool) -> Finding | None:
    """ASAP006: a key the config chain sets that the model file sets to another value (MaxText takes the model
    file's). MaxText's own base.yml is not the user's to change and is left alone."""
    if cv.origin not in ("document", "parent") or cv.value == mv:
        return None
    if cv.file is not None and models.is_maxtext_base_yml(cv.file):
        return None
    path, span, related = _chain_anchor(cfg, cv)
    if mf.path is not None and cv.key in mf.entries:
        related.append(Related(mf.path, mf.entries[cv.key].key_span, f"the model file sets {cv.key}: {_fmt(mv)}"))
    where = (
        f" (in {cv.where})"
        if cv.where is not None
        else ""
        if cv.origin == "document" or cv.entry is None
        else f" (in {cv.entry.file.name if cv.entry.file else '?'}:{cv.entry.key_span.line + 1})"
    )
    omc_note = (
        " override_model_config: true does not change this: it lets only command-line overrides win over the "
        "model file."
        if omc
        else ""
    )
    return Finding(
        DiagCode.MODEL_FILE_OVERRIDE,
        Severity.WARNING,
        f"{cv.key}: {_fmt(cv.value)}{where} is replaced by {_fmt(mv)} from {_model_where(mf)}: MaxText merges the "
        f"model file of model_name over the config files, so the run uses {_fmt(mv)}.{omc_note} To train with "
        f"{_fmt(cv.value)}, drop model_name and set every dimension in the config, or pass {cv.key}={_fmt(cv.value)} "
        "on the command line with override_model_config=true.",
        cv.key,
        path,
        span,
        related=related,
        data={"model_value": mv, "config_value": cv.value, "model_file": mf.file},
    )


def _refused_override(cfg: Config, mf: ModelFile, ov: Value) -> Finding:
    """A command-line override of a model file's key with another value: MaxText refuses it without
    override_model_config=true (validate_no_keys_overridden_twice, pyconfig.py:128-150@e591f30cb)."""
    path, span = cfg.anchor("model_name")
    return Finding(
        DiagCode.MODEL_FILE_OVERRIDE,
        Severity.WARNING,
        f"{ov.key}={_fmt(ov.value)} on the command line overrides {_fmt(mf.keys[ov.key])} from {_model_where(mf)}: "
        "MaxText refuses that unless override_model_config=true is also passed; priced as that run.",
        ov.key,
        path,
        span,
        data={"scope": "override", "model_value": mf.keys[ov.key], "override_value": ov.value, "model_file": mf.file},
    )


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
        out[k] = _as_loaded(src, src.entries[k]) if k in INT_KEYS else src.entries[k].value  # OmegaConf.from_cli
    return out
