"""Where a config's names lead: go to definition and document links.

- `definition`: on `base_config`, the parent file (resolved as server/config/resolve.py resolves it: relative to
  the file that names it; a `base.yml` that is not there is MaxText's own, in the checkout ASAP knows of); on
  `model_name`'s value, the model file when it is a file on disk; on any other key of the document, the same key in
  the nearest `base_config` parent that sets it, else in MaxText's base.yml when ASAP knows a checkout (the one the
  chain lies in, or `asap.maxtextPath` / `$ASAP_MAXTEXT_PATH`).
- `document_links`: the `base_config` value and the path of each `# asap: profile=...` comment, when it names a
  local file or folder that exists (a gs:// path or a missing one gets no link: ASAP201 reports a missing profile).

Plain Python: positions and spans are code points; reading a parent goes through the caller's reader (the editor's
open buffers first). `definition` reads files: callers off the event loop.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from server.common.findings import Span
from server.config import models
from server.config.resolve import Config, Reader
from server.config.source import Entry, YamlSyntaxError, parse, split_lines
from server.profiles.profile_link import LINK_COMMENT


@dataclass(frozen=True)
class Target:
    """A place in another file (or this one): `span` in code points."""

    file: Path
    span: Span
    why: str  # what is there, for logs and tests: "parent", "model file", "base.yml"


@dataclass(frozen=True)
class Link:
    span: Span  # in the document
    target: Path
    tooltip: str


def _on(span: Span, line: int, column: int) -> bool:
    return span.line == line and span.column <= column <= max(span.end_column, span.column)


def _entry_at(cfg: Config, line: int, column: int) -> tuple[Entry, bool] | None:
    """The document's top-level entry at the position, and whether the position is on its value."""
    if cfg.document is None:
        return None
    for e in cfg.document.entries.values():
        if _on(e.key_span, line, column):
            return e, False
        if _on(e.value_span, line, column):
            return e, True
    return None


def maxtext_base_yml(files: list[Path], maxtext_path: Path | None) -> Path | None:
    """MaxText's base.yml: in the checkout one of `files` lies in, else in the checkout `maxtext_path` names."""
    for f in files:
        try:
            d = models.enclosing_models_dir(f.resolve())
        except (OSError, RuntimeError, ValueError):
            continue
        if d is not None and (d.parent / "base.yml").is_file():
            return d.parent / "base.yml"
    if maxtext_path is not None:
        d = models.checkout_models_dir(Path(maxtext_path).expanduser())
        if d is not None and (d.parent / "base.yml").is_file():
            return d.parent / "base.yml"
    return None


def parent_file(value: object, config: Path | None, maxtext_path: Path | None) -> Path | None:
    """The file a `base_config` value names, as server/config/resolve.py finds it (relative to the file that
    names it), when it exists; a `base.yml` or `configs/base.yml` not found there is MaxText's own, looked for
    in the checkout ASAP knows of. None for a value that is no local file."""
    if not isinstance(value, str) or not value.strip() or "\x00" in value or "://" in value:
        return None
    if config is None and not Path(value).is_absolute():
        return None
    try:
        p = ((config.parent if config is not None else Path("/")) / value).resolve()
        if p.is_file():
            return p
    except (OSError, ValueError, RuntimeError):
        return None
    if Path(value).name == "base.yml" and Path(value).parent in (Path("."), Path("configs")):
        return maxtext_base_yml([config] if config is not None else [], maxtext_path)
    return None


def _key_in(file: Path, key: str, reader: Reader) -> Entry | None:
    try:
        src = parse(reader(file), file)
    except (OSError, UnicodeDecodeError, ValueError, YamlSyntaxError):
        return None
    return src.all_entries().get(key) if src.is_mapping else None


def definition(cfg: Config, line: int, column: int, reader: Reader) -> Target | None:
    """Where the name at (line, column) of the config's document is defined; None where it is defined nowhere
    else (or ASAP cannot tell)."""
    at = _entry_at(cfg, line, column)
    if at is None:
        return None
    entry, on_value = at
    key = entry.key
    if key == "base_config":
        parent = cfg.chain[0] if cfg.chain else parent_file(entry.value, cfg.path, cfg.maxtext_path)
        return Target(parent, Span.point(0), "parent") if parent is not None else None
    if key == "model_name" and on_value:
        mf = cfg.model_file
        return Target(mf.path, Span.point(0), "model file") if mf is not None and mf.path is not None else None
    if on_value:
        return None
    for parent in cfg.chain:  # nearest first
        found = _key_in(parent, key, reader)
        if found is not None:
            return Target(parent, found.key_span, "parent")
    files = [f for f in (cfg.path, *cfg.chain) if f is not None]
    base = maxtext_base_yml(files, cfg.maxtext_path)
    if base is not None and base not in cfg.chain:
        found = _key_in(base, key, reader)
        if found is not None:
            return Target(base, found.key_span, "base.yml")
    return None


_BASE_CONFIG = re.compile(r"base_config[ \t]*:[ \t]*(?P<value>.*?)[ \t]*(?:[ \t]#.*)?$")


def document_links(text: str, path: Path | None, maxtext_path: Path | None) -> list[Link]:
    """The links of the document's `base_config` value and `# asap: profile=` paths that exist on disk."""
    out: list[Link] = []
    for i, line in enumerate(split_lines(text)):
        if line.startswith("base_config"):
            m = _BASE_CONFIG.match(line)
            if m is None or not m["value"]:
                continue
            raw, start, end = m["value"], m.start("value"), m.end("value")
            if raw[0] in "'\"" and len(raw) > 1 and raw[-1] == raw[0]:
                raw, start, end = raw[1:-1], start + 1, end - 1
            target = parent_file(raw, path, maxtext_path)
            if target is not None:
                out.append(Link(Span(i, start, i, end), target, f"Open the parent config {target}"))
        elif line.lstrip().startswith("#") and (m := LINK_COMMENT.match(line)) is not None:
            raw, start, end = m["path"], m.start("path"), m.end("path")
            if raw[0] in "'\"":
                raw, start, end = raw[1:-1], start + 1, end - 1
            target = _local_path(raw, path)
            if target is not None:
                out.append(Link(Span(i, start, i, end), target, f"Open the linked profile {target}"))
    return out


def _local_path(raw: str, config: Path | None) -> Path | None:
    """A profile path as server/profiles/profile_link.py reads it (`~` expanded, relative to the config's
    folder), when it is a local file or folder that exists."""
    if not raw or "://" in raw or "\x00" in raw:
        return None
    p = Path(os.path.expanduser(raw))
    if not p.is_absolute():
        if config is None:
            return None
        p = config.parent / p
    try:
        return p if p.exists() else None
    except (OSError, ValueError):
        return None
