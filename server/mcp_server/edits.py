"""`apply_proposal`'s edit: a proposal of the offline analysis (or a given mesh) written into the config exactly as
the editor's "Apply proposal N" quick fix writes it (server/presentation/agent_findings.py's proposal_offers and
run_proposal_offers: server/config/apply.py's minimal edits, vetted by server/config/safe_edits.py, re-validated to
launch as proposed; a proposal the TPU compiler ruled out is refused). The edited text is returned; writing it is
the tool's decision (server/mcp_server/app.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from server.common.findings import Fix, Severity
from server.config.apply import ApplyError, proposal_edits
from server.config.mesh import check
from server.config.resolve import parse_override, with_overrides
from server.config.safe_edits import vet_fix
from server.config.source import YamlSyntaxError, read_text
from server.services.analysis import analyze


class Refused(Exception):
    """Why the edit cannot be made (ASAP's words, with the file): the tool's error."""


def apply(
    name: str,
    given: tuple[str, str] | None,
    proposal: int | None,
    mesh: str | None,
    run: int | None,
    slice_name: str | None,
) -> tuple[str, str, str]:
    """(the fix's title, the config's text, the edited text) for proposal N or `mesh`."""
    from server.launch.analysis import analyze_launch, is_launch_file

    path = Path(name)
    try:
        text = given[1] if given is not None else read_text(path)
    except OSError as e:
        raise Refused(f"cannot read {name}: {e.strerror or e}") from None
    if is_launch_file(path, text):
        la = analyze_launch(path, text, default_slice=slice_name)
        if run is None and len(la.runs) != 1:
            raise Refused(f"{name} has {len(la.runs)} runs: pick one with `run`")
        if run is not None and not 1 <= run <= len(la.runs):
            raise Refused(f"run {run}: {name} has {len(la.runs)} run{'s' if len(la.runs) != 1 else ''}")
        if mesh is not None:
            raise Refused("a launch file takes `proposal` N (from analyze with its `run`), not `mesh`")
        ra = la.runs[(run or 1) - 1]
        return _proposal(name, text, proposal, slice_name, ra)
    if run is not None:
        raise Refused(f"`run` picks a run of a launch file; {name} is a YAML config")
    if mesh is not None:
        return _mesh(name, path, text, mesh, slice_name)
    return _proposal(name, text, proposal, slice_name, None)


def _proposal(name: str, text: str, proposal: int | None, slice_name: str | None, ra: Any) -> tuple[str, str, str]:
    from server.agents.coordinator import run_report
    from server.agents.types import Experiment
    from server.cli.commands import cached_verdicts
    from server.presentation import agent_findings

    path = Path(name)
    doc_text = ra.document.text if ra is not None else text
    report, _ = run_report(Experiment(path, doc_text, slice_name, None, Path.cwd()), "off")
    report = cached_verdicts(report, path, doc_text, slice_name)
    ranks = [p.rank for p in report.proposals if not p.keep_current]
    if proposal not in ranks:
        have = f"proposals {', '.join(map(str, ranks))}" if ranks else "no proposal that changes the config"
        raise Refused(f"{name}: no proposal {proposal}; the analysis has {have}")
    if ra is not None:
        offers = agent_findings.run_proposal_offers(report, ra, text)
    else:
        offers = agent_findings.proposal_offers(report, analyze(path, text, default_slice=slice_name), text)
    for v in offers:
        if v.fix is not None and v.fix.proposal == proposal and v.text is not None:
            return v.title, text, v.text
    refused = [v for v in offers if v.refused and v.reason and v.title == _title_of(report, proposal)]
    why = refused[0].reason if refused else "its edit would not launch as proposed, or cannot be written safely"
    raise Refused(f"{name}: proposal {proposal} is not applied: {why}")


def _title_of(report: Any, rank: int | None) -> str | None:
    from server.presentation.agent_findings import proposal_title

    return next((proposal_title(p) for p in report.proposals if p.rank == rank), None)


def _mesh(name: str, path: Path, text: str, mesh: str, slice_name: str | None) -> tuple[str, str, str]:
    """The given mesh written in, vetted and re-validated as a proposal is (agent_findings.proposal_offers)."""
    try:
        overrides = parse_override(mesh)
    except (ValueError, YamlSyntaxError) as e:
        raise Refused(f"mesh: {e}") from None
    an = analyze(path, text, default_slice=slice_name)
    cfg = with_overrides(an.config, overrides)
    chk = check(cfg, slice_name)
    errors = [f for f in [*cfg.findings, *chk.findings] if f.severity == Severity.ERROR]
    if errors:
        raise Refused("\n".join(f"mesh {mesh}: {f.code}: {f.message}" for f in errors))
    ici, dcn = chk.degrees("ici", drop_ones=True), chk.degrees("dcn", drop_ones=True)
    other = {k: v for k, v in overrides.items() if not k.endswith("_parallelism")}
    try:
        edits = proposal_edits(an.config, ici, dcn, other)
    except ApplyError as e:
        raise Refused(f"{name}: {e}") from None
    title = f"Apply mesh {mesh}"
    if not edits:
        return title, text, text
    vetted = vet_fix(text, Fix(title, tuple(edits)), path=path, document=an.config.document)
    if vetted.text is None:
        raise Refused(f"{name}: the mesh cannot be written safely: {vetted.reason}")
    after = analyze(path, vetted.text, default_slice=slice_name)
    bad = [f for f in after.findings if f.severity == Severity.ERROR]
    got = (after.check.degrees("ici", drop_ones=True), after.check.degrees("dcn", drop_ones=True))
    if bad or got != (ici, dcn):
        raise Refused(f"{name}: the edited config would not launch as {mesh}")
    return title, text, vetted.text
