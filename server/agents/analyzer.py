"""The Analyzer: what limits this config, from the profile when one matches it, else from the estimate.

Every piece of evidence carries its source as a reader names it (server/perf/wording.py): the profile ("XProf op
profile" of a run, and its rule), ASAP's models ("ASAP's step-time model", "ASAP's memory model", ...) or a chip
spec ("TPU v6e spec (Google Cloud TPU docs)"). The config keys the bottleneck implicates are named so the editor can
put the diagnosis where it belongs.
"""

from __future__ import annotations

from server.agents.types import Diagnosis, Evidence
from server.config.axes import AXES
from server.perf import wording
from server.perf.estimate import Estimate
from server.profiles.profile import Report

GiB = 1024**3
_AXIS = {a.name: a for a in AXES}
# what the step-time model's axis groups are called in config keys
_GROUP_KEYS = {
    "fsdp": ["ici_fsdp_parallelism", "ici_fsdp_transpose_parallelism"],
    "tensor": ["ici_tensor_parallelism"],
    "context": ["ici_context_parallelism"],
    "expert": ["ici_expert_parallelism"],
    "data": ["ici_data_parallelism", "dcn_data_parallelism"],
    "pipeline": ["ici_pipeline_parallelism"],
}


# the step-time model's parts, as the diagnosis names them
_PART = {"compute": "compute", "hbm": "memory-bound work", "communication": "exposed communication"}


def _keys_for_axes(label: str, crosses: bool) -> list[str]:
    keys: list[str] = []
    for axis in label.split("+"):
        a = _AXIS.get(axis)
        if a is None:
            continue
        keys.append(a.ici_key)
        if crosses:
            keys.append(a.dcn_key)
    return keys


def from_estimate(est: Estimate) -> Diagnosis:
    """The performance model's view: which of compute, HBM or exposed communication the step waits on."""
    t = est.time
    sl = est.layout.slice
    step = t.step_s
    ev = [
        Evidence(
            f"estimated step {step * 1e3:,.0f} ms: compute {t.compute_s / step:.0%}, memory-bound work "
            f"{t.hbm_s / step:.0%}, exposed communication {t.exposed_comm_s / step:.0%}; MFU {est.mfu:.1%}",
            wording.STEP_TIME_MODEL,
        )
    ]
    mem = est.memory
    if not mem.fits:
        ev.append(
            Evidence(
                f"needs {mem.total / GiB:.1f} GiB of HBM per chip, {wording.gib(mem.usable)} GiB usable on "
                f"{sl.chip.generation}",
                f"{wording.MEMORY_MODEL} + "
                f"{wording.spec(sl.chip.generation, 'hbm_bytes', sl.chip.sources['hbm_bytes'])}",
            )
        )
        return Diagnosis(
            "memory",
            0.8 if mem.verdict == "does not fit" else 0.55,
            ev,
            ["per_device_batch_size", "remat_policy", "ici_fsdp_parallelism", "ici_tensor_parallelism"],
            "estimate",
            f"does not fit in HBM: {mem.total / GiB:.1f} of {wording.gib(mem.usable)} GiB usable",
        )
    kind, margin, parts = t.bottleneck()
    keys: list[str] = []
    comm_close = kind != "communication" and parts["communication"] >= parts[kind] - 0.15 * step
    if (kind == "communication" or comm_close) and t.exposed_by_axis:
        axis, secs = max(t.exposed_by_axis.items(), key=lambda kv: kv[1])
        ev.append(
            Evidence(
                f"{axis} collectives expose {secs * 1e3:,.0f} ms ({secs / step:.0%} of the step) that no compute hides",
                f"{wording.COLLECTIVE_MODEL} + {wording.STEP_TIME_MODEL}",
            )
        )
        keys = list(_GROUP_KEYS.get(axis, []))
        if axis == "data" or est.layout.dcn_degree(axis) > 1:
            keys += [k for k in (f"dcn_{axis}_parallelism",) if k not in keys]
    if kind == "hbm":
        ev.append(
            Evidence(
                f"memory-bound work (norms, elementwise, optimizer, scanned-layer copies) {t.hbm_s * 1e3:,.0f} ms at "
                f"{sl.chip.hbm_bw / 1e9:,.0f} GB/s",
                f"{wording.STEP_TIME_MODEL} + {wording.spec(sl.chip.generation, 'hbm_bw', sl.chip.sources['hbm_bw'])}",
            )
        )
        keys = [*keys, "per_device_batch_size", "remat_policy"]
    elif kind == "compute":
        ev.append(
            Evidence(
                f"matmuls at {sl.chip.mxu_efficiency:.0%} of the {sl.chip.peak_bf16_flops / 1e12:.0f} TFLOP/s peak; "
                f"remat policy '{est.remat.name}' re-runs {sorted(est.remat.recomputed()) or 'nothing'}",
                f"{wording.spec(sl.chip.generation, 'peak_bf16_flops', sl.chip.sources['peak_bf16_flops'])} + "
                f"{wording.FLOP_COUNT}",
            )
        )
        keys = [*keys, "remat_policy", "per_device_batch_size"]
    # Not measured: the model's confidence is what its calibration supports (bench/mfu_references.py: median
    # error under 2 MFU points) and how clearly one part dominates.
    conf = min(0.75, 0.45 + 0.6 * margin)
    runner = sorted((k for k in parts if k != kind), key=lambda k: parts[k], reverse=True)[0]
    share = f"{_PART[kind]} {parts[kind] / step:.0%} of the step"
    if comm_close and runner == "communication":  # the runner-up is said with its own share
        summary = f"{kind}-bound by the estimate ({share})"
    else:
        summary = f"{kind}-bound by the estimate ({share}, {margin * 100:.0f} points more than {_PART[runner]})"
    if comm_close:
        summary += f", exposed communication close behind ({parts['communication'] / step:.0%} of the step)"
    return Diagnosis(kind, conf, ev, keys, "estimate", summary)


def from_profile(report: Report, est: Estimate | None) -> Diagnosis:
    """The profile's view, with the gap to the estimate when the profile is of this config."""
    v = report.verdict
    ev = [Evidence(e, f"{wording.XPROF_OPS} of {report.source} (rule: {v.rule})") for e in v.evidence]
    keys: list[str] = []
    if v.bottleneck == "communication":
        for label, g in list(report.collectives.by_axis.items())[:2]:
            keys += _keys_for_axes(label, g.crosses_slices)
            bw = f", {g.bw_utilization:.0%} of the axis' ICI bandwidth" if g.bw_utilization is not None else ""
            ev.append(
                Evidence(
                    f"collectives on mesh axis {label} take {g.fraction:.0%} of the step{bw}",
                    f"{wording.XPROF_OPS} (each collective's replica groups laid on the config's mesh)",
                )
            )
    elif v.bottleneck in ("hbm", "compute"):
        keys = ["per_device_batch_size", "remat_policy"]
    gap = report.comparison
    if gap:
        ev.append(
            Evidence(
                f"measured step {gap['measured_step_s'] * 1e3:,.1f} ms vs {gap['expected_step_s'] * 1e3:,.1f} ms "
                f"estimated ({gap['step_gap']:+.0%}); MFU {gap['measured_mfu']:.1%} vs {gap['expected_mfu']:.1%}",
                f"{wording.XPROF_STEPS} (median of the steps kept) vs {wording.STEP_TIME_MODEL}",
            )
        )
    summary = f"{v.bottleneck}-bound in the profile (rule: {v.rule})"
    if est is not None and gap is None:
        summary += "; the profile is not of this config's slice, so it is not compared with the estimate"
    return Diagnosis(v.bottleneck, v.confidence, ev, list(dict.fromkeys(keys)), "profile", summary, gap)
