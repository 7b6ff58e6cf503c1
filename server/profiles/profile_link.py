"""Which profile belongs to a config, in order of precedence:

1. a comment line `# asap: profile=<path>` in the config (relative to the config's directory);
2. a workspace link, stored by the command "ASAP: Link profile..." in `<workspace>/.asap/links.json`
   (`{"version": 1, "links": {"<config, relative to the workspace>": "<profile path>"}}`);
3. MaxText's own output keys: `<base_output_directory>/<run_name>/tensorboard/plugins/profile/`,
   when that directory is local and inside the workspace, or in a gs:// bucket.

A gs:// link (in any of the three) names the local mirror of that URL under ASAP's cache
(server/profiles/gcs.py); resolving it makes no request: the bucket is listed when the profile is read.

Explicit links (1, 2) may point anywhere; a discovered one outside the workspace is not followed
(a hint says how to link it). A link whose path does not exist is a located warning.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from server.common.codes import DiagCode
from server.common.findings import Finding, Severity, Span
from server.config.resolve import Config
from server.profiles import gcs

LINK_COMMENT = re.compile(r"^\s*#\s*asap:.*?\bprofile\s*=\s*(?P<path>\"[^\"]+\"|'[^']+'|\S+)", re.I)
LINKS_FILE = Path(".asap") / "links.json"
log = logging.getLogger("asap")

MISSING = DiagCode.PROFILE_MISSING
OUTSIDE = DiagCode.PROFILES_OUTSIDE_WORKSPACE


@dataclass(frozen=True)
class Link:
    path: Path
    origin: str  # "comment" | "workspace" | "maxtext" | "search_path"
    file: Path | None  # where findings about the link are shown
    span: Span
    key: str | None
    url: str | None = None  # gs://...: `path` is its mirror under ASAP's cache, filled when the profile is read

    @property
    def explicit(self) -> bool:
        return self.origin not in ("maxtext",)

    def describe(self) -> str:
        return {
            "comment": "the '# asap: profile=' comment",
            "workspace": f"the workspace link in {LINKS_FILE}",
            "maxtext": "base_output_directory/run_name",
            "search_path": "run_name found under asap.profileSearchPaths",
        }[self.origin]


def _comment_link(cfg: Config) -> Link | None:
    if cfg.document is None:
        return None
    for i, line in enumerate(cfg.document.lines):
        m = LINK_COMMENT.match(line)
        if m:
            raw = m["path"].strip("\"'")
            span = Span(i, m.start("path"), i, m.end("path"))
            if gcs.is_gcs(raw):
                return _gcs_link(raw, "comment", cfg.path, span, None)
            base = cfg.path.parent if cfg.path else Path.cwd()
            p = Path(os.path.expanduser(raw))
            return Link(
                p if p.is_absolute() else base / p,
                "comment",
                cfg.path,
                span,
                None,
            )
    return None


def _gcs_link(url: str, origin: str, file: Path | None, span: Span, key: str | None) -> Link:
    try:
        local = gcs.mirror_path(url)
    except gcs.GcsError:
        local = Path(url)  # not a usable gs:// URL: reported as a link that does not exist
        url = ""
    return Link(local, origin, file, span, key, url or None)


def read_links(workspace: Path) -> dict[str, str]:
    f = workspace / LINKS_FILE
    try:
        data = json.loads(f.read_text())
    except (OSError, ValueError):
        return {}
    links = data.get("links") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in links.items()} if isinstance(links, dict) else {}


def write_link(workspace: Path, config: Path, profile: Path | str | None) -> Path:
    """Store (or with `profile` None, remove) the link of `config`; atomic replace of the file. A gs:// URL
    (a str) is stored as it is."""
    links = read_links(workspace)
    key = _rel(config, workspace)
    if profile is None:
        links.pop(key, None)
    elif isinstance(profile, str) and gcs.is_gcs(profile):
        links[key] = profile.strip()
    else:
        profile = Path(profile)
        links[key] = _rel(profile, workspace) if _inside(profile, workspace) else str(profile.resolve())
    f = workspace / LINKS_FILE
    f.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=f.parent, prefix=".links-", suffix=".json")
    with os.fdopen(fd, "w") as out:
        json.dump({"version": 1, "links": dict(sorted(links.items()))}, out, indent=2)
        out.write("\n")
    os.replace(tmp, f)
    return f


def _rel(p: Path, root: Path) -> str:
    try:
        return p.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(p.resolve())


def _inside(p: Path, root: Path) -> bool:
    try:
        p.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def _workspace_link(cfg: Config, workspace: Path | None) -> Link | None:
    if workspace is None or cfg.path is None:
        return None
    target = read_links(workspace).get(_rel(cfg.path, workspace))
    if not target:
        return None
    if gcs.is_gcs(target):
        return _gcs_link(target, "workspace", cfg.path, Span.point(0), None)
    p = Path(os.path.expanduser(target))
    return Link(p if p.is_absolute() else workspace / p, "workspace", cfg.path, Span.point(0), None)


def _search_path_link(cfg: Config, search_paths: list[Path]) -> Link | None:
    """`<search path>/<run_name>/tensorboard/plugins/profile` in a directory the user listed in
    `asap.profileSearchPaths` (e.g. a local copy of a gs:// base_output_directory). Listed by the user, so
    it may be outside the workspace."""
    run = cfg.get("run_name")
    if not isinstance(run, str) or not run:
        return None
    for sp in search_paths:
        run_dir = Path(os.path.expanduser(str(sp))) / run
        if (run_dir / "tensorboard" / "plugins" / "profile").is_dir():
            file, span = cfg.anchor("run_name")
            return Link(run_dir, "search_path", file, span, "run_name")
    return None


def _maxtext_link(cfg: Config, workspace: Path | None) -> tuple[Link | None, list[Finding]]:
    base, run = cfg.get("base_output_directory"), cfg.get("run_name")
    if not isinstance(base, str) or not base or not isinstance(run, str) or not run:
        return None, []
    if gcs.is_gcs(base):  # MaxText's usual place: gs://<bucket>/<run_name>/tensorboard/plugins/profile/<ts>/
        return _maxtext_gcs_link(cfg, f"{base.strip().rstrip('/')}/{run}")
    if "://" in base:  # s3:// and others: not read
        return None, []
    root = workspace or (cfg.path.parent if cfg.path else Path.cwd())
    b = Path(os.path.expanduser(base))
    run_dir = (b if b.is_absolute() else root / b) / run
    file, span = cfg.anchor("base_output_directory")
    if workspace is not None and not _inside(run_dir, workspace):
        if (run_dir / "tensorboard" / "plugins" / "profile").is_dir():
            return None, [
                Finding(
                    OUTSIDE,
                    Severity.HINT,
                    f"profiles of this run exist in {run_dir}, outside the workspace; ASAP reads them only "
                    f"when linked explicitly: add '# asap: profile={run_dir}' or run 'ASAP: Link profile...'",
                    "base_output_directory",
                    file,
                    span,
                )
            ]
        return None, []
    prof = run_dir / "tensorboard" / "plugins" / "profile"
    if not prof.is_dir():
        return None, []
    return Link(run_dir, "maxtext", file, span, "base_output_directory"), []


def _maxtext_gcs_link(cfg: Config, url: str) -> tuple[Link | None, list[Finding]]:
    """A discovered gs:// run is followed when it holds a profile (one listing, remembered for a while), as a
    local run directory is when it exists: a run without profiles, or a machine without Google Cloud credentials
    (the examples' base_output_directory), says nothing. A bucket that is missing or refuses the user is a hint."""
    file, span = cfg.anchor("base_output_directory")
    link = _gcs_link(url, "maxtext", file, span, "base_output_directory")
    if link.url is None:
        return None, []
    try:
        gcs.find_run(link.url)
    except gcs.GcsError as e:
        log.info("profiles of %s not looked for: %s", url, e)
        if e.kind not in ("bucket", "permission"):
            return None, []
        return None, [
            Finding(
                DiagCode.PROFILE_NOT_READ,
                Severity.HINT,
                f"profiles of this run are not read: {e}",
                "base_output_directory",
                file,
                span,
            )
        ]
    return link, []


def resolve(
    cfg: Config, workspace: Path | None = None, search_paths: list[Path] | None = None
) -> tuple[Link | None, list[Finding]]:
    """The config's profile link (None when it has none) and findings about it."""
    link = _comment_link(cfg) or _workspace_link(cfg, workspace)
    if link is None:
        found, findings = _maxtext_link(cfg, workspace)
        if (found is None or found.url is not None) and search_paths:
            # a local copy the user listed wins over listing the bucket: no request, and it is what they chose
            local = _search_path_link(cfg, search_paths)
            if local is not None:
                found, findings = local, []
        return found, findings
    if link.url is None and not link.path.exists():
        return None, [
            Finding(
                MISSING,
                Severity.WARNING,
                f"linked profile {link.path} does not exist (from {link.describe()})",
                link.key,
                link.file,
                link.span,
            )
        ]
    return link, []
