"""The step-time model's physics, term by term (issue 26 item 3), each against a hand computation in the test: host
offload's copies (out during the forward pass, back during the backward pass, over PCIe that a tpu7x chip's two
devices share), the DCN gradient all-reduce with and without the data-parallel all-reduce optimization, tensor-parallel
collectives with and without collective matmul, the expert all-to-all, and SparseCore-offloaded collectives on tpu7x.

Every case runs server/perf/steptime.step_time on a tiny model and a chip made simple to compute by hand: every
matmul at the chip's peak (MXU efficiency 1, no MXU-side penalty), HBM so fast that memory-bound work costs nothing,
no hop latency, and round link bandwidths. The FLOPs are given directly (arith.Flops), so a layer's compute is
FLOPs / peak. Overlap-table rows are built in the test (overlap.Table), never read from the committed table.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from server.config.slices import CHIPS, ChipSpec, Slice, parse_slice
from server.config.xla_flags import XlaFlags, parse_xla_flags
from server.perf import overlap, steptime
from server.perf.arith import BytesPerParam, Flops, Params, Shape
from server.perf.layout import Layout
from server.perf.remat import POLICIES, RematPolicy
from server.perf.steptime import StepTime, exposed_seconds

RECIPES = Path(__file__).resolve().parent / "data" / "xla_flags"

PEAK = 1e15  # bf16 FLOP/s per chip
D, H, KV, HD, F, L, V = 256, 4, 2, 64, 1024, 2, 1000
DENSE = Shape(name="tiny", emb=D, q_heads=H, kv_heads=KV, head_dim=HD, mlp=F, layers=L, vocab=V)
PDBS, SEQ = 2, 128
TOKENS = PDBS * SEQ  # per device, per microbatch
BPP = BytesPerParam(4, 4, 8)
KEEP_ALL = POLICIES["minimal_with_context"]  # nothing recomputed: each matmul runs 3 times (forward, 2 backward)
assert KEEP_ALL.recomputed() == frozenset()
EMPTY = overlap.Table({}, (), "test")  # no measurement: every term gets the model's stated assumption


def chip(generation: str = "v5p", **numbers: Any) -> ChipSpec:
    """The generation's chip with numbers that make a hand computation exact."""
    simple: dict[str, Any] = {"peak_bf16_flops": PEAK, "mxu_efficiency": 1.0, "mxu_dim": 1, "hbm_bw": 1e30}
    return dataclasses.replace(CHIPS[generation], hop_latency=0.0, **simple, **numbers)


def layout(
    name: str, ici: dict[str, int], dcn: dict[str, int] | None = None, slices: int = 1, **numbers: float
) -> Layout:
    """A layout on `name` with the simple chip; no placement: an axis' ICI collectives run as one ring over the
    slice's devices, both directions of one link each (collectives.path), 2 x ici_link_bw."""
    sl = parse_slice(name, slices)
    gen = sl.chip.generation
    return Layout(Slice(sl.name, chip(gen, **numbers), sl.topology, sl.wrap, slices), ici, dcn or {}, None)


def flops(per_matmul: float) -> Flops:
    """Each of the layer's four weight matmuls does `per_matmul` forward FLOPs (all devices); no attention or loss."""
    per_layer = {"qkv": per_matmul, "out_proj": per_matmul, "mlpwi": per_matmul, "mlpwo": per_matmul, "attention": 0.0}
    return Flops(1.0, 1.0, per_layer, 0.0, 0.0)


def params(attention: float = 1e6, mlp: float = 3e6, routed: float = 0.0) -> Params:
    return Params(attention, mlp, mlp, 0.0, 0.0, 0.0, routed)  # no embedding: no embedding collectives


def run(
    lay: Layout,
    fl: Flops,
    p: Params | None = None,
    s: Shape = DENSE,
    remat: RematPolicy = KEEP_ALL,
    grad_accum: int = 1,
    flags: XlaFlags | None = None,
    table: overlap.Table = EMPTY,
) -> StepTime:
    return steptime.step_time(s, p or params(), BPP, fl, lay, PDBS, SEQ, remat, grad_accum, flags=flags, table=table)


def row(
    gen: str, axis: str, kind: str, hidden: float, behind: str, on: tuple[str, ...] = (), off: tuple[str, ...] = ()
) -> overlap.Row:
    return overlap.Row(gen, axis, kind, on, off, hidden, behind, 1, ("hand-made",))


def term(st: StepTime, axis: str, kind: str) -> steptime.OverlapTerm:
    (t,) = [t for t in st.overlap if t.axis == axis and t.kind == kind]
    return t


def test_exposed_seconds_by_hand() -> None:
    # 10 s, 80% asynchronous: 2 s synchronous; behind 5 s of compute 3 s more stay exposed, behind 9 s none
    assert exposed_seconds(10.0, 0.8, 5.0) == pytest.approx(2.0 + 3.0)
    assert exposed_seconds(10.0, 0.8, 9.0) == pytest.approx(2.0)
    assert exposed_seconds(10.0, 0.0, 100.0) == pytest.approx(10.0)
    # two terms of 4 s and 4 s asynchronous behind one 6 s window: 2 s outlast it, half of it this one's
    assert exposed_seconds(4.0, 1.0, 6.0, pool_s=8.0) == pytest.approx(1.0)


def test_host_offload_out_behind_the_forward_pass_back_behind_the_backward_pass() -> None:
    # v5p-8: 4 chips, 4 devices, one device a chip. Each matmul 1e11 FLOPs a layer over 4 devices: the forward pass
    # of a layer (4 matmuls) takes 4 x 1e11 / 4 / 1e15 = 1e-4 s on a device, the backward pass twice that.
    lay = layout("v5p-8", {"fsdp": 4}, pcie_bw=1e9)
    fl = flops(1e11)
    fwd_layer = 4 * 1e11 / 4 / PEAK
    bwd_layer = 2 * fwd_layer
    # the layer input offloaded: TOKENS x D bf16 a layer goes out and comes back over 1e9 B/s
    copy = TOKENS * D * 2 / 1e9
    assert copy == pytest.approx(1.31072e-4)
    offload = RematPolicy("offload_input", KEEP_ALL.saved - {"decoder_layer_input"}, frozenset({"decoder_layer_input"}))
    for ga in (1, 2):
        kept, off = run(lay, fl, grad_accum=ga), run(lay, fl, remat=offload, grad_accum=ga)
        # out: 1.31e-4 s against 1e-4 s of forward compute; back: against 2e-4 s of backward compute, hidden
        per_layer = max(0.0, copy - fwd_layer) + max(0.0, copy - bwd_layer)
        assert per_layer == pytest.approx(3.1072e-5)
        assert off.hbm_s - kept.hbm_s == pytest.approx(per_layer * L * ga)
        assert off.step_s - kept.step_s == pytest.approx(per_layer * L * ga)
        out, back = term(off, "host", "device-to-host"), term(off, "host", "host-to-device")
        assert (out.window, back.window) == ("forward", "backward")
        assert out.window_s == pytest.approx(fwd_layer * L * ga) and back.window_s == pytest.approx(bwd_layer * L * ga)
        assert out.exposed_s == pytest.approx((copy - fwd_layer) * L * ga) and back.exposed_s == 0.0
        assert out.source.startswith("assumed")
    # The previous model let both copies hide behind the whole layer's compute: 2 x 1.31e-4 s < 3e-4 s, all hidden.
    assert 2 * copy < fwd_layer + bwd_layer


def test_host_offload_tpu7x_devices_share_the_chips_pcie() -> None:
    # tpu7x-8: 4 chips, 8 devices, two a chip: a device has half the chip's peak and half its PCIe link.
    lay = layout("tpu7x-8", {"fsdp": 8}, pcie_bw=1e9)
    assert lay.slice.chip.devices_per_chip == 2 and lay.slice.devices == 8
    fl = flops(1e11)
    fwd_layer = 4 * 1e11 / 8 / (PEAK / 2)  # 1e-4 s
    bwd_layer = 2 * fwd_layer
    copy = TOKENS * D * 2 / (1e9 / 2)  # 2.62144e-4 s each way
    offload = RematPolicy("offload_input", KEEP_ALL.saved - {"decoder_layer_input"}, frozenset({"decoder_layer_input"}))
    kept, off = run(lay, fl), run(lay, fl, remat=offload)
    per_layer = (copy - fwd_layer) + (copy - bwd_layer)  # both outlast their pass now
    assert per_layer == pytest.approx(2.24288e-4)
    assert off.hbm_s - kept.hbm_s == pytest.approx(per_layer * L)
    assert term(off, "host", "host-to-device").exposed_s == pytest.approx((copy - bwd_layer) * L)


# -- the data-parallel gradient all-reduce over DCN ---------------------------------------------------------------
DP_OPT = "--xla_tpu_enable_data_parallel_all_reduce_opt=true --xla_tpu_data_parallel_opt_different_sized_ops=true"


def test_dcn_gradient_all_reduce_with_and_without_the_data_parallel_optimization() -> None:
    # Two v5p-8 slices, data over DCN (1e9 B/s a chip), fsdp 4 over ICI: 8 devices. Each device all-reduces its
    # fsdp shard of the float32 gradients with the other slice once a step: (1e6 + 3e6) x 2 layers / 4 x 4 B = 8e6 B;
    # a pairwise exchange between 2 slices (log2 2 = 1 round) of an all-reduce (2x the bytes): 1.6e7 B / 1e9 B/s.
    lay = layout("v5p-8", {"fsdp": 4}, {"data": 2}, slices=2, dcn_bw=1e9)
    t = (1e6 + 3e6) * L / 4 * 4 * 2 / 1e9
    assert t == pytest.approx(0.016)
    # 2 microbatches; the last one's backward pass (8 matmul passes a layer of 5e12 FLOPs over 8 devices) is 0.01 s
    fl, ga = flops(5e12), 2
    last_backward = L * 2 * 4 * 5e12 / 8 / PEAK
    assert last_backward == pytest.approx(0.01)
    table = overlap.Table(
        {},
        (
            row("v5p", "data", "all-reduce", 0.0, "none"),
            row("v5p", "data", "all-reduce", 0.75, "backward", on=("data_parallel_overlap",)),
        ),
        "test",
    )
    with_opt = term(run(lay, fl, grad_accum=ga, flags=parse_xla_flags(DP_OPT), table=table), "data", "all-reduce")
    assert with_opt.seconds == pytest.approx(t)
    # a quarter synchronous (0.004 s); the rest, 0.012 s, behind the last microbatch's 0.01 s backward: 0.002 s out
    assert (with_opt.hidden, with_opt.window, with_opt.window_s) == (0.75, "backward", pytest.approx(last_backward))
    assert with_opt.exposed_s == pytest.approx(0.004 + 0.002)
    assert with_opt.source.startswith("measured")
    # without the flag the defaults row holds: exposed
    st = run(lay, fl, grad_accum=ga, table=table)
    assert term(st, "data", "all-reduce").exposed_s == pytest.approx(t) == st.exposed_by_axis["data"]
    # where the compiler's defaults hide half of it behind the backward pass: 0.008 s behind 0.01 s, all hidden
    half = overlap.Table({}, (row("v5p", "data", "all-reduce", 0.5, "backward"),), "test")
    assert term(run(lay, fl, grad_accum=ga, table=half), "data", "all-reduce").exposed_s == pytest.approx(0.008)
    # no measurement: exposed, and said to be assumed
    bare = term(run(lay, fl, grad_accum=ga, flags=parse_xla_flags(DP_OPT)), "data", "all-reduce")
    assert bare.exposed_s == pytest.approx(t) and bare.source.startswith("assumed")


# -- tensor-parallel collectives and collective matmul --------------------------------------------------------------
NO_COLLECTIVE_MATMUL = "--xla_jf_spmd_threshold_for_windowed_einsum_mib=1000000"  # MaxText's DISABLE_COLLECTIVE_MATMUL


def test_tensor_parallel_all_reduce_with_and_without_collective_matmul(monkeypatch: pytest.MonkeyPatch) -> None:
    # the mixing of compiled forms by time, which the committed model keeps off (steptime.MIX_COMPILED_FORMS)
    monkeypatch.setattr(steptime, "MIX_COMPILED_FORMS", True)
    assert parse_xla_flags(NO_COLLECTIVE_MATMUL).enabled() == {"collective_matmul": False}
    # tensor 4 on v5p-8, links of 1e9 B/s: a ring of both directions, 2e9 B/s. Each layer all-reduces the [tokens x 4,
    # D] bf16 activations twice a pass, forward and backward: 8 all-reduces of 524288 B, moving 3/4 of it twice.
    lay = layout("v5p-8", {"tensor": 4}, ici_link_bw=1e9)
    nbytes = TOKENS * 4 * D * 2
    t = 2 * 2 * L * (nbytes * 3 / 4 * 2 / 2e9)
    assert t == pytest.approx(3.145728e-3)
    # the weight matmuls the all-reduces feed: 4 matmuls x 3 passes x 2.5e11 FLOPs / 4 devices a layer
    fl = flops(2.5e11)
    matmuls = L * 12 * 2.5e11 / 4 / PEAK
    assert matmuls == pytest.approx(1.5e-3)
    # Compiled with collective matmul (libtpu's default), the all-reduce is the permutes of windowed einsum loops
    # (the only form measured here: all its time); with it off, an all-reduce.
    table = overlap.Table(
        {},
        (
            dataclasses.replace(row("v5p", "tensor", "collective-permute", 0.9, "matmul"), seconds=1.0),
            row("v5p", "tensor", "all-reduce", 0.0, "none", off=("collective_matmul",)),
        ),
        "test",
    )
    cm = term(run(lay, fl, table=table), "tensor", "all-reduce")
    assert (cm.window, cm.window_s) == ("matmul", pytest.approx(matmuls))
    # 10% synchronous; 90% (2.83e-3 s) behind 1.5e-3 s of matmuls: 1.33e-3 s of it outlasts them
    assert cm.exposed_s == pytest.approx(0.1 * t + (0.9 * t - matmuls)) == pytest.approx(1.645728e-3)
    assert "collective-permute" in cm.source
    off = run(lay, fl, flags=parse_xla_flags(NO_COLLECTIVE_MATMUL), table=table)
    assert term(off, "tensor", "all-reduce").exposed_s == pytest.approx(t) == off.exposed_by_axis["tensor"]
    # more compute per byte: the same share hides whole
    big = term(run(lay, flops(2.5e12), table=table), "tensor", "all-reduce")
    assert big.exposed_s == pytest.approx(0.1 * t)
    # no measurement: exposed, as the model assumed before the table
    assert term(run(lay, fl), "tensor", "all-reduce").exposed_s == pytest.approx(t)


def test_tensor_parallel_all_reduce_mixes_its_compiled_forms_by_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # the mixing of compiled forms by time, which the committed model keeps off (steptime.MIX_COMPILED_FORMS)
    monkeypatch.setattr(steptime, "MIX_COMPILED_FORMS", True)
    # Compiled, the tensor all-reduce is all-gathers and reduce-scatters (synchronous here) and collective matmul's
    # permutes (90% hidden behind the matmuls): rows with their seconds mix by time, 3 + 1 + 4 s.
    lay = layout("v5p-8", {"tensor": 4}, ici_link_bw=1e9)
    t = 2 * 2 * L * (TOKENS * 4 * D * 2 * 3 / 4 * 2 / 2e9)
    table = overlap.Table(
        {},
        (
            dataclasses.replace(row("v5p", "tensor", "all-gather", 0.0, "none"), seconds=3.0),
            dataclasses.replace(row("v5p", "tensor", "reduce-scatter", 0.0, "none"), seconds=1.0),
            dataclasses.replace(row("v5p", "tensor", "collective-permute", 0.9, "matmul"), seconds=4.0),
            dataclasses.replace(
                row("v5p", "tensor", "all-reduce", 0.0, "none", off=("collective_matmul",)), seconds=1.0
            ),
        ),
        "test",
    )
    hidden = 0.9 * 4.0 / (3.0 + 1.0 + 4.0)
    matmuls = L * 12 * 2.5e11 / 4 / PEAK  # 1.5e-3 s: more than the hidden share's 1.42e-3 s
    mixed = term(run(lay, flops(2.5e11), table=table), "tensor", "all-reduce")
    assert (mixed.hidden, mixed.window) == (pytest.approx(hidden), "matmul")
    assert hidden * t < matmuls and mixed.exposed_s == pytest.approx((1 - hidden) * t)
    assert "all-gather 0.00" in mixed.source and "collective-permute 0.90 behind matmul (50%)" in mixed.source
    # the same rows without their time: no way to weigh them, so the model's assumption (exposed), said so
    untimed = overlap.Table({}, tuple(dataclasses.replace(r, seconds=0.0) for r in table.rows), "test")
    bare = term(run(lay, flops(2.5e11), table=untimed), "tensor", "all-reduce")
    assert bare.exposed_s == pytest.approx(t) and bare.source.startswith("assumed") and "no time" in bare.source
    # collective matmul off: no permutes; the row that says so
    off = term(
        run(lay, flops(2.5e11), flags=parse_xla_flags(NO_COLLECTIVE_MATMUL), table=table), "tensor", "all-reduce"
    )
    assert off.exposed_s == pytest.approx(t)


# -- the expert all-to-all ------------------------------------------------------------------------------------------
MOE = Shape(
    name="tiny-moe", emb=D, q_heads=H, kv_heads=KV, head_dim=HD, mlp=F, layers=L, vocab=V,
    experts=4, experts_per_tok=2, moe_mlp=512, moe_tile=128, moe_imbalance=1.0,
)  # fmt: skip


def test_expert_all_to_all_behind_the_mlp_matmuls() -> None:
    # expert 4 on v5p-8, one expert a device (no grouped-matmul tile overhead), dropless: each routed layer sends a
    # device's routed rows, [tokens x top_k, D] bf16, out and back, forward and backward: 8 all-to-alls. The
    # all-to-all's V is the ep devices' rows (4 x 262144 B), of which it moves (ep-1)/ep x 1/4 over 2e9 B/s.
    lay = layout("v5p-8", {"expert": 4}, ici_link_bw=1e9)
    nbytes = TOKENS * 2 * D * 2 * 4
    t = 2 * 2 * L * (nbytes * 3 / 4 / 4 / 2e9)
    assert t == pytest.approx(7.86432e-4)
    fl = flops(1e11)
    mlp = L * 2 * 3 * 1e11 / 4 / PEAK  # the two MLP matmuls the dispatch feeds and the combine reads
    assert mlp == pytest.approx(3e-4)
    p = params(mlp=4 * 3 * D * 512 + 4 * D, routed=4 * 3 * D * 512)
    table = overlap.Table({}, (row("v5p", "expert", "all-to-all", 0.5, "matmul"),), "test")
    st = run(lay, fl, p, s=MOE, table=table)
    a2a = term(st, "expert", "all-to-all")
    assert a2a.seconds == pytest.approx(t) and a2a.window_s == pytest.approx(mlp)
    assert a2a.exposed_s == pytest.approx(0.5 * t + (0.5 * t - mlp)) == pytest.approx(4.86432e-4)
    # the expert axis' exposed time is its terms' (the dense weights' gathers over expert hide behind the layer)
    assert st.exposed_by_axis["expert"] == pytest.approx(sum(x.exposed_s for x in st.overlap if x.axis == "expert"))
    assert term(run(lay, fl, p, s=MOE), "expert", "all-to-all").exposed_s == pytest.approx(t)


# -- SparseCore-offloaded collectives on tpu7x ---------------------------------------------------------------------
def test_sparsecore_offloaded_reduce_scatter_on_tpu7x() -> None:
    # fsdp 8 over tpu7x-8's 8 devices, links of 1e9 B/s: a layer's weights (4e6) gathered in bf16 twice (forward,
    # backward) and its float32 gradients reduce-scattered once, each moving 7/8 of the array over 2e9 B/s.
    lay = layout("tpu7x-8", {"fsdp": 8}, ici_link_bw=1e9)
    gathers = 2 * L * (4e6 * 2 * 7 / 8 / 2e9)
    scatters = L * (4e6 * 4 * 7 / 8 / 2e9)
    assert gathers == pytest.approx(0.014) and scatters == pytest.approx(0.014)
    # the layers' compute: 12 matmul passes of 3.5e12 FLOPs a layer over 8 devices at half the chip's peak each
    fl = flops(3.5e12)
    layers = L * 12 * 3.5e12 / 8 / (PEAK / 2)
    assert layers == pytest.approx(0.021)
    # The TensorCore runs the reduce-scatter itself, synchronously; offloaded, the SparseCores run it while the
    # TensorCore computes and the TensorCore waits only at its done.
    table = overlap.Table(
        {},
        (
            row("tpu7x", "fsdp", "all-gather", 1.0, "layer"),
            row("tpu7x", "fsdp", "reduce-scatter", 0.0, "none"),
            row("tpu7x", "fsdp", "reduce-scatter", 1.0, "layer", on=("sparsecore_offload_reduce_scatter",)),
        ),
        "test",
    )
    plain = run(lay, fl, table=table)
    assert term(plain, "fsdp", "all-gather").exposed_s == 0.0  # 0.014 s behind 0.021 s
    assert term(plain, "fsdp", "reduce-scatter").exposed_s == pytest.approx(scatters)
    recipe = parse_xla_flags((RECIPES / "tpu7x_deepseek3-671b.txt").read_text())
    assert recipe.enabled().get("sparsecore_offload_reduce_scatter") is True
    sc = run(lay, fl, flags=recipe, table=table)
    # both now hide behind the same 0.021 s: 0.028 s of asynchronous collectives, 0.007 s outlast it, shared evenly
    ag, rs = term(sc, "fsdp", "all-gather"), term(sc, "fsdp", "reduce-scatter")
    assert (rs.hidden, rs.window, rs.window_s) == (1.0, "layer", pytest.approx(layers))
    assert ag.exposed_s == pytest.approx(0.0035) and rs.exposed_s == pytest.approx(0.0035)
    assert sc.exposed_by_axis["fsdp"] == pytest.approx(0.007)
    assert "sparsecore_offload_reduce_scatter" in rs.source


def test_estimate_json_states_each_terms_overlap() -> None:
    """`assumptions.overlap` in the estimate's JSON: one entry per term, whose exposed seconds are the step's."""
    from server.perf.estimate import inputs, price
    from server.services.analysis import analyze

    text = (
        "model_name: llama2-7b\ncompile_topology: v5e-16\nper_device_batch_size: 2\nmax_target_length: 2048\n"
        "ici_fsdp_parallelism: 4\nici_tensor_parallelism: 4\n"
    )
    inp = inputs(analyze(None, text).config)
    from server.perf import layout as layout_mod

    est = price(inp, layout_mod.build(parse_slice("v5e-16"), {"fsdp": 4, "tensor": 4}))
    terms = est.to_json()["assumptions"]["overlap"]
    assert {(t["axis"], t["kind"]) for t in terms} >= {("fsdp", "all-gather"), ("tensor", "all-reduce")}
    for t in terms:
        assert set(t) == {"axis", "kind", "seconds", "hidden", "window", "window_s", "exposed_s", "source"}
        assert t["window"] in overlap.WINDOWS and 0 <= t["exposed_s"] <= t["seconds"] + 1e-12
    assert sum(t["exposed_s"] for t in terms) == pytest.approx(est.time.exposed_comm_s)
