"""server/profiles/hlo_schedule.py on hand-written scheduled HLO: which collectives are asynchronous, the compute the
schedule puts between their halves, their hidden share (computed here by hand from the chip's numbers), window and
mesh-axis group."""

from __future__ import annotations

import pytest

from server.config.slices import CHIPS, parse_slice
from server.perf.layout import Layout, build
from server.profiles import hlo_schedule as hs

V5E = CHIPS["v5e"]
MATMUL = V5E.peak_bf16_flops * V5E.mxu_efficiency  # FLOP/s of one v5e device
# v5e-16 is a 4x4 torus without wraparound: fsdp 16 spans both axes, each an open line (half of its two directions'
# links busy): 2 axes x 2 directions x 45 GB/s x 0.5; a ring step is at least 1 us, 3 steps on a line of 4.
FSDP_BW = 2 * 2 * V5E.ici_link_bw * 0.5
STEPS = 3
MESH = [("fsdp", 16)]


def layout() -> Layout:
    return build(parse_slice("v5e-16"), {"fsdp": 16})


def all_gather_s(nbytes: float) -> float:
    return max(nbytes * 15 / 16 / FSDP_BW, STEPS * 1e-6)


def permute_s(nbytes: float) -> float:
    return max(nbytes / FSDP_BW, STEPS * 1e-6)


def dot_s(m: int, k: int, n: int) -> float:
    flops = 2 * m * k * n
    nbytes = 2 * (m * k + k * n + m * n)
    return max(flops / MATMUL, nbytes / V5E.hbm_bw)


FUSED_DOT = """
%fused_dot (p0: bf16[1024,4096], p1: bf16[4096,4096]) -> bf16[1024,4096] {
  %p0 = bf16[1024,4096]{1,0} parameter(0)
  %p1 = bf16[4096,4096]{1,0} parameter(1)
  ROOT %dot.1 = bf16[1024,4096]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def module(entry_body: str, extra: str = "") -> str:
    return (
        "HloModule m, is_scheduled=true\n"
        + FUSED_DOT
        + extra
        + "\nENTRY %main (x: bf16[1024,4096], w: bf16[4096,4096]) -> bf16[16384,4096] {\n"
        + "  %x = bf16[1024,4096]{1,0} parameter(0)\n"
        + "  %w = bf16[4096,4096]{1,0} parameter(1)\n"
        + entry_body
        + "}\n"
    )


AG_START = (
    "  %ags = (bf16[1024,4096]{1,0}, bf16[16384,4096]{1,0}) all-gather-start(%x), channel_id=1, "
    "replica_groups=[1,16]<=[16], dimensions={0}, use_global_device_ids=true\n"
)
AG_DONE = "  ROOT %agd = bf16[16384,4096]{1,0} all-gather-done(%ags)\n"
DOT_A = "  %fa = bf16[1024,4096]{1,0} fusion(%x, %w), kind=kOutput, calls=%fused_dot\n"
DOT_B = "  %fb = bf16[1024,4096]{1,0} fusion(%fa, %w), kind=kOutput, calls=%fused_dot\n"


def only(text: str) -> hs.Scheduled:
    sch = hs.schedule(text, layout(), MESH)
    assert len(sch.collectives) == 1, [c.name for c in sch.collectives]
    return sch.collectives[0]


def test_schedule_all_gather_hidden_by_two_dots_between_its_halves() -> None:
    c = only(module(AG_START + DOT_A + DOT_B + AG_DONE))
    gathered = 16384 * 4096 * 2
    assert c.kind == "all-gather" and c.asynchronous and c.group == "fsdp" and c.count == 1
    assert c.between == ("fa", "fb")
    assert c.seconds == pytest.approx(all_gather_s(gathered))
    assert c.compute_s == pytest.approx(2 * dot_s(1024, 4096, 4096))
    # by hand: 2 x 2*1024*4096*4096 FLOPs at 187.15 TFLOP/s = 367 us behind 134 MB x 15/16 at 90 GB/s = 1.40 ms
    assert c.hidden == pytest.approx(2 * 2 * 1024 * 4096 * 4096 / MATMUL / (gathered * 15 / 16 / FSDP_BW))
    assert 0.25 < c.hidden < 0.28
    assert c.window == "forward"  # outside any loop, and no op of the backward pass between


def test_schedule_synchronous_collective_hides_nothing() -> None:
    sync = (
        "  %ag = bf16[16384,4096]{1,0} all-gather(%x), channel_id=1, replica_groups=[1,16]<=[16], dimensions={0}, "
        "use_global_device_ids=true\n"
    )
    c = only(module(sync + DOT_A + "  ROOT %t = (bf16[16384,4096]{1,0}, bf16[1024,4096]{1,0}) tuple(%ag, %fa)\n"))
    assert not c.asynchronous and c.hidden == 0.0 and c.window == "none"
    assert c.seconds == pytest.approx(all_gather_s(16384 * 4096 * 2))


def test_schedule_start_directly_followed_by_done_hides_nothing() -> None:
    c = only(module(DOT_A + AG_START + AG_DONE))
    assert c.asynchronous and c.between == () and c.hidden == 0.0 and c.window == "none"


def test_schedule_backward_compute_between_is_the_backward_window() -> None:
    bwd = DOT_A.replace("\n", ', metadata={op_name="jit(train_step)/transpose(jvp())/dot_general"}\n')
    c = only(module(AG_START + bwd + AG_DONE))
    assert c.window == "backward" and c.backward_s == pytest.approx(c.compute_s) and c.hidden > 0


T = "(bf16[1024,4096], bf16[4096,4096], bf16[1024,4096], u32[])"
TL = "(bf16[1024,4096]{1,0}, bf16[4096,4096]{1,0}, bf16[1024,4096]{1,0}, u32[])"
RING = ",".join(f"{{{i},{(i + 1) % 16}}}" for i in range(16))
LOOP_BODY = f"""
%wide.windowed_dot_general_body_ag.1 (p: {T}) -> {T} {{
  %p = {TL} parameter(0)
  %lhs = bf16[1024,4096]{{1,0}} get-tuple-element(%p), index=0
  %rhs = bf16[4096,4096]{{1,0}} get-tuple-element(%p), index=1
  %i = u32[] get-tuple-element(%p), index=3
  %cps = (bf16[1024,4096]{{1,0}}, bf16[1024,4096]{{1,0}}, u32[], u32[]) collective-permute-start(%lhs), channel_id=2,
  source_target_pairs={{{RING}}}
  %acc = bf16[1024,4096]{{1,0}} fusion(%lhs, %rhs), kind=kOutput, calls=%fused_dot
  %cpd = bf16[1024,4096]{{1,0}} collective-permute-done(%cps)
  %one = u32[] constant(1)
  %next = u32[] add(%i, %one)
  ROOT %out = {TL} tuple(%cpd, %rhs, %acc, %next)
}}

%wide.windowed_dot_general_cond_ag.1 (q: {T}) -> pred[] {{
  %q = {TL} parameter(0)
  %j = u32[] get-tuple-element(%q), index=3
  %n = u32[] constant(4)
  ROOT %lt = pred[] compare(%j, %n), direction=LT
}}
""".replace(",\n  source_target_pairs", ", source_target_pairs")

LOOP = (
    "  %zero = u32[] constant(0)\n"
    f"  %init = {TL} tuple(%x, %w, %x, %zero)\n"
    f"  %loop = {TL} while(%init), "
    "condition=%wide.windowed_dot_general_cond_ag.1, body=%wide.windowed_dot_general_body_ag.1, "
    'backend_config={"known_trip_count":{"n":"4"}}\n'
)


def test_schedule_collective_matmul_loop_permutes_hide_behind_the_matmul() -> None:
    text = module(LOOP + "  ROOT %r = bf16[1024,4096]{1,0} get-tuple-element(%loop), index=2\n", LOOP_BODY)
    c = only(text)
    assert c.kind == "collective-permute" and c.count == 4 and c.window == "matmul" and c.group == "fsdp"
    assert c.seconds == pytest.approx(permute_s(1024 * 4096 * 2))
    assert c.compute_s == pytest.approx(dot_s(1024, 4096, 4096))
    assert c.hidden == pytest.approx(min(1.0, dot_s(1024, 4096, 4096) / permute_s(1024 * 4096 * 2)))


def test_schedule_loop_between_halves_counts_its_body_times_its_trips() -> None:
    text = module(AG_START + LOOP + AG_DONE, LOOP_BODY)
    sch = hs.schedule(text, layout(), MESH)
    ag = next(c for c in sch.collectives if c.kind == "all-gather")
    assert ag.between == ("zero", "init", "loop")
    assert ag.compute_s == pytest.approx(4 * dot_s(1024, 4096, 4096) + 4 * 8 / V5E.hbm_bw, rel=1e-6)
    assert ag.window == "forward"


ACF = """
%fused_computation.ag (a0: bf16[1024,4096]) -> bf16[16384,4096] {
  %a0 = bf16[1024,4096]{1,0} parameter(0)
  ROOT %all-gather.7 = bf16[16384,4096]{1,0} all-gather(%a0), channel_id=5, GROUPS
}

%async_collective_fusion.9 (c0: bf16[1024,4096], c1: bf16[4096,4096], c2: bf16[16384,4096]) -> OUT {
  %c0 = bf16[1024,4096]{1,0} parameter(0)
  %c1 = bf16[4096,4096]{1,0} parameter(1)
  %c2 = bf16[16384,4096]{1,0} parameter(2)
  %dot.9 = bf16[1024,4096]{1,0} dot(%c0, %c1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %tuple.9 = (bf16[1024,4096]{1,0}, bf16[16384,4096]{1,0}) tuple(%dot.9, %c2)
}

%fused_computation.done (d0: bf16[16384,4096]) -> bf16[16384,4096] {
  ROOT %d0 = bf16[16384,4096]{1,0} parameter(0)
}
""".replace("GROUPS", "replica_groups=[1,16]<=[16], dimensions={0}, use_global_device_ids=true").replace(
    "OUT", "(bf16[1024,4096], bf16[16384,4096])"
)


def test_schedule_async_collective_fusion_is_matched_through_its_continuation() -> None:
    body = (
        "  %async-collective-start = bf16[16384,4096]{1,0} fusion(%x), kind=kCustom, calls=%fused_computation.ag\n"
        "  %fusion.9 = (bf16[1024,4096]{1,0}, bf16[16384,4096]{1,0}) fusion(%x, %w, %async-collective-start), "
        "kind=kOutput, calls=%async_collective_fusion.9\n"
        "  ROOT %async-collective-done = bf16[16384,4096]{1,0} fusion(%fusion.9#1), kind=kCustom, "
        "calls=%fused_computation.done\n"
    )
    c = only(module(body, ACF))
    assert c.name == "async-collective-start" and c.kind == "all-gather" and c.asynchronous
    assert c.between == ("fusion.9",)
    # the continuation's dot, and its bytes: x and w in, the dot's result out; the gathered buffer passes through
    flops_s = 2 * 1024 * 4096 * 4096 / MATMUL
    assert c.compute_s == pytest.approx(flops_s)
    assert c.hidden == pytest.approx(flops_s / all_gather_s(16384 * 4096 * 2))


SC = """
%called_computation.1 (s0: bf16[1024,4096]) -> bf16[16384,4096] {
  %s0 = bf16[1024,4096]{1,0} parameter(0)
  ROOT %all-gather.195 = bf16[16384,4096]{1,0} all-gather(%s0), channel_id=8, MESH_GROUPS
}, execution_thread="sparsecore"

%async_computation.47 () -> ((), s32[8]) {
  ROOT %cc = ((), s32[8]{0}) custom-call(), custom_call_target="SparseCoreCollective", CALLED
}, execution_thread="sparsecore"
""".replace(
    "MESH_GROUPS", "replica_groups=mesh['fsdp'=16] {'fsdp'}, dimensions={0}, use_global_device_ids=true"
).replace("CALLED", "called_computations={%called_computation.1}")


def test_schedule_sparsecore_offload_is_asynchronous_and_marked() -> None:
    name = "all-gather.195.cloned.1.call"
    body = (
        f'  %{name}-start = ((), (), s32[8]{{0}}) async-start(), async_execution_thread="sparsecore", '
        "calls=%async_computation.47\n"
        f"  %{name}-update = ((), (), s32[8]{{0}}) async-update(%{name}-start, %x)\n"
        + DOT_A
        + f"  ROOT %{name}-done = bf16[16384,4096]{{1,0}} async-done(%{name}-update)\n"
    )
    c = only(module(body, SC))
    assert c.sparsecore and c.asynchronous and c.kind == "all-gather" and c.group == "fsdp"
    assert c.between == ("fa",)
    assert c.compute_s == pytest.approx(dot_s(1024, 4096, 4096))


def test_schedule_collectives_in_flight_share_the_compute_between() -> None:
    second = (
        "  %ags2 = (bf16[1024,4096]{1,0}, bf16[16384,4096]{1,0}) all-gather-start(%w), channel_id=3, "
        "replica_groups=[1,16]<=[16], dimensions={0}, use_global_device_ids=true\n"
    )
    body = (
        AG_START
        + second.replace("%w)", "%x)")
        + DOT_A
        + "  %agd2 = bf16[16384,4096]{1,0} all-gather-done(%ags2)\n"
        + AG_DONE
    )
    sch = hs.schedule(module(body), layout(), MESH)
    a, b = sch.collectives
    assert a.compute_s == pytest.approx(dot_s(1024, 4096, 4096) / 2)
    assert b.compute_s == pytest.approx(dot_s(1024, 4096, 4096) / 2)


def test_schedule_instruction_over_several_lines_is_one_instruction() -> None:
    kernel = (
        '  %k = bf16[1024,4096]{1,0} custom-call(%x), custom_call_target="tpu_custom_call", '
        'frontend_attributes={kernel_metadata={\n"xprof_metadata":"{\\"block_q\\": 512}"\n}}, '
        'metadata={op_name="jit(train_step)/jvp()/pallas_call"}\n'
    )
    c = only(module(AG_START + kernel + AG_DONE))
    assert c.between == ("k",)
    assert c.compute_s == pytest.approx(2 * 1024 * 4096 * 2 / V5E.hbm_bw)


def test_aggregate_weights_hidden_share_by_seconds_times_executions() -> None:
    def fake(seconds: float, count: int, compute: float, window: str) -> hs.Scheduled:
        op = hs.parse_collective(AG_START.strip())
        assert op is not None
        s = hs.Scheduled("c", "all-gather", "main", count, True, False, op, ("fsdp",), "fsdp", seconds, compute)
        s.window = window
        return s

    rows = hs.aggregate([fake(1.0, 2, 0.5, "layer"), fake(2.0, 1, 2.0, "forward"), fake(1.0, 1, 0.0, "none")])
    (row,) = rows
    # (0.5 x 1 x 2 + 1.0 x 2 x 1 + 0 x 1 x 1) / (1 x 2 + 2 x 1 + 1 x 1) = 3 / 5
    assert row.hidden == pytest.approx(0.6)
    assert row.behind == "forward"  # 2 hidden seconds behind the forward pass, 1 behind the layer
    assert (row.collectives, row.executions) == (3, 4)


@pytest.mark.parametrize(
    ("axes", "group"),
    [
        (("fsdp",), "fsdp"),
        (("fsdp_transpose",), "fsdp"),
        (("tensor", "tensor_sequence"), "tensor"),
        (("fsdp", "expert"), "fsdp+expert"),
        (("data", "fsdp"), "data"),
        (("stage",), "pipeline"),
        ((), "none"),
    ],
)
def test_step_group_names_the_step_models_groups(axes: tuple[str, ...], group: str) -> None:
    assert hs.step_group(axes) == group


def test_step_group_of_mixed_axes_is_the_largest() -> None:
    assert hs.step_group(("fsdp", "tensor"), {"fsdp": 4, "tensor": 8}) == "tensor"


def test_schedule_of_junk_is_empty() -> None:
    assert hs.schedule("not hlo at all", layout(), MESH).collectives == []
    assert hs.schedule(module("  %bad = ((( all-gather-start(\n"), layout(), MESH).collectives == []


def test_schedule_multislice_program_all_reduce_over_the_slice_is_the_data_axis() -> None:
    """A 2-slice program is compiled per slice (num_partitions 16 of 32 devices): its gradient all-reduce over the
    slice's 16 devices goes on across the slices over DCN, priced on fsdp's links and data's DCN."""
    text = module(
        "  %ar = bf16[4096,4096]{1,0} all-reduce(%w), channel_id=4, replica_groups={{0,1,2,3,4,5,6,7,8,9,10,11,12,13,"
        "14,15}}, use_global_device_ids=true, to_apply=%add\n" + AG_START + AG_DONE,
        "\n%add (a: bf16[], b: bf16[]) -> bf16[] {\n  %a = bf16[] parameter(0)\n  %b = bf16[] parameter(1)\n"
        "  ROOT %s = bf16[] add(%a, %b)\n}\n",
    ).replace("is_scheduled=true", "is_scheduled=true, num_partitions=16")
    lay = build(parse_slice("v5e-16", 2), {"fsdp": 16}, {"data": 2})
    ar, ag = hs.schedule(text, lay).collectives
    assert (ar.kind, ar.group, ar.axes) == ("all-reduce", "data", ("data", "fsdp"))
    nbytes = 4096 * 4096 * 2
    # ICI: an all-reduce moves twice the array's 15/16 over fsdp's links; DCN: the device's 1/16 share, twice (one
    # round of pairwise exchange between 2 slices), at the chip's DCN bandwidth
    ici = max(2 * nbytes * 15 / 16 / FSDP_BW, 2 * STEPS * 1e-6)
    assert ar.seconds == pytest.approx(ici + 2 * nbytes / 16 / V5E.dcn_bw)
    assert not ar.asynchronous and ar.hidden == 0.0
    assert (ag.group, ag.axes) == ("fsdp", ("fsdp",))


MEGASCALE = (
    'frontend_attributes={_xla_host_transfer_handler_name="xla_megascale_runtime",'
    '_xla_host_transfer_rendezvous="all-reduce.92_0",_xla_megascale_reduce_operation="SUM",'
    '_xla_megascale_transfer_type="ALL_REDUCE",is_spmd_generated="true"}'
)
DONE_ATTRS = 'frontend_attributes={_xla_host_transfer_handler_name="xla_megascale_runtime"}'


def test_schedule_megascale_transfers_are_the_dcn_all_reduce_behind_the_compute_between() -> None:
    """Where a multi-slice program hands its cross-slice gradient reduction to the Megascale runtime (send/recv host
    transfers of one rendezvous, as libtpu compiles MaxText's 2-slice train step), that transfer is the data axis'
    all-reduce of the shard it sends, asynchronous from its first half to its recv-done, hidden by the compute
    between; the slice's own all-reduce stays on its ICI axis."""
    shard = "bf16[256,4096]{1,0}"
    body = (
        "  %ar = bf16[4096,4096]{1,0} all-reduce(%w), channel_id=4, replica_groups={{0,1,2,3,4,5,6,7,8,9,10,11,12,13,"
        "14,15}}, use_global_device_ids=true, to_apply=%add\n"
        "  %sl = bf16[256,4096]{1,0} slice(%ar), slice={[0:256], [0:4096]}\n"
        "  %tok = token[] after-all()\n"
        f"  %send.1 = ({shard}, u32[], token[]) send(%sl, %tok), channel_id=10, is_host_transfer=true, {MEGASCALE}\n"
        f"  %recv.1 = ({shard}, u32[], token[]) recv(%tok), channel_id=9, is_host_transfer=true, {MEGASCALE}\n"
        + DOT_A
        + DOT_B
        + f"  %send-done.1 = token[] send-done(%send.1), channel_id=10, is_host_transfer=true, {DONE_ATTRS}\n"
        f"  %recv-done.1 = ({shard}, token[]) recv-done(%recv.1), channel_id=9, is_host_transfer=true, {DONE_ATTRS}\n"
        "  ROOT %r = bf16[256,4096]{1,0} get-tuple-element(%recv-done.1), index=0\n"
    )
    text = module(
        body,
        "\n%add (a: bf16[], b: bf16[]) -> bf16[] {\n  %a = bf16[] parameter(0)\n  %b = bf16[] parameter(1)\n"
        "  ROOT %s = bf16[] add(%a, %b)\n}\n",
    ).replace("is_scheduled=true", "is_scheduled=true, num_partitions=16")
    lay = build(parse_slice("v5e-16", 2), {"fsdp": 16}, {"data": 2})
    ar, dcn = hs.schedule(text, lay).collectives
    assert (ar.kind, ar.group, ar.axes, ar.asynchronous) == ("all-reduce", "fsdp", ("fsdp",), False)
    assert (dcn.name, dcn.kind, dcn.group, dcn.axes) == ("send.1", "all-reduce", "data", ("data",))
    assert dcn.asynchronous and dcn.dcn
    # the shard each slice contributes, all-reduced between 2 slices (one pairwise round of twice its bytes) at the
    # chip's DCN bandwidth, behind the two matmuls scheduled between its halves (the recv and the send-done are free)
    assert dcn.seconds == pytest.approx(2 * 256 * 4096 * 2 / V5E.dcn_bw)
    assert dcn.compute_s == pytest.approx(2 * dot_s(1024, 4096, 4096))
    assert dcn.hidden == pytest.approx(min(1.0, dcn.compute_s / dcn.seconds))
    assert dcn.window == "forward"  # no transpose(...) in the dots' metadata: the forward pass' compute


def test_batched_dot_written_as_a_dilated_convolution_counts_one_tap_per_output() -> None:
    """MaxText's MoE combine (`weight_sum BKE,BK -> BE`) compiles to a convolution whose batch dimension is a spatial
    one dilated past its window (size = lhs_dilate = tokens): each output element multiplies the top-k features of
    one token, so 2 x outputs x top-k FLOPs, not x tokens more."""
    tokens, k, emb = 4096, 8, 1024
    text = (
        "HloModule m, is_scheduled=true\n"
        f"\n%comb (p0: bf16[{tokens},{k},{emb}], p1: bf16[{tokens},{k},1]) -> bf16[{tokens},1,{emb}] {{\n"
        f"  %p0 = bf16[{tokens},{k},{emb}]{{2,1,0}} parameter(0)\n"
        f"  %p1 = bf16[{tokens},{k},1]{{2,1,0}} parameter(1)\n"
        f"  ROOT %c = bf16[{tokens},1,{emb}]{{2,1,0}} convolution(%p0, %p1), window={{size={tokens} "
        f"stride={tokens - 1} lhs_dilate={tokens}}}, dim_labels=0fb_0io->0fb\n"
        "}\n"
        f"\nENTRY %main (x: bf16[{tokens},{k},{emb}], w: bf16[{tokens},{k},1]) -> bf16[{tokens},1,{emb}] {{\n"
        f"  %x = bf16[{tokens},{k},{emb}]{{2,1,0}} parameter(0)\n"
        f"  %w = bf16[{tokens},{k},1]{{2,1,0}} parameter(1)\n"
        f"  ROOT %f = bf16[{tokens},1,{emb}]{{2,1,0}} fusion(%x, %w), kind=kOutput, calls=%comb\n"
        "}\n"
    )
    costs = hs.Costs(hs.parse_module(text), hs.Chip.of(V5E))
    assert costs.flops("comb") == 2 * tokens * emb * k


def test_a_fusion_reading_a_stacked_buffer_through_a_nested_slice_moves_the_slice() -> None:
    """A scan's backward reads the layer's saved input from the stacked [layers, ...] buffer through a nested loop
    fusion that dynamic-slices it (MaxText's 80-layer llama2-70b): HBM moves the slice, not the stack."""
    layers, rows, emb = 80, 1024, 4096
    text = (
        "HloModule m, is_scheduled=true\n"
        f"\n%inner (s: bf16[{layers},{rows},{emb}], i: s32[]) -> bf16[1,{rows},{emb}] {{\n"
        f"  %s = bf16[{layers},{rows},{emb}]{{2,1,0}} parameter(0)\n"
        "  %i = s32[] parameter(1)\n"
        "  %z = s32[] constant(0)\n"
        f"  ROOT %d = bf16[1,{rows},{emb}]{{2,1,0}} dynamic-slice(%s, %i, %z, %z), "
        f"dynamic_slice_sizes={{1,{rows},{emb}}}\n"
        "}\n"
        f"\n%outer (p0: bf16[{layers},{rows},{emb}], p1: s32[], p2: bf16[{emb},{emb}]) -> bf16[{rows},{emb}] {{\n"
        f"  %p0 = bf16[{layers},{rows},{emb}]{{2,1,0}} parameter(0)\n"
        "  %p1 = s32[] parameter(1)\n"
        f"  %p2 = bf16[{emb},{emb}]{{1,0}} parameter(2)\n"
        f"  %n = bf16[1,{rows},{emb}]{{2,1,0}} fusion(%p0, %p1), kind=kLoop, calls=%inner\n"
        f"  %b = bf16[{rows},{emb}]{{1,0}} bitcast(%n)\n"
        f"  ROOT %dot = bf16[{rows},{emb}]{{1,0}} dot(%b, %p2), lhs_contracting_dims={{1}}, "
        "rhs_contracting_dims={0}\n"
        "}\n"
        f"\nENTRY %main (st: bf16[{layers},{rows},{emb}], i: s32[], w: bf16[{emb},{emb}]) -> bf16[{rows},{emb}] {{\n"
        f"  %st = bf16[{layers},{rows},{emb}]{{2,1,0}} parameter(0)\n"
        "  %i = s32[] parameter(1)\n"
        f"  %w = bf16[{emb},{emb}]{{1,0}} parameter(2)\n"
        f"  ROOT %f = bf16[{rows},{emb}]{{1,0}} fusion(%st, %i, %w), kind=kOutput, calls=%outer\n"
        "}\n"
    )
    m = hs.parse_module(text)
    costs = hs.Costs(m, hs.Chip.of(V5E))
    # the layer's slice, the weight and the result; the scalar index's 4 bytes
    expected = rows * emb * 2 + emb * emb * 2 + rows * emb * 2 + 4
    assert costs.fusion_bytes(m.instructions["f"], "outer") == expected


def test_a_stacked_buffer_through_an_aliased_tiling_copy_moves_the_slice_or_the_update() -> None:
    """libtpu relays a scan's stacked buffer through a nested copy fusion aliased to its operand
    (`output_to_operand_aliasing={{}: (0, {})}`, tiling (16,128) to (8,128): compiled, MaxText's llama3.1-70b on
    tpu7x) before slicing a layer out of it or updating one in place: HBM moves the slice (or the update), not the
    80-layer stack; the same through a second level of nesting."""
    layers, rows, emb = 80, 1024, 4096
    stack = f"bf16[{layers},{rows},{emb}]"
    view = (
        f"\n%view (v: {stack}) -> {stack} {{\n"
        f"  %v = {stack}{{2,1,0}} parameter(0)\n"
        f"  ROOT %c = {stack}{{2,1,0}} copy(%v)\n"
        "}\n"
    )
    alias = "output_to_operand_aliasing={{}: (0, {})}"
    text = (
        "HloModule m, is_scheduled=true\n" + view + f"\n%read (s: {stack}, i: s32[]) -> bf16[{rows},{emb}] {{\n"
        f"  %s = {stack}{{2,1,0}} parameter(0)\n"
        "  %i = s32[] parameter(1)\n"
        "  %z = s32[] constant(0)\n"
        f"  %w = {stack}{{2,1,0}} fusion(%s), kind=kLoop, {alias}, calls=%view\n"
        f"  %d = bf16[1,{rows},{emb}]{{2,1,0}} dynamic-slice(%w, %i, %z, %z), dynamic_slice_sizes={{1,{rows},{emb}}}\n"
        f"  ROOT %b = bf16[{rows},{emb}]{{1,0}} bitcast(%d)\n"
        "}\n"
        f"\n%write (s: {stack}, i: s32[], u: bf16[{rows},{emb}]) -> {stack} {{\n"
        f"  %s = {stack}{{2,1,0}} parameter(0)\n"
        "  %i = s32[] parameter(1)\n"
        f"  %u = bf16[{rows},{emb}]{{1,0}} parameter(2)\n"
        "  %z = s32[] constant(0)\n"
        f"  %w = {stack}{{2,1,0}} fusion(%s), kind=kLoop, {alias}, calls=%view\n"
        f"  %b = bf16[1,{rows},{emb}]{{2,1,0}} bitcast(%u)\n"
        f"  ROOT %d = {stack}{{2,1,0}} dynamic-update-slice(%w, %b, %i, %z, %z)\n"
        "}\n"
        f"\n%outer (s: {stack}, i: s32[]) -> bf16[{rows},{emb}] {{\n"
        f"  %s = {stack}{{2,1,0}} parameter(0)\n"
        "  %i = s32[] parameter(1)\n"
        f"  ROOT %n = bf16[{rows},{emb}]{{1,0}} fusion(%s, %i), kind=kLoop, calls=%read\n"
        "}\n"
        f"\nENTRY %main (st: {stack}, ix: s32[], up: bf16[{rows},{emb}]) -> {stack} {{\n"
        f"  %st = {stack}{{2,1,0}} parameter(0)\n"
        "  %ix = s32[] parameter(1)\n"
        f"  %up = bf16[{rows},{emb}]{{1,0}} parameter(2)\n"
        f"  %rd = bf16[{rows},{emb}]{{1,0}} fusion(%st, %ix), kind=kLoop, calls=%read\n"
        f"  %od = bf16[{rows},{emb}]{{1,0}} fusion(%st, %ix), kind=kLoop, calls=%outer\n"
        f"  ROOT %wr = {stack}{{2,1,0}} fusion(%st, %ix, %up), kind=kLoop, calls=%write\n"
        "}\n"
    )
    m = hs.parse_module(text)
    costs = hs.Costs(m, hs.Chip.of(V5E))
    layer = rows * emb * 2
    assert costs.fusion_bytes(m.instructions["rd"], "read") == layer + 4 + layer  # the slice, the index, the result
    assert costs.fusion_bytes(m.instructions["od"], "outer") == layer + 4 + layer  # the same, one fusion deeper
    # in place: the update read, the layer written; the index
    assert costs.fusion_bytes(m.instructions["wr"], "write") == layer + 4 + 2 * layer
