"""One analysis of one config document: load it (with its parents), run the static mesh
checks, and keep everything the editor and the CLI show. No editor types here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from server.common.codes import DiagCode
from server.common.findings import Finding, Related, Severity
from server.config import resolve as config_mod
from server.config.mesh import MeshCheck, check
from server.config.resolve import Config, Reader
from server.config.run_flags import FlagSource
from server.config.safe_edits import static_checks, vet_fix
from server.perf import wording
from server.perf.estimate import Estimate, EstimateError, estimate


@dataclass
class Analysis:
    path: Path | None
    config: Config
    check: MeshCheck
    findings: list[Finding] = field(default_factory=list)  # the static checks (config, mesh)
    estimate: Estimate | None = None
    estimate_findings: list[Finding] = field(default_factory=list)  # the performance model's
    # A launch file's runs (server/launch/analysis.py RunAnalysis), each analysed on its own; `findings` then holds
    # theirs, located in the launch file, and `config` is the file's (no YAML document of its own).
    runs: list[Any] | None = None

    @property
    def diagnostics(self) -> list[Finding]:
        """Every producer's findings, merged for publishing."""
        return sorted([*self.findings, *self.estimate_findings], key=lambda f: (f.span.line, f.span.column, f.code))

    @property
    def depends_on(self) -> list[Path]:
        """Parent files whose edits change this analysis."""
        return list(self.config.chain)

    def to_json(self) -> dict[str, object]:
        sl = self.check.slice
        return {
            "file": str(self.path) if self.path else None,
            "is_maxtext_config": self.config.is_maxtext,
            "slice": None
            if sl is None
            else {
                "name": sl.name,
                "source": self.check.slice_source,
                "generation": sl.chip.generation,
                "chips": sl.chips,
                "topology": list(sl.topology),
                "wraparound": list(sl.wrap),
                "devices_per_slice": sl.devices_per_slice,
                "num_slices": sl.num_slices,
                "devices": sl.devices,
            },
            "model": None if self.config.model is None else self.config.model.name,
            "mesh": self.check.mesh_dict(),
            "findings": [f.to_json() for f in self.diagnostics],
            "estimate": self.estimate.to_json() if self.estimate else None,
        }


def analyze(
    path: Path | None,
    text: str | None = None,
    reader: Reader | None = None,
    default_slice: str | None = None,
    flags: FlagSource | None = None,
) -> Analysis:
    """Analyze a config file (or an editor buffer's `text` for it). `flags`: the run's XLA flags from the command
    line or the editor setting (the config's own comment is read from `text`; server/config/run_flags.py)."""
    cfg = config_mod.load(path, text, reader, flags=flags) if reader else config_mod.load(path, text, flags=flags)
    return analysis_of(path, cfg, default_slice)


def analysis_of(path: Path | None, cfg: Config, default_slice: str | None = None) -> Analysis:
    """The checks and the estimate of a loaded config (a launch command's run document, server/launch/)."""
    chk = check(cfg, default_slice)
    findings = [*cfg.findings, *chk.findings] if cfg.is_maxtext else []
    findings.sort(key=lambda f: (f.span.line, f.span.column, f.code))
    est: Estimate | None = None
    more: list[Finding] = []
    if cfg.is_maxtext and chk.consistent and not any(f.severity == Severity.ERROR for f in findings):
        est, more = _estimate_findings(cfg, chk)
    return Analysis(path, cfg, chk, findings, est, more)


def offered_fixes(an: Analysis, text: str, reader: Reader | None = None, default_slice: str | None = None) -> Analysis:
    """`an` (the analysis of `text`) with each finding's fixes cut to those an editor is offered: vetted by
    server/config/safe_edits.py (written in the file's line endings, the result read back and the static checks run
    on it, the finding gone), in the edits they would be written as. The command line lists these, so it names no
    fix that would break the file or leave its finding in place."""
    recheck = static_checks(an.path, reader, default_slice)

    def vetted(f: Finding) -> Finding:
        if not f.fixes:
            return f
        done = [
            vet_fix(text, fx, path=an.path, clears=(f.code, f.key), recheck=recheck, document=an.config.document)
            for fx in f.fixes
        ]
        return replace(f, fixes=[v.fix for v in done if v.fix is not None])

    return replace(
        an, findings=[vetted(f) for f in an.findings], estimate_findings=[vetted(f) for f in an.estimate_findings]
    )


MESH_KEYS_FOR_MEMORY = (
    "ici_fsdp_parallelism",
    "ici_fsdp_transpose_parallelism",
    "ici_tensor_parallelism",
    "dcn_fsdp_parallelism",
    "ici_data_parallelism",
)


def _estimate_findings(cfg: Config, chk: MeshCheck) -> tuple[Estimate | None, list[Finding]]:
    """The estimate as findings: one information line on the mesh block, and an error (or a warning
    when within the allowance) when the mesh does not fit in HBM, at the keys that decide it."""
    try:
        est = estimate(cfg, chk)
    except EstimateError as e:
        key = e.key or "model_name"
        path, span = cfg.anchor(key)
        return None, [Finding(DiagCode.NO_ESTIMATE, Severity.WARNING, f"No estimate: {e}", key, path, span)]
    mesh = cfg.mesh_anchor()
    anchor_key = mesh.key if mesh is not None else "compile_topology"
    path, span = cfg.anchor(anchor_key)
    kind, margin, _ = est.time.bottleneck()
    out = [
        Finding(
            DiagCode.ESTIMATE,
            Severity.INFORMATION,
            est.summary(),
            anchor_key,
            path,
            span,
            data={"mfu": est.mfu, "step_s": est.time.step_s, "bottleneck": kind, "margin": margin},
        )
    ]
    mem = est.memory
    if mem.verdict != "fits":
        comps = mem.components
        gib = 1024**3
        biggest = max(comps, key=lambda k: comps[k])
        state = comps["weights"] + comps["gradients"] + comps["optimizer"]
        # What decides it: the batch and remat policy for activations, the sharding for model state.
        if state >= comps["activations"] + comps["logits"]:
            keys = [k for k in MESH_KEYS_FOR_MEMORY if cfg.entry(k)] or ["ici_fsdp_parallelism"]
            advice = "shard weights, gradients and optimizer state over more devices (fsdp)"
        else:
            keys = [k for k in ("per_device_batch_size", "remat_policy") if cfg.entry(k)] or ["per_device_batch_size"]
            advice = "lower per_device_batch_size or save fewer activations (remat_policy)"
        keys.sort(key=lambda k: cfg.anchor(k)[1].line)
        parts = ", ".join(f"{k} {v / gib:.1f}" for k, v in comps.items())
        over = mem.total - mem.usable
        if mem.verdict == "does not fit":
            sev, code = Severity.ERROR, DiagCode.HBM_OVERFLOW
            head = (
                f"Does not fit in HBM: {mem.total / gib:.1f} GiB per device needed, "
                f"{wording.gib(mem.usable)} GiB usable"
            )
        else:
            sev, code = Severity.WARNING, DiagCode.HBM_TIGHT
            head = (
                f"Tight on HBM: {mem.total / gib:.1f} GiB per device of {wording.gib(mem.usable)} GiB usable "
                f"(within the estimate's uncertainty: -10%..+15%)"
            )
        msg = f"{head} ({parts} GiB; largest: {biggest}). To fit: {advice}."
        for i, k in enumerate(keys):
            p, sp = cfg.anchor(k)
            related = [Related(cfg.anchor(o)[0], cfg.anchor(o)[1], f"{o} also decides it") for o in keys if o != k]
            out.append(
                Finding(
                    code,
                    sev,
                    msg if i == 0 else f"{head}: see {keys[0]}",
                    k,
                    p,
                    sp,
                    related=related,
                    data={"over_bytes": over},
                )
            )
    return est, out
