"""The closed loop on this machine: run a MaxText-shaped training step on simulated CPU devices with a
config's mesh, profile it, let ASAP analyse the profile and propose, apply proposal 1 to the YAML, run
the new YAML and profile it again, and put ASAP's predictions next to what was measured.

Every step is the real one: the `cpu-N` slice is registered from a micro-benchmark run at the start
(server/lab/cpu_slice.py); the run is server/lab/cpu_train.py in a child process, whose JAX mesh comes from
the YAML through ASAP's mesh check; the analysis is the Coordinator's (`coordinator.run`, offline
engine) with the profile linked; the edit is server/config/apply.py's minimal edit of the YAML text.
bench/closed_loop.py prints the numbers; tests/test_closed_loop.py runs a tiny version.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server.agents.coordinator import run as analyse
from server.agents.types import Experiment
from server.config.apply import apply_text, proposal_edits
from server.config.slices import CpuPeaks, Slice, register_cpu_slice
from server.lab.cpu_slice import measure
from server.lab.cpu_train import RunResult, TrainSpec
from server.lab.cpu_train import run as train
from server.services.analysis import analyze


class LoopError(RuntimeError):
    """The loop cannot go on (no proposal, a proposal the CPU step cannot run); the message says why."""


@dataclass(frozen=True)
class LoopModel:
    """The model and batch, as MaxText config keys."""

    emb: int
    heads: int
    head_dim: int
    mlp: int
    layers: int
    vocab: int
    seq: int
    pdbs: int

    def yaml(self) -> str:
        return (
            f"base_emb_dim: {self.emb}\nbase_num_query_heads: {self.heads}\nbase_num_kv_heads: {self.heads}\n"
            f"head_dim: {self.head_dim}\nbase_mlp_dim: {self.mlp}\nbase_num_decoder_layers: {self.layers}\n"
            f"vocab_size: {self.vocab}\nper_device_batch_size: {self.pdbs}\nmax_target_length: {self.seq}\n"
        )


# The bench's model: 6.3M parameters (1.9M of them in the 4096-word embedding and logits) and 256 tokens a
# step. Parameter-heavy and token-light, so replicating the weights is expensive: see POOR_MESH.
BENCH_MODEL = LoopModel(emb=256, heads=8, head_dim=32, mlp=1024, layers=4, vocab=4096, seq=32, pdbs=1)
# The CI test's: small enough to compile and run in seconds.
TINY_MODEL = LoopModel(emb=64, heads=8, head_dim=8, mlp=128, layers=2, vocab=512, seq=16, pdbs=1)
# Pure data parallelism: every device keeps all the weights, runs the whole AdamW update on them (28 bytes
# of memory traffic per parameter per step, on every device) and all-reduces every gradient. With few tokens
# per step that replicated work dominates; any mesh that shards the weights divides it.
POOR_MESH = {"ici_data_parallelism": 8, "ici_fsdp_parallelism": 1}


def config_text(model: LoopModel, slice_name: str, mesh: dict[str, int]) -> str:
    keys = "".join(f"{k}: {v}\n" for k, v in mesh.items())
    return (
        f"# A MaxText config for ASAP's closed loop on {slice_name} (server/lab/closed_loop.py).\n"
        f"compile_topology: {slice_name}\n"
        "model_name: default\n"
        f"{model.yaml()}"
        "remat_policy: full\n"
        "dtype: bfloat16\n"
        "weight_dtype: float32\n"
        "opt_type: adamw\n"
        "scan_layers: true\n"
        "attention: dot_product\n"
        f"{keys}"
    )


def measure_slice(devices: int = 8, by: str = "server/lab/closed_loop.py") -> tuple[CpuPeaks, Slice]:
    """Measure the CPU devices and register the `cpu-N` slice with what was measured."""
    peaks = measure(devices, by=by)
    return peaks, register_cpu_slice(peaks)


@dataclass
class Leg:
    """One config run, profiled and analysed."""

    config: Path
    text: str
    spec: TrainSpec
    run: RunResult
    result: dict[str, Any]  # the `asap analyze --json` document, with the profile linked

    @property
    def measured_step_s(self) -> float:
        """The median step of the profile (XProf's step table), as ASAP read it."""
        return float(self.result["profile"]["kpis"]["steps"]["median_ms"]) / 1e3

    @property
    def model_step_s(self) -> float:
        """ASAP's estimate for this config's mesh, before any calibration on a profile."""
        return float(self.result["estimate"]["time"]["step_s"])

    @property
    def tokens_per_step(self) -> float:
        return float(self.result["estimate"]["tokens_per_step"])

    @property
    def diagnosis(self) -> dict[str, Any]:
        return dict(self.result["diagnosis"] or {})


@dataclass
class Repetition:
    before: Leg
    proposal: dict[str, Any]  # proposal 1 of the first analysis
    after: Leg
    edits: int  # text edits apply.py made
    mesh_only: bool = False  # the batch/remat changes of proposal 1 were left out

    @property
    def predicted_step_s(self) -> float:
        """Proposal 1's expected step (the model calibrated on the first profile); for a mesh-only run, the
        calibrated model's step of what ran: the new config's estimate x the first profile's one factor (a
        CPU-only profile calibrates the whole step by one factor, server/agents/proposal.py)."""
        if self.mesh_only:
            return self.after.model_step_s * self.before.measured_step_s / self.before.model_step_s
        return float(self.proposal["expected"]["step_s"])

    @property
    def predicted_speedup(self) -> float:
        """Proposal 1's expected throughput gain (tokens/s), calibrated on the first profile."""
        if self.mesh_only:
            return self.model_speedup
        return float(self.proposal["expected"]["speedup"])

    @property
    def model_speedup(self) -> float:
        """The uncalibrated model's throughput ratio of the two configs."""
        b, a = self.before, self.after
        return (a.tokens_per_step / a.model_step_s) / (b.tokens_per_step / b.model_step_s)

    @property
    def measured_speedup(self) -> float:
        """Measured throughput ratio (profile step times)."""
        b, a = self.before, self.after
        return (a.tokens_per_step / a.measured_step_s) / (b.tokens_per_step / b.measured_step_s)

    @property
    def wall_speedup(self) -> float:
        b, a = self.before, self.after
        return (a.tokens_per_step / a.run.wall_median_s) / (b.tokens_per_step / b.run.wall_median_s)


@dataclass
class Loop:
    peaks: CpuPeaks
    slice: Slice
    reps: list[Repetition] = field(default_factory=list)

    def medians(self) -> dict[str, float]:
        def med(f: Any) -> float:
            return statistics.median(f(r) for r in self.reps)

        return {
            "model_before_s": med(lambda r: r.before.model_step_s),
            "measured_before_s": med(lambda r: r.before.measured_step_s),
            "wall_before_s": med(lambda r: r.before.run.wall_median_s),
            "predicted_after_s": med(lambda r: r.predicted_step_s),
            "model_after_s": med(lambda r: r.after.model_step_s),
            "measured_after_s": med(lambda r: r.after.measured_step_s),
            "wall_after_s": med(lambda r: r.after.run.wall_median_s),
            "predicted_speedup": med(lambda r: r.predicted_speedup),
            "model_speedup": med(lambda r: r.model_speedup),
            "measured_speedup": med(lambda r: r.measured_speedup),
            "wall_speedup": med(lambda r: r.wall_speedup),
        }


def run_leg(config: Path, text: str, out: Path, steps: int, warmup: int, use_kb: bool) -> Leg:
    """Run the config's step on the CPU devices, profile it and analyse it with the profile linked."""
    config.write_text(text, encoding="utf-8")
    spec = TrainSpec.from_config(config, text, steps=steps, warmup=warmup)
    res = train(spec, out)
    result = analyse(Experiment(config, text, profile=out), use_kb=use_kb).to_json()
    if result.get("profile") is None or result["profile"]["kpis"].get("steps") is None:
        raise LoopError(f"ASAP read no step times from the profile in {out}: {result.get('notes')}")
    return Leg(config, text, spec, res, result)


def apply_first(leg: Leg, mesh_only: bool = False) -> tuple[dict[str, Any], str, int]:
    """Proposal 1 of a leg's analysis written into its YAML: (proposal, new text, number of edits). With
    `mesh_only`, its batch or remat changes are left out (to see what the mesh alone does)."""
    props = leg.result["proposals"]
    if not props:
        raise LoopError(f"ASAP made no proposal for {leg.config}: {leg.result.get('notes')}")
    p = props[0]
    if p.get("keep_current"):
        raise LoopError(f"ASAP's proposal 1 is to keep the current mesh: {p['rationale']}")
    cfg = analyze(leg.config, leg.text).config
    edits = proposal_edits(cfg, p["ici"], p["dcn"], {} if mesh_only else (p.get("other_changes") or {}))
    return p, apply_text(leg.text, edits), len(edits)


def repetition(
    workdir: Path,
    sl: Slice,
    model: LoopModel = BENCH_MODEL,
    mesh: dict[str, int] | None = None,
    steps: int = 10,
    warmup: int = 2,
    use_kb: bool = True,
    mesh_only: bool = False,
) -> Repetition:
    """One turn of the loop in `workdir`: config.yml (the given mesh) -> proposal 1 -> config.proposed.yml.
    With `mesh_only`, the mesh of proposal 1 without its batch or remat changes (a variant, not proposal 1)."""
    workdir.mkdir(parents=True, exist_ok=True)
    text = config_text(model, sl.name, mesh or POOR_MESH)
    before = run_leg(workdir / "config.yml", text, workdir / "before", steps, warmup, use_kb)
    proposal, new_text, n = apply_first(before, mesh_only)
    after = run_leg(workdir / "config.proposed.yml", new_text, workdir / "after", steps, warmup, use_kb)
    return Repetition(before, proposal, after, n, mesh_only)
