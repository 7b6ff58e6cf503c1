"""Every MaxText run of a launch file analysed on its own, as a YAML config is (server/services/analysis.py), its
findings and fixes carried back to the launch file (server/launch/project.py).

How a run is resolved, as MaxText resolves it:
- its config argument is found as `pyconfig.resolve_config_path` then `_load_config` find it
  (server/config/config_files.py `find_config`, command_line=True): the path as given from the launch file's
  directory, then MaxText's configs directory (the user's checkout, asap.maxtextPath, or ASAP's catalog);
- a benchmark runner's recipe is read statically from MaxText's benchmarks (server/launch/recipes.py);
- then the model file, then the `key=value` overrides (resolve.load's command_keys);
- the slice from `compile_topology` when the command sets it, else from XPK's or the runner's device type and
  slice count, else the Kubernetes node selector and the JobSet's replicas;
- the XLA flags from LIBTPU_INIT_ARGS in the script, manifest or command, or the recipe's `xla_flags`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from server.common.codes import DiagCode
from server.common.findings import Finding, Fix, Severity, Span, TextEdit
from server.config import resolve
from server.config.mesh import check
from server.config.resolve import Reader
from server.config.run_flags import FlagSource, TokenAt, resolve_flags
from server.config.safe_edits import vet_fix
from server.config.source import YamlSource, YamlSyntaxError, parse
from server.launch.located import Located
from server.launch.project import Positions, RunDocument, launch_edits, map_finding, map_span, run_document
from server.launch.runs import Override, Run, Setting, runs_in
from server.launch.sources import file_kind
from server.services.analysis import Analysis, analysis_of


@dataclass
class RunAnalysis:
    index: int  # 1-based, in file order (`--run N`)
    run: Run
    document: RunDocument
    analysis: Analysis  # of the run's document: its config, checks and estimate
    findings: list[Finding]  # in the launch file, with the fixes that can be written there
    span: Span  # the run's command in the launch file
    positions: Positions  # the launch file's offsets as lines and columns
    language_id: str | None = None  # the editor's language of the file (None: told by its name)

    @property
    def line(self) -> int:
        return self.span.line

    def _flags_json(self) -> dict[str, Any]:
        """The run's flags as `asap estimate --json` gives them, with the lines and columns of the launch file."""
        out = self.analysis.config.run_flags.to_json()
        src = self.analysis.config.run_flags.source
        if src is None or src.kind != "launch":
            return out
        spans = [
            map_span(self.document, Span(t.line, t.column, t.line, t.end_column), self.positions) for t in src.tokens
        ]
        out["lines"] = sorted({sp.line + 1 for sp in spans})
        for p in out["problems"]:
            if "line" in p:
                sp = map_span(self.document, Span.point(p["line"] - 1, p["column"] - 1), self.positions)
                p["line"], p["column"] = sp.line + 1, sp.column + 1
        return out

    def to_json(self) -> dict[str, Any]:
        doc = self.analysis.to_json()
        run = self.run
        return {
            "index": self.index,
            "line": self.line + 1,
            "kind": run.kind,
            "module": run.module,
            "config": run.config.text if run.config is not None else None,
            "base_config": self.document.base,
            "recipe": run.recipe.value if run.recipe is not None else None,
            "slice": doc["slice"],
            "mesh": doc["mesh"],
            "model": doc["model"],
            "xla_flags": self._flags_json(),
            "overrides": {k: o.value for k, o in self.document.overrides.items()},
            "symbolic": sorted(k for k, o in self.document.overrides.items() if o.symbolic),
            "findings": [f.to_json() for f in self.findings],
            "estimate": doc["estimate"],
        }


@dataclass
class LaunchAnalysis:
    path: Path | None
    text: str
    runs: list[RunAnalysis]

    def to_json(self) -> dict[str, Any]:
        return {"file": str(self.path) if self.path else None, "runs": [r.to_json() for r in self.runs]}


def reads_back(
    doc: RunDocument,
    index: int,
    document_after: str,
    edits: list[TextEdit],
    path: Path | None,
    positions: Positions,
    language_id: str | None = None,
) -> bool:
    """The read-back of a fix written into a launch file (what safe_edits does for a YAML fix): the file with the
    edits, read again, still holds as many runs; run `index` now says what `document_after` (its document after
    the fix) says, key for key; every other run says what it said; and no line of the file but those the edits
    touch has changed (comments, other commands and variables kept)."""
    from server.config.apply import apply_text

    before = positions.text
    after = apply_text(before, edits)
    runs_before = runs_in(path, before, language_id)
    runs_after = runs_in(path, after, language_id)
    if len(runs_after) != len(runs_before) or not 1 <= index <= len(runs_after):
        return False
    pos_after = Positions(after)
    for i, (old, new) in enumerate(zip(runs_before, runs_after, strict=True), 1):
        new_doc = run_document(new, path, pos_after, doc.base)
        if i == index:
            if _entries(new_doc.text) != _entries(document_after):
                return False
        elif _entries(new_doc.text) != _entries(run_document(old, path, positions, doc.base).text):
            return False
    touched = {ln for e in edits for ln in range(e.span.line, e.span.end_line + 1)}
    old_lines, new_lines = before.splitlines(), after.splitlines()
    if len(old_lines) != len(new_lines):
        return False
    return all(a == b for n, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if n not in touched)


def _entries(text: str) -> dict[str, Any] | None:
    """A run document's keys and values as read (None when it does not parse)."""
    try:
        return {k: e.value for k, e in parse(text).entries.items()}
    except YamlSyntaxError:
        return None


def is_launch_file(path: Path | None, text: str, language_id: str | None = None) -> bool:
    """Whether ASAP reads the file as a launch file: a shell script, Makefile or Markdown file; or a YAML file that
    is not a MaxText config (no MaxText key at its top level) and holds a MaxText run (a Kubernetes manifest). A
    YAML file with neither stays what it was: not a MaxText config, silent."""
    kind = file_kind(path, text, language_id)
    if kind in ("shell", "make", "markdown"):
        return True
    if kind != "yaml":
        return False
    try:
        doc = parse(text, path)
        if doc.is_mapping and any(resolve.is_maxtext_key(k) for k in doc.all_entries()):
            return False
    except YamlSyntaxError:
        pass  # several documents (a manifest's `---`), or not YAML: the manifest reader decides
    return bool(runs_in(path, text, language_id))


def file_analysis(la: LaunchAnalysis) -> Analysis:
    """The whole launch file as the editor keeps one analysis per document: every run's findings, in the file."""
    cfg = resolve.Config(la.path, None, is_maxtext=False)
    findings = sorted((f for r in la.runs for f in r.findings), key=lambda f: (f.span.line, f.span.column, f.code))
    return Analysis(la.path, cfg, check(cfg), findings, runs=la.runs)


def run_at(runs: list[RunAnalysis], line: int, column: int) -> tuple[RunAnalysis, int, int, Span] | None:
    """The run whose token is at (line, column) of the launch file, the position in its document that token is
    written at (for the hover's explanations) and the token's span in the file; None when no token of a run is
    there."""
    for ra in runs:
        positions = ra.positions
        for n, m in enumerate(ra.document.lines):
            for a, _end, loc in m.segments:
                sp = positions.of(loc)
                if sp is None or not (sp.line <= line <= sp.end_line):
                    continue
                if (line, column) < (sp.line, sp.column) or (line, column) > (sp.end_line, sp.end_column):
                    continue
                return ra, n, a, sp
    return None


def recipe_at(runs: list[RunAnalysis], line: int, column: int) -> tuple[RunAnalysis, Span] | None:
    """The benchmark run whose `--model_name` value is at (line, column), with the value's span."""
    for ra in runs:
        if ra.run.recipe is None or ra.run.found_recipe is None:
            continue
        sp = ra.positions.of(ra.run.recipe.loc)
        if sp is not None and sp.line == line and sp.column <= column <= sp.end_column:
            return ra, sp
    return None


def recipe_md(ra: RunAnalysis) -> str:
    """What a benchmark recipe sets, and where it is written (MaxText's Python, never imported: read with ast)."""
    r = ra.run.found_recipe
    where = f"{r.file}:{r.line}" + (f" (MaxText {r.commit[:9]}, ASAP's catalog)" if r.commit else " (your checkout)")
    keys = ", ".join(f"`{k}`" for k in list(r.tuning_params)[:12])
    more = f" and {len(r.tuning_params) - 12} more" if len(r.tuning_params) > 12 else ""
    lines = [
        f"**benchmark recipe `{r.name}`**: MaxText's `model_name` {r.model_type}, defined at {where}",
        f"Sets {len(r.tuning_params)} config keys: {keys}{more}.",
        "Its `xla_flags` are the run's LIBTPU_INIT_ARGS"
        + (f" (line {r.xla_flags_line})." if r.xla_flags_line else ".")
        + " A value of the recipe is changed in that file, not here.",
    ]
    lines += [f"- caveat: {c}" for c in r.caveats]
    return "\n\n".join(lines)


def analyze_launch(
    path: Path | None,
    text: str,
    language_id: str | None = None,
    default_slice: str | None = None,
    flags: FlagSource | None = None,
    reader: Reader | None = None,
    maxtext_path: Path | str | None = None,
) -> LaunchAnalysis:
    """Every run of the launch file `path` (`text`: its content, an editor's buffer), each analysed on its own."""
    positions = Positions(text)
    if maxtext_path is None:  # asap.maxtextPath, --maxtext-path, $ASAP_MAXTEXT_PATH: its configs and benchmarks
        from server.config import models

        maxtext_path = models.default_maxtext_path()
    out: list[RunAnalysis] = []
    for i, run in enumerate(runs_in(path, text, language_id), 1):
        out.append(analyze_run(i, run, path, positions, default_slice, flags, reader, maxtext_path, language_id))
    return LaunchAnalysis(path, text, out)


def analyze_run(
    index: int,
    run: Run,
    path: Path | None,
    positions: Positions,
    default_slice: str | None = None,
    flags: FlagSource | None = None,
    reader: Reader | None = None,
    maxtext_path: Path | str | None = None,
    language_id: str | None = None,
) -> RunAnalysis:
    early: list[Finding] = []
    if run.kind == "benchmark_runner":
        _recipe(run, path, positions, maxtext_path, early)
    base = _base(run, path, positions, maxtext_path, early)
    doc = run_document(run, path, positions, base)
    for message, loc in run.problems:
        early.append(
            Finding(DiagCode.LAUNCH_COMMAND, Severity.ERROR, message, None, path, positions.of(loc) or Span.point(0))
        )
    for message, loc in run.notes:
        early.append(
            Finding(
                DiagCode.LAUNCH_COMMAND, Severity.INFORMATION, message, None, path, positions.of(loc) or Span.point(0)
            )
        )

    def load(text: str) -> resolve.Config:
        keys = frozenset(k for k in _keys(text) if k != "base_config")
        kw: dict[str, Any] = {"flags": flags, "command_keys": keys, "maxtext_run": True, "maxtext_path": maxtext_path}
        c = resolve.load(path, text, reader, **kw) if reader is not None else resolve.load(path, text, **kw)
        return _launch_flags(c, doc, positions, flags)

    cfg = load(doc.text)
    an = analysis_of(path, cfg, default_slice)

    def recheck(text: str) -> tuple[YamlSource | None, list[Finding]]:
        c = load(text)
        return c.document, [*c.findings, *check(c, default_slice).findings]

    findings = [*early, *doc.findings]
    for f in an.diagnostics:
        mapped = map_finding(doc, f, path, positions)
        fixes: list[Fix] = []
        for fx in f.fixes:
            vetted = vet_fix(doc.text, fx, path=path, clears=(f.code, f.key), recheck=recheck, document=cfg.document)
            if vetted.text is None:
                continue
            try:
                edits = launch_edits(doc, vetted.text, path, positions)
            except ValueError:
                continue
            if edits and reads_back(doc, index, vetted.text, edits, path, positions, language_id):
                fixes.append(replace(fx, edits=tuple(edits)))
        findings.append(replace(mapped, fixes=fixes))
    findings.sort(key=lambda f: (f.span.line, f.span.column, f.code))
    span = positions.of(run.source) or Span.point(0)
    return RunAnalysis(index, run, doc, an, findings, span, positions, language_id)


def _launch_flags(
    cfg: resolve.Config, doc: RunDocument, positions: Positions, cli: FlagSource | None
) -> resolve.Config:
    """The run's flags named as the launch file states them ("LIBTPU_INIT_ARGS at line 12"), their tokens and lines
    where they are written there, and weighed as a launch source (run_flags.PRECEDENCE)."""
    src, setting = cfg.flags_comment, doc.run.flags
    if src is None or setting is None:
        return cfg
    tokens = []
    for t in src.tokens:
        sp = map_span(doc, Span(t.line, t.column, t.line, t.end_column), positions)
        tokens.append(TokenAt(sp.line, sp.column, sp.end_column if sp.end_line == sp.line else sp.column))
    where = positions.of(setting.loc)
    lines = sorted({t.line for t in tokens}) or [where.line if where is not None else 0]
    label = f"{setting.label} at line {lines[0] + 1}"
    # the config keeps the document's own lines and tokens (the hover reads them in its coordinates); the JSON
    # reports the file's (RunAnalysis.to_json)
    cfg.flags_comment = replace(src, kind="launch", label=label)
    cfg.run_flags = resolve_flags(cli, cfg.flags_comment)
    return cfg


def _keys(text: str) -> list[str]:
    try:
        return list(parse(text).entries)
    except YamlSyntaxError:
        return []


def _base(
    run: Run, path: Path | None, positions: Positions, maxtext_path: Path | str | None, findings: list[Finding]
) -> str | None:
    """The base_config the run's document names: the config argument as MaxText finds it (None: MaxText's
    base.yml, whose values are ASAP's defaults, or a config not found: reported at the argument)."""
    if run.config is None or run.config.is_symbolic:
        return None
    from server.config.config_files import find_config

    name = run.config.text
    relative_to = path.parent if path is not None else None
    found, looked = find_config(name, relative_to, maxtext_path, command_line=True)
    if found is None:
        findings.append(
            Finding(
                DiagCode.BASE_CONFIG_NOT_FOUND,
                Severity.ERROR,
                f"MaxText's config '{name}' not found (looked in: {'; '.join(looked)}); the keys it would set fall "
                "back to MaxText's defaults",
                None,
                path,
                positions.of(run.config) or Span.point(0),
            )
        )
        return None
    if found.is_maxtext_base:
        return None
    if found.path is not None:
        return str(found.path)
    return found.key or name


def _recipe(
    run: Run, path: Path | None, positions: Positions, maxtext_path: Path | str | None, findings: list[Finding]
) -> None:
    """A benchmark runner's recipe as the run's config and overrides: its tuning params and MaxText's model name,
    written where `--model_name` is; its xla_flags as the run's flags unless the environment states some."""
    from server.launch import recipes

    if run.recipe is None:
        default = _default_recipe(maxtext_path)
        if default is None:
            return
        # no --model_name: benchmark_runner's argparse default (benchmark_runner.py:135, 216 @e591f30cb)
        run.recipe = Setting(default, run.source, "benchmark_runner's default --model_name")
        findings.append(
            Finding(
                DiagCode.LAUNCH_COMMAND,
                Severity.INFORMATION,
                f"no --model_name: benchmark_runner runs its default recipe, {default} (the first of "
                "trillium_model_dict)",
                None,
                path,
                positions.of(run.source) or Span.point(0),
            )
        )
    if run.recipe.loc.is_symbolic:
        return
    at = run.recipe.loc
    found = recipes.lookup_recipe(run.recipe.value, Path(maxtext_path) if maxtext_path else None)
    recipe = found.recipe
    if recipe is None:
        hint = f" Did you mean {', '.join(found.suggestions[:3])}?" if found.suggestions else ""
        looked = f" (looked in {', '.join(found.searched)})" if found.searched else ""
        findings.append(
            Finding(
                DiagCode.LAUNCH_COMMAND,
                Severity.ERROR,
                f"benchmark recipe '{run.recipe.value}' is not in MaxText's benchmarks{looked}: benchmark_runner "
                f"refuses it.{hint}",
                None,
                path,
                positions.of(at) or Span.point(0),
            )
        )
        return
    run.found_recipe = recipe
    args = {k.lstrip("-"): s.value for k, s in run.runner_args.items()}
    values = recipes.benchmark_overrides(recipe, args)
    written = {o.key for o in run.overrides}
    for key, value in values.items():
        if key in written or isinstance(value, recipes.Symbolic):
            continue
        text = value if isinstance(value, str) else _yaml_scalar(value)
        run.overrides.append(Override(key, text, at, at, at, written=False))
    if run.flags is None and isinstance(recipe.xla_flags, str) and recipe.xla_flags.strip():
        flags = Located(
            recipe.xla_flags,
            (at.offsets[0] if at.offsets else -1,) * len(recipe.xla_flags),
            (False,) * len(recipe.xla_flags),
        )
        run.flags = Setting(recipe.xla_flags, flags, f"recipe {recipe.name}'s xla_flags")


def _default_recipe(maxtext_path: Path | str | None) -> str | None:
    """What benchmark_runner's --model_name defaults to: the checkout's runner (when its benchmarks read), else the
    catalog's."""
    from server.launch import recipes

    lib = recipes.read_checkout(maxtext_path) if maxtext_path else None
    if lib is not None and lib.usable and lib.default_name:
        return lib.default_name
    return recipes.catalog().default_name


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
