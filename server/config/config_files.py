"""Where a config's name leads, as MaxText finds it: a `base_config` value, or the config named on a command line.

MaxText (src/maxtext/configs/pyconfig.py@e591f30cb):
- `_load_config` (188-203): a relative `base_config` is looked for next to the config that names it, then in
  MAXTEXT_CONFIGS_DIR (the configs directory of the MaxText package that runs); an absolute one is taken as given.
- `resolve_config_path` (153-163), for the config named on the command line: the path as given (relative to the
  working directory); for `src/maxtext/configs/<rest>`, then `<rest>` in MAXTEXT_CONFIGS_DIR; else `src/<path>`.

ASAP stands in for "the package that runs" with, in turn: the configs directory of the MaxText checkout the naming
file (or the working directory) lies in, the checkout named by `asap.maxtextPath` / `--maxtext-path` /
$ASAP_MAXTEXT_PATH, and ASAP's catalog of MaxText's configs (`server/config/data/maxtext_configs.json`, written by
tools/configs_from_maxtext.py: the text of every config of MaxText's configs directory but the model files).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from server.config import models
from server.config.models import ORIGIN_CATALOG, ORIGIN_CHECKOUT, ORIGIN_CONFIG

CATALOG_RESOURCE = "data/maxtext_configs.json"
BASE_YML = "base.yml"  # MaxText's defaults, at the root of its configs directory

# MaxText's configs directories (relative to a checkout's root), newest layout first.
CHECKOUT_CONFIGS_DIRS = tuple(d.rsplit("/", 1)[0] for d in models.CHECKOUT_MODELS_DIRS)
_PACKAGES = ("maxtext", "MaxText")


@dataclass(frozen=True)
class ConfigsCatalog:
    """The text of MaxText's configs at one commit, by path relative to its configs directory."""

    repository: str
    commit: str
    configs_dir: str  # the repository path of the configs directory (src/maxtext/configs)
    configs: Mapping[str, str]

    @property
    def short_commit(self) -> str:
        return self.commit[:9]

    def file(self, key: str) -> str:
        """The repository path of a config of the catalog."""
        return f"{self.configs_dir}/{key}"


def configs_catalog_from_json(data: Mapping[str, Any]) -> ConfigsCatalog:
    return ConfigsCatalog(
        repository=str(data["repository"]),
        commit=str(data["commit"]),
        configs_dir=str(data["configs_dir"]),
        configs={str(k): str(v) for k, v in data["configs"].items()},
    )


@lru_cache(maxsize=1)
def configs_catalog() -> ConfigsCatalog:
    """The committed catalog of MaxText's configs (read once, on the first lookup that needs it)."""
    text = (resources.files("server.config") / CATALOG_RESOURCE).read_text(encoding="utf-8")
    return configs_catalog_from_json(json.loads(text))


@dataclass(frozen=True)
class ConfigFile:
    """A config a name leads to: a file on disk, or one of MaxText's configs in ASAP's catalog (with its text)."""

    name: str  # the name as written
    origin: str  # ORIGIN_CONFIG (as written: next to the naming file, or from the working directory),
    # ORIGIN_CHECKOUT (a MaxText checkout's configs directory) or ORIGIN_CATALOG
    path: Path | None  # the file on disk, resolved; None for a catalog entry
    key: str | None = None  # its path relative to MaxText's configs directory, when it lies in one (posix)
    commit: str | None = None  # a catalog entry's MaxText commit
    text: str | None = field(default=None, repr=False)  # a catalog entry's text

    @property
    def file(self) -> str:
        """The file on disk, or the catalog entry's repository path (src/maxtext/configs/<key>)."""
        if self.path is not None:
            return str(self.path)
        return configs_catalog().file(self.key or self.name)

    @property
    def where(self) -> str:
        """Where it is, for messages: the path on disk, or "MaxText's src/maxtext/configs/x.yml (at e591f30cb,
        ASAP's catalog)" (as a model file from the catalog is named)."""
        return self.at(None)

    def at(self, line: int | None) -> str:
        """`where` with a 1-based line: "x.yml:12" on disk, "MaxText's src/.../x.yml:12 (at ..., ASAP's catalog)"."""
        suffix = f":{line}" if line is not None else ""
        if self.origin == ORIGIN_CATALOG:
            return f"MaxText's {self.file}{suffix} (at {(self.commit or '')[:9]}, ASAP's catalog)"
        return f"{self.path}{suffix}" if line is None else f"{self.path.name if self.path else self.name}{suffix}"

    @property
    def is_maxtext_base(self) -> bool:
        """MaxText's own base.yml: the root of a configs directory in a checkout or the catalog."""
        return self.key == BASE_YML and self.origin in (ORIGIN_CHECKOUT, ORIGIN_CATALOG)

    def read(self, reader: Callable[[Path], str] | None = None) -> str:
        """Its text: the catalog's, or the file's through `reader` (a Path -> str; default: UTF-8 from disk)."""
        if self.text is not None:
            return self.text
        if self.path is None:
            raise ValueError(f"{self.name}: a catalog entry without its text")
        return reader(self.path) if reader is not None else self.path.read_text(encoding="utf-8")


def catalog_place(key: str) -> str:
    """How a look into the catalog is listed among the places looked in."""
    cat = configs_catalog()
    return f"ASAP's catalog of MaxText's configs at {cat.short_commit} ({cat.file(key)})"


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except (OSError, ValueError):  # ENAMETOOLONG and friends: a name no file system holds
        return False


def _is_dir(p: Path) -> bool:
    try:
        return p.is_dir()
    except (OSError, ValueError):
        return False


def is_configs_dir(d: Path) -> bool:
    """MaxText's configs directory: `configs` in a `maxtext` or `MaxText` package, holding base.yml or models/."""
    return d.name == "configs" and d.parent.name in _PACKAGES and (_is_file(d / BASE_YML) or _is_dir(d / "models"))


def enclosing_configs_dir(path: Path) -> Path | None:
    """The configs directory `path` (a file or a directory) lies in, when it lies in one of a MaxText tree."""
    for anc in (path, *path.parents):
        if is_configs_dir(anc):
            return anc
    return None


def checkout_configs_dir(path: Path | str) -> Path | None:
    """The configs directory of a MaxText checkout root (any layout), of a package dir, or a configs dir itself."""
    root = Path(path).expanduser()
    for rel in (*CHECKOUT_CONFIGS_DIRS, "maxtext/configs", "configs", "."):
        d = (root / rel) if rel != "." else root
        if _is_file(d / BASE_YML) or _is_dir(d / "models"):
            return d
    return None


def _enclosing_checkout_configs(path: Path) -> Path | None:
    """For a command line: the configs directory of the checkout whose root `path` is or lies under."""
    for anc in (path, *path.parents):
        for rel in CHECKOUT_CONFIGS_DIRS:
            if is_configs_dir(anc / rel):
                return anc / rel
    return None


def _resolved(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError, ValueError):
        return p


def _catalog_key(rel: str) -> str | None:
    """A relative posix path as a key of the catalog, normalised; None when it leaves the configs directory."""
    if not rel or PurePosixPath(rel).is_absolute() or "\\" in rel:
        return None
    key = posixpath.normpath(rel)
    return None if key == "." or key == ".." or key.startswith("../") else key


def configs_relative(name: str) -> str | None:
    """What follows MaxText's configs directory in a path that names it (`src/maxtext/configs/<rest>`, the older
    `src/MaxText/configs/<rest>` and `MaxText/configs/<rest>`, an installed `.../maxtext/configs/<rest>`, an
    absolute path of another machine such as `/deps/src/maxtext/configs/<rest>`): `<rest>`; None otherwise."""
    parts = PurePosixPath(name).parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "configs" and parts[i - 1] in _PACKAGES:
            return "/".join(parts[i + 1 :])
    return None


class _Search:
    """The places looked in, in order, and the first config found."""

    def __init__(self, name: str):
        self.name = name
        self.looked: list[str] = []
        self.found: ConfigFile | None = None

    def disk(self, p: Path, origin: str) -> bool:
        if self.found is not None:
            return True
        place = str(p)
        if place in self.looked:
            return False
        self.looked.append(place)
        if not _is_file(p):
            return False
        path = _resolved(p)
        d = enclosing_configs_dir(path.parent)
        key = path.relative_to(d).as_posix() if d is not None and path.is_relative_to(d) else None
        self.found = ConfigFile(self.name, origin, path, key)
        return True

    def catalog(self, key: str | None) -> bool:
        if self.found is not None:
            return True
        if key is None:
            return False
        place = catalog_place(key)
        if place in self.looked:
            return False
        self.looked.append(place)
        cat = configs_catalog()
        text = cat.configs.get(key)
        if text is None:
            return False
        self.found = ConfigFile(self.name, ORIGIN_CATALOG, None, key, cat.commit, text)
        return True


def find_config(
    name: str,
    relative_to: Path | ConfigFile | None = None,
    maxtext_path: Path | str | None = None,
    *,
    command_line: bool = False,
) -> tuple[ConfigFile | None, list[str]]:
    """The config `name` leads to as MaxText finds it, and every place looked in, in order (a path on disk, or
    "ASAP's catalog of MaxText's configs at <commit> (src/maxtext/configs/<key>)"); (None, places) when none has it.

    `relative_to`: the directory a relative name is read against: for a `base_config`, the directory of the config
    that names it (a ConfigFile: the config itself, which may be a catalog entry); for a command line, the working
    directory. None: the process's working directory. `maxtext_path`: the user's MaxText checkout (root, package or
    configs directory); None: models.default_maxtext_path() (asap.maxtextPath, --maxtext-path, $ASAP_MAXTEXT_PATH).

    `base_config` (command_line=False), as `_load_config`: an absolute name as given; a relative one
    1. next to the naming config (`relative_to / name`; origin ORIGIN_CONFIG),
    2. in MaxText's configs directory, which ASAP looks for in turn in the MaxText checkout `relative_to` lies in
       (a directory under `<checkout>/src/maxtext/configs/`, or an older layout's), in the `maxtext_path`
       checkout (origin ORIGIN_CHECKOUT), then in ASAP's catalog (origin ORIGIN_CATALOG).
    A name found in the catalog is parsed from its text (ConfigFile.text); a base_config of a catalog entry is
    looked for in the catalog only (next to the entry, then at the catalog's root), as MaxText would in one package.

    Command line (command_line=True), as `resolve_config_path` then `_load_config`:
    1. the path as given (absolute, or `relative_to / name`; ORIGIN_CONFIG);
    2. for `src/maxtext/configs/<rest>`: `<rest>` in the configs directories of step 2 above (ORIGIN_CHECKOUT);
       the checkout searched is the one `relative_to` is the root of or lies in;
    3. `relative_to / "src" / name` for a relative name (MaxText's rewrite of `MaxText/configs/base.yml` to the
       2025 layout's `src/MaxText/configs/base.yml`; ORIGIN_CONFIG);
    4. for any other path through a configs directory (`MaxText/configs/<rest>`, `src/MaxText/configs/<rest>`,
       `/deps/src/maxtext/configs/<rest>`: a checkout or container of another layout or machine), `<rest>` in
       those configs directories (ORIGIN_CHECKOUT);
    5. `<rest>` in ASAP's catalog (ORIGIN_CATALOG).
    So `MaxText/configs/base.yml`, `src/maxtext/configs/base.yml` and `maxtext/configs/base.yml` all lead to
    MaxText's base.yml (ConfigFile.is_maxtext_base) when no file on disk is named so.

    Raises ValueError for a name no file system can look up (empty, or holding a NUL character)."""
    if not name.strip():
        raise ValueError("it is empty")
    if "\x00" in name:
        raise ValueError("it contains a NUL character")
    if maxtext_path is None:
        maxtext_path = models.default_maxtext_path()
    search = _Search(name)
    if isinstance(relative_to, ConfigFile) and relative_to.origin == ORIGIN_CATALOG:
        _in_catalog(search, name, relative_to.key or "")
        return search.found, search.looked
    base = relative_to.path.parent if isinstance(relative_to, ConfigFile) and relative_to.path else relative_to
    if not isinstance(base, Path):
        base = Path.cwd()
    given = Path(name)  # as MaxText reads it: no `~` expansion
    absolute = given.is_absolute()
    search.disk(given if absolute else base / given, ORIGIN_CONFIG)
    if not command_line:
        if absolute or search.found is not None:  # MaxText takes an absolute base_config as given
            return search.found, search.looked
        for d in _configs_dirs(base, maxtext_path, command_line=False):
            search.disk(d / given, ORIGIN_CHECKOUT)
        search.catalog(_catalog_key(name))
        return search.found, search.looked
    if search.found is not None:
        return search.found, search.looked
    rest = configs_relative(name)
    dirs = _configs_dirs(base, maxtext_path, command_line=True)
    if rest is not None and not absolute and name.startswith("src/maxtext/configs/"):
        for d in dirs:
            search.disk(d / rest, ORIGIN_CHECKOUT)
    if not absolute:
        search.disk(base / "src" / given, ORIGIN_CONFIG)
    if rest is not None:
        for d in dirs:
            search.disk(d / rest, ORIGIN_CHECKOUT)
        search.catalog(_catalog_key(rest))
    return search.found, search.looked


def _in_catalog(search: _Search, name: str, naming_key: str) -> None:
    """A base_config named by a catalog entry: next to it in the catalog, then at the catalog's root."""
    if PurePosixPath(name).is_absolute():
        search.looked.append(name)  # an absolute path in one of MaxText's configs: not on this machine's disk
        return
    search.catalog(_catalog_key(posixpath.join(posixpath.dirname(naming_key), name)))
    search.catalog(_catalog_key(name))


def _configs_dirs(base: Path, maxtext_path: Path | str | None, command_line: bool) -> list[Path]:
    """MaxText's configs directories ASAP looks in for the package that runs, in order, without repeats."""
    found = [enclosing_configs_dir(base)]
    if command_line:
        found.append(_enclosing_checkout_configs(base))
    if maxtext_path is not None and str(maxtext_path).strip():
        found.append(checkout_configs_dir(maxtext_path))
    out: list[Path] = []
    seen: set[Path] = set()
    for d in found:
        if d is not None and (r := _resolved(d)) not in seen:
            seen.add(r)
            out.append(d)
    return out
