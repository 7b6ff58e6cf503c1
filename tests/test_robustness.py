"""Whatever a user types, analysis returns findings and never raises (the server keeps serving)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.config.models import MODELS
from server.config.slices import known_names
from server.services.analysis import analyze

SLICES = [n for g in ("v4", "v5e", "v5p", "v6e", "tpu7x") for n in known_names(g)[:9]]
DEGREES = st.sampled_from([-1, 0, 1, 2, 3, 4, 8, 16, 32, 64, 256, 2.5, "x", None])
AXES = ["data", "fsdp", "fsdp_transpose", "tensor", "context", "expert", "pipeline", "sequence", "tensor_sequence"]


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from([*MODELS, "unknown-1b"]),
    sl=st.sampled_from([*SLICES, "v5e-48", "v9-8"]),
    slices=st.sampled_from([1, 2, 4, 0, -1]),
    pdbs=st.sampled_from([0.25, 0.5, 1, 2, 4, 16, 0, -1, "big"]),
    remat=st.sampled_from(["full", "minimal", "save_qkv_proj", "custom", "qkv_proj_offloaded", "bogus"]),
    ici=st.dictionaries(st.sampled_from(AXES), DEGREES, max_size=4),
    dcn=st.dictionaries(st.sampled_from(["data", "fsdp", "pipeline"]), DEGREES, max_size=2),
    split=st.booleans(),
)
def test_analysis_never_raises(model, sl, slices, pdbs, remat, ici, dcn, split):
    lines = [
        f"model_name: {model}",
        f"compile_topology: {sl}",
        f"compile_topology_num_slices: {slices}",
        f"per_device_batch_size: {pdbs}",
        f"remat_policy: {remat}",
        f"allow_split_physical_axes: {split}".lower(),
        "max_target_length: 2048",
    ]
    lines += [f"ici_{a}_parallelism: {'' if v is None else v}" for a, v in ici.items()]
    lines += [f"dcn_{a}_parallelism: {'' if v is None else v}" for a, v in dcn.items()]
    an = analyze(None, "\n".join(lines) + "\n")
    for f in an.diagnostics:
        assert f.code.startswith("ASAP") and f.message and f.span.line >= 0
    if an.estimate is not None:
        e = an.estimate
        assert e.time.step_s > 0 and 0 < e.mfu < 1 and e.memory.total > 0
