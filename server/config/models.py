"""MaxText's model files (`configs/models/<name>.yml`) and how `model_name` finds one.

The committed catalog `server/config/data/maxtext_models.json` is written by `tools/models_from_maxtext.py`
from a MaxText checkout at a named commit: every key of every model file, values as YAML loads them, plus
`base.yml`'s value of every key a model file sets and of every key MaxText's training-FLOPs function and
decoder blocks read for the model's structure. Nothing here is typed by hand.

Where MaxText looks for a model file (src/maxtext/configs/pyconfig.py:457-488@e591f30cb): "-Instruct" is
removed from the name, then `<dir of the config>/models/<name>.yml`, then `<dir of that dir>/models/<name>.yml`,
then the `models/` folder of the MaxText package that runs. A missing file only logs
"Model config for '<name>' not found" and the run trains base.yml's dimensions. ASAP follows the same order and
stands in for "the package that runs" with, in turn: the MaxText checkout the `base_config` chain resolves into,
the checkout named by `asap.maxtextPath` / `--maxtext-path` / `$ASAP_MAXTEXT_PATH`, and the committed catalog.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from server.config.source import Entry, YamlSyntaxError, parse, plain

CATALOG_RESOURCE = "data/maxtext_models.json"
MAXTEXT_PATH_ENV = "ASAP_MAXTEXT_PATH"

# Where a model file was found (ModelFile.origin).
ORIGIN_CATALOG = "catalog"  # the committed catalog (MaxText at the catalog's commit)
ORIGIN_CHECKOUT = "checkout"  # a MaxText checkout: the one the base_config chain is in, or maxtext_path
ORIGIN_CONFIG = "config"  # models/ next to the config, or next to its directory

# The configs directories of MaxText's layouts, newest first (relative to a checkout's root), and the
# package layouts a path may name directly (a package dir `.../maxtext`, its configs dir, its models dir).
CHECKOUT_MODELS_DIRS = ("src/maxtext/configs/models", "src/MaxText/configs/models", "MaxText/configs/models")
_PACKAGE_MODELS_DIRS = ("maxtext/configs/models", "configs/models", "models")


class ModelFileError(Exception):
    """A model file on disk that cannot be read as a YAML mapping."""

    def __init__(self, path: Path, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True)
class ModelFile:
    """One model file: its keys as YAML loads them and where it was found."""

    name: str
    file: str  # the catalog's repository path (src/maxtext/configs/models/<name>.yml), or the file on disk
    commit: str | None  # the MaxText commit of a catalog entry; None for a file read from disk
    keys: Mapping[str, Any]
    origin: str  # ORIGIN_CATALOG, ORIGIN_CHECKOUT or ORIGIN_CONFIG
    entries: Mapping[str, Entry] = field(default_factory=dict, compare=False, repr=False)  # spans, from disk

    @property
    def path(self) -> Path | None:
        """The file on disk (None for a catalog entry)."""
        return None if self.origin == ORIGIN_CATALOG else Path(self.file)

    @property
    def source(self) -> str:
        """Where the keys come from, for messages and hovers."""
        if self.origin == ORIGIN_CATALOG:
            return f"MaxText {self.file}@{(self.commit or '')[:9]}"
        return self.file


@dataclass(frozen=True)
class Catalog:
    repository: str
    commit: str
    commit_date: str
    models_dir: str
    base_file: str
    base: Mapping[str, Any]
    models: Mapping[str, ModelFile]

    @property
    def short_commit(self) -> str:
        return self.commit[:9]


def parse_model_text(text: str, path: Path | None = None) -> tuple[dict[str, Any], dict[str, Entry]]:
    """The top-level keys of a model file (values as YAML loads them) and their entries. Raises
    ModelFileError. The one reader for the catalog script and for files found on disk, so both agree."""
    try:
        src = parse(text, path)
    except YamlSyntaxError as e:
        raise ModelFileError(path or Path("<text>"), f"line {e.span.line + 1}: {e.message}") from None
    if not src.is_mapping:
        raise ModelFileError(path or Path("<text>"), "not a YAML mapping of keys")
    entries = src.all_entries()
    return {k: plain(e.value) for k, e in entries.items()}, dict(entries)


def base_name(name: str) -> str:
    """The name MaxText looks up: "-Instruct" removed (pyconfig.py:458-460@e591f30cb)."""
    return name.replace("-Instruct", "") if "-Instruct" in name else name


# -- the committed catalog ------------------------------------------------------------------------------------
def catalog_from_json(data: Mapping[str, Any]) -> Catalog:
    commit = str(data["commit"])
    models = {
        name: ModelFile(name, str(m["file"]), commit, dict(m["keys"]), ORIGIN_CATALOG)
        for name, m in sorted(data["models"].items())
    }
    return Catalog(
        repository=str(data["repository"]),
        commit=commit,
        commit_date=str(data.get("commit_date", "")),
        models_dir=str(data["models_dir"]),
        base_file=str(data["base"]["file"]),
        base=dict(data["base"]["keys"]),
        models=models,
    )


@lru_cache(maxsize=1)
def catalog() -> Catalog:
    """The committed catalog (read once)."""
    text = (resources.files("server.config") / CATALOG_RESOURCE).read_text(encoding="utf-8")
    return catalog_from_json(json.loads(text))


def catalog_names() -> list[str]:
    return sorted(catalog().models)


def base_keys() -> dict[str, Any]:
    """base.yml's values at the catalog's commit for the keys model files set and the structural keys."""
    return dict(catalog().base)


def __getattr__(name: str) -> Any:
    """`MODELS`: the committed catalog's model files by name (read on first use, so that the catalog script
    can import this module before any catalog exists)."""
    if name == "MODELS":
        return catalog().models
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- the MaxText checkout the user has ----------------------------------------------------------------------
_default_path: str | None = None  # set_default_maxtext_path's value
_ENV_AT_START = os.environ.get(MAXTEXT_PATH_ENV)


def set_default_maxtext_path(path: str | os.PathLike[str] | None) -> None:
    """The checkout to use when a caller names none (CLI `--maxtext-path`, the editor's `asap.maxtextPath`).
    Also exported as $ASAP_MAXTEXT_PATH so processes started later (the agents' worker) use it too; None
    restores the environment's own value."""
    global _default_path
    value = str(Path(path).expanduser()) if path else None
    _default_path = value
    target = value if value is not None else _ENV_AT_START
    if target is None:
        os.environ.pop(MAXTEXT_PATH_ENV, None)
    else:
        os.environ[MAXTEXT_PATH_ENV] = target


def default_maxtext_path() -> Path | None:
    if _default_path:
        return Path(_default_path)
    env = os.environ.get(MAXTEXT_PATH_ENV, "").strip()
    return Path(env).expanduser() if env else None


class MaxTextPathAction(argparse.Action):
    """`--maxtext-path PATH` on the command line: the process's default checkout (set_default_maxtext_path)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        set_default_maxtext_path(values or None)


MAXTEXT_PATH_HELP = (
    "a MaxText checkout: model_name is looked up in its models/ before ASAP's catalog of MaxText's model files "
    f"(default: ${MAXTEXT_PATH_ENV})"
)


def checkout_models_dir(path: Path) -> Path | None:
    """The models/ folder of a MaxText checkout root (any layout), of a package dir, or of a configs dir."""
    for rel in (*CHECKOUT_MODELS_DIRS, *_PACKAGE_MODELS_DIRS):
        d = path / rel
        if d.is_dir():
            return d
    return None


def enclosing_models_dir(file: Path) -> Path | None:
    """When `file` lies inside MaxText's configs directory (`.../src/maxtext/configs/`, the older
    `.../src/MaxText/configs/` or `MaxText/configs/`, or an installed `maxtext/configs/`): its models/ folder."""
    for anc in file.parents:
        if anc.name == "configs" and anc.parent.name in ("maxtext", "MaxText") and (anc / "models").is_dir():
            return anc / "models"
    return None


def is_maxtext_base_yml(file: Path) -> bool:
    """MaxText's own base.yml (in a checkout's configs directory)."""
    return file.name == "base.yml" and enclosing_models_dir(file) == file.parent / "models"


def search_dirs(
    config_path: Path | None, chain: Iterable[Path] = (), maxtext_path: Path | str | None = None
) -> list[tuple[Path, str]]:
    """The models/ folders to look in, in order, each with the origin a file found there has."""
    out: list[tuple[Path, str]] = []
    if config_path is not None:
        out.append((config_path.parent / "models", ORIGIN_CONFIG))
        out.append((config_path.parent.parent / "models", ORIGIN_CONFIG))
    for f in [*([config_path] if config_path is not None else []), *chain]:
        d = enclosing_models_dir(f.resolve())
        if d is not None:
            out.append((d, ORIGIN_CHECKOUT))
    if maxtext_path is not None:
        d = checkout_models_dir(Path(maxtext_path).expanduser())
        if d is not None:
            out.append((d, ORIGIN_CHECKOUT))
    seen: set[Path] = set()
    unique = []
    for d, origin in out:
        key = d.resolve() if d.exists() else d
        if key not in seen:
            seen.add(key)
            unique.append((d, origin))
    return unique


def read_model_file(name: str, file: Path, origin: str, reader: Callable[[Path], str] | None = None) -> ModelFile:
    """A model file on disk. Raises ModelFileError."""
    try:
        text = reader(file) if reader is not None else file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ModelFileError(file, f"cannot be read: {e}") from None
    keys, entries = parse_model_text(text, file)
    return ModelFile(name, str(file), None, keys, origin, entries)


def find_model(
    name: str,
    config_path: Path | None = None,
    chain: Iterable[Path] = (),
    maxtext_path: Path | str | None = None,
    reader: Callable[[Path], str] | None = None,
) -> ModelFile | None:
    """The model file `model_name: name` loads, in MaxText's lookup order (see the module docstring), else the
    committed catalog's; None when there is none. Raises ModelFileError for a file found but unreadable."""
    if not name:
        return None
    stem = base_name(name)
    for d, origin in search_dirs(config_path, chain, maxtext_path):
        f = d / f"{stem}.yml"
        try:
            found = f.is_file()
        except OSError:  # ENAMETOOLONG and friends, which is_file() raises: a name no file system holds
            found = False
        if found:
            return read_model_file(stem, f, origin, reader)
    return catalog().models.get(stem)


# -- the dimensions view of a resolved config ---------------------------------------------------------------
@dataclass(frozen=True)
class ModelDims:
    """The model's dimensions after resolution (model file, config chain, base.yml), as MaxText's keys hold
    them before `global_parameter_scale` (types.py:3393-3401@e591f30cb applies the scale)."""

    name: str
    emb_dim: int  # base_emb_dim
    num_query_heads: int  # base_num_query_heads
    num_kv_heads: int  # base_num_kv_heads
    mlp_dim: int  # base_mlp_dim
    num_decoder_layers: int  # base_num_decoder_layers
    head_dim: int  # head_dim
    vocab_size: int
    num_experts: int = 1
    num_experts_per_tok: int = 1
    mlp_activations: tuple[str, ...] = ("silu", "linear")
    logits_via_embedding: bool = False
    decoder_block: str = ""
    base_moe_mlp_dim: int | None = None  # None when base.yml's -1 (no separate MoE expert dim)
    shared_experts: int = 0
    source: str = ""  # where the dims come from (a model file, base_* keys, base.yml)


# The MaxText key each ModelDims field comes from.
FIELD_KEYS: dict[str, str] = {
    "emb_dim": "base_emb_dim",
    "num_query_heads": "base_num_query_heads",
    "num_kv_heads": "base_num_kv_heads",
    "mlp_dim": "base_mlp_dim",
    "num_decoder_layers": "base_num_decoder_layers",
    "head_dim": "head_dim",
    "vocab_size": "vocab_size",
    "num_experts": "num_experts",
    "num_experts_per_tok": "num_experts_per_tok",
    "mlp_activations": "mlp_activations",
    "logits_via_embedding": "logits_via_embedding",
    "decoder_block": "decoder_block",
    "base_moe_mlp_dim": "base_moe_mlp_dim",
    "shared_experts": "shared_experts",
}

# The keys that give a model's size when no model file does (ASAP004).
DIM_KEYS = ("base_emb_dim", "base_num_query_heads", "base_num_kv_heads", "base_mlp_dim", "base_num_decoder_layers")


def dims_from_values(name: str, get: Callable[[str], Any], source: str) -> ModelDims:
    """The ModelDims view of resolved values (`get(key)`); wrong types are kept for the rules to report."""
    fields: dict[str, Any] = {}
    for fld, key in FIELD_KEYS.items():
        v = get(key)
        if v is None:
            continue
        if fld == "mlp_activations" and isinstance(v, list):
            v = tuple(v)
        if fld == "base_moe_mlp_dim" and isinstance(v, int) and not isinstance(v, bool) and v <= 0:
            v = None
        fields[fld] = v
    required = ("emb_dim", "num_query_heads", "num_kv_heads", "mlp_dim", "num_decoder_layers", "head_dim")
    for fld in (*required, "vocab_size"):
        fields.setdefault(fld, 0)
    return ModelDims(name=name, source=source, **fields)
