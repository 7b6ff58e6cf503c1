"""server/compile/schedule_sim.py: the TensorCore's timeline of a scheduled module, against hand computations (a dot,
an async all-gather around two dots, a while loop with a known trip count, a host-offload copy), and the Pallas
kernels' FLOPs read from MaxText's compiled operand shapes."""

from __future__ import annotations

import pytest

from server.compile import schedule_sim as sim
from server.config.slices import CHIPS, parse_slice
from server.perf.layout import build
from server.profiles import hlo_schedule as hs

V5E = CHIPS["v5e"]
MATMUL = V5E.peak_bf16_flops * V5E.mxu_efficiency
# v5e-16 is a 4x4 torus without wraparound: fsdp 16 spans both axes, each an open line (half of its two directions'
# links busy): 2 axes x 2 directions x 45 GB/s x 0.5; a ring step is at least 1 us, 3 steps on a line of 4.
FSDP_BW = 2 * 2 * V5E.ici_link_bw * 0.5
STEPS = 3


def dot_s(m: int, k: int, n: int) -> float:
    return max(2 * m * k * n / MATMUL, 2 * (m * k + k * n + m * n) / V5E.hbm_bw)


FUSED_DOT = """
%fused_dot (p0: bf16[1024,4096], p1: bf16[4096,4096]) -> bf16[1024,4096] {
  %p0 = bf16[1024,4096]{1,0} parameter(0)
  %p1 = bf16[4096,4096]{1,0} parameter(1)
  ROOT %dot.1 = bf16[1024,4096]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
T = "(u32[], bf16[1024,4096], bf16[4096,4096])"
BODY = f"""
%body (p: {T}) -> {T} {{
  %p = {T} parameter(0)
  %i = u32[] get-tuple-element(%p), index=0
  %a = bf16[1024,4096]{{1,0}} get-tuple-element(%p), index=1
  %b = bf16[4096,4096]{{1,0}} get-tuple-element(%p), index=2
  %d = bf16[1024,4096]{{1,0}} fusion(%a, %b), kind=kOutput, calls=%fused_dot
  %one = u32[] constant(1)
  %n = u32[] add(%i, %one)
  ROOT %t = {T} tuple(%n, %d, %b)
}}

%cond (q: {T}) -> pred[] {{
  %q = {T} parameter(0)
  %j = u32[] get-tuple-element(%q), index=0
  %four = u32[] constant(4)
  ROOT %lt = pred[] compare(%j, %four), direction=LT
}}
"""
ENTRY = f"""
ENTRY %main (x: bf16[1024,4096], w: bf16[4096,4096]) -> bf16[16384,4096] {{
  %x = bf16[1024,4096]{{1,0}} parameter(0)
  %w = bf16[4096,4096]{{1,0}} parameter(1)
  %ags = (bf16[1024,4096]{{1,0}}, bf16[16384,4096]{{1,0}}) all-gather-start(%x), channel_id=1, \
replica_groups=[1,16]<=[16], dimensions={{0}}, use_global_device_ids=true
  %fa = bf16[1024,4096]{{1,0}} fusion(%x, %w), kind=kOutput, calls=%fused_dot
  %fb = bf16[1024,4096]{{1,0}} fusion(%fa, %w), kind=kOutput, calls=%fused_dot
  %agd = bf16[16384,4096]{{1,0}} all-gather-done(%ags)
  %zero = u32[] constant(0)
  %init = {T} tuple(%zero, %fb, %w)
  %loop = {T} while(%init), condition=%cond, body=%body, backend_config={{"known_trip_count":{{"n":"4"}}}}
  %h = bf16[1024,4096]{{1,0}} get-tuple-element(%loop), index=1
  %cs = (bf16[1024,4096]{{1,0}}, bf16[1024,4096]{{1,0:S(5)}}, u32[]) copy-start(%h)
  %fc = bf16[1024,4096]{{1,0}} fusion(%h, %w), kind=kOutput, calls=%fused_dot
  %cd = bf16[1024,4096]{{1,0:S(5)}} copy-done(%cs)
  ROOT %r = bf16[16384,4096]{{1,0}} copy(%agd)
}}
"""


def test_simulated_step_of_a_hand_written_module_is_the_hand_computed_timeline() -> None:
    text = "HloModule m, is_scheduled=true\n" + FUSED_DOT + BODY + ENTRY
    lay = build(parse_slice("v5e-16"), {"fsdp": 16})
    s = sim.simulate(text, lay)
    dot = dot_s(1024, 4096, 4096)
    # the all-gather (its gathered 128 MiB, 15/16 of it over fsdp's links) runs beside the two dots; the clock
    # waits for the rest at its done
    gathered = 16384 * 4096 * 2
    ag = max(gathered * 15 / 16 / FSDP_BW, STEPS * 1e-6)
    assert ag > 2 * dot  # the case exposes part of it
    # the loop: 4 x (its dot and the induction variable's add: two u32 read, one written)
    loop = 4 * (dot + 12 / V5E.hbm_bw)
    # the host copy (8 MiB over the chip's PCIe) beside one dot; the final copy reads and writes 128 MiB
    host = 1024 * 4096 * 2 / V5E.pcie_bw
    assert host > dot
    final = 2 * gathered / V5E.hbm_bw
    expected = ag + loop + max(host, dot) + final
    assert s.step_s == pytest.approx(expected, rel=1e-9)
    assert s.groups["fsdp"].seconds == pytest.approx(ag) and s.groups["fsdp"].exposed_s == pytest.approx(ag - 2 * dot)
    assert s.groups["host"].seconds == pytest.approx(host)
    assert s.groups["host"].exposed_s == pytest.approx(host - dot)
    assert s.busy_s["matmul"] == pytest.approx(7 * dot)
    assert s.busy_s["memory-bound"] == pytest.approx(4 * 12 / V5E.hbm_bw + final)
    assert s.flops == pytest.approx(7 * 2 * 1024 * 4096 * 4096)
    assert not s.unknown_trip_counts and not s.unpriced_kernels


def test_a_synchronous_collective_stops_the_clock_for_all_of_it() -> None:
    entry = ENTRY.replace(
        "  %ags = (bf16[1024,4096]{1,0}, bf16[16384,4096]{1,0}) all-gather-start(%x)",
        "  %agd = bf16[16384,4096]{1,0} all-gather(%x)",
    ).replace("  %agd = bf16[16384,4096]{1,0} all-gather-done(%ags)\n", "")
    s = sim.simulate(
        "HloModule m, is_scheduled=true\n" + FUSED_DOT + BODY + entry, build(parse_slice("v5e-16"), {"fsdp": 16})
    )
    assert s.groups["fsdp"].exposed_s == pytest.approx(s.groups["fsdp"].seconds)


def _module_with(ins: str, params: str) -> hs.Module:
    return hs.parse_module(f"HloModule m, is_scheduled=true\n\nENTRY %main ({params}) -> f32[] {{\n{ins}}}\n")


def test_grouped_matmul_and_splash_kernels_are_priced_by_their_flops() -> None:
    """megablox's gmm (rows x k times the groups' [k, n] weights, or their transpose), tgmm (the weights' gradient)
    and splash attention (q [batch, heads, seq, head_dim]: causal, 2 matmuls forward, 4 in the dkv kernel), with
    the operand shapes MaxText's compiled Qwen3 MoE step has."""
    k = 'custom_call_target="tpu_custom_call"'
    m = _module_with(
        "  %g = s32[129]{0} parameter(0)\n"
        "  %x = bf16[4096,512]{1,0} parameter(1)\n"
        "  %w = bf16[8,512,256]{2,1,0} parameter(2)\n"
        "  %y = bf16[4096,256]{1,0} parameter(3)\n"
        "  %q = bf16[2,4,1024,128]{3,2,1,0} parameter(4)\n"
        f"  %gmm.1 = bf16[4096,256]{{1,0}} custom-call(%g, %x, %w), {k}\n"
        f"  %gmm.2 = bf16[4096,512]{{1,0}} custom-call(%g, %y, %w), {k}\n"
        f"  %tgmm.1 = bf16[8,512,256]{{2,1,0}} custom-call(%g, %x, %y), {k}\n"
        f"  %splash_mha_fwd.1 = bf16[2,4,1024,128]{{3,2,1,0}} custom-call(%q, %q, %q), {k}\n"
        f"  %splash_mha_dkv.1 = bf16[2,4,1024,128]{{3,2,1,0}} custom-call(%q, %q, %q), {k}\n"
        "  ROOT %z = f32[] constant(0)\n",
        "g: s32[129], x: bf16[4096,512], w: bf16[8,512,256], y: bf16[4096,256], q: bf16[2,4,1024,128]",
    )
    gmm = 2 * 4096 * 512 * 256
    assert sim.kernel_flops(m, m.instructions["gmm.1"]) == ("grouped matmul", gmm)
    assert sim.kernel_flops(m, m.instructions["gmm.2"]) == ("grouped matmul", gmm)  # x [4096,256] times w transposed
    assert sim.kernel_flops(m, m.instructions["tgmm.1"]) == ("grouped matmul", gmm)
    attn = 2 * (2 * 4) * 1024 * 1024 * 128 * 0.5  # one causal matmul over batch x heads
    assert sim.kernel_flops(m, m.instructions["splash_mha_fwd.1"]) == ("attention", 2 * attn)
    assert sim.kernel_flops(m, m.instructions["splash_mha_dkv.1"]) == ("attention", 4 * attn)


def test_maxtexts_host_offload_is_an_async_update_of_a_host_buffer_over_pcie() -> None:
    """MaxText's offloaded layer tensors compile to an async dynamic-update-slice into a stacked buffer in host
    memory (S(5)): the update crosses the chip's PCIe beside the compute scheduled before its done."""
    host = "bf16[8,1024,4096]{2,1,0:S(5)}"
    upd = "bf16[1,1024,4096]{2,1,0}"
    text = (
        "HloModule m, is_scheduled=true\n"
        + FUSED_DOT
        + f"\nENTRY %main (buf: {host.split('{')[0]}, x: bf16[1024,4096], w: bf16[4096,4096], i: s32[]) -> "
        + f"{host.split('{')[0]} {{\n"
        + f"  %buf = {host} parameter(0)\n"
        + "  %x = bf16[1024,4096]{1,0} parameter(1)\n"
        + "  %w = bf16[4096,4096]{1,0} parameter(2)\n"
        + "  %i = s32[] parameter(3)\n"
        + f"  %upd = {upd} bitcast(%x)\n"
        + f"  %dus-start = (({host}, {upd}, s32[], s32[], s32[]), {host}, u32[]) async-start(%buf, %upd, %i, %i, %i), "
        + "calls=%dus\n"
        + "  %f = bf16[1024,4096]{1,0} fusion(%x, %w), kind=kOutput, calls=%fused_dot\n"
        + f"  ROOT %dus-done = {host} async-done(%dus-start)\n"
        + "}\n"
    )
    s = sim.simulate(text, build(parse_slice("v5e-16"), {"fsdp": 16}))
    pcie = 1024 * 4096 * 2 / V5E.pcie_bw
    dot = dot_s(1024, 4096, 4096)
    assert s.groups["host"].seconds == pytest.approx(pcie) and s.groups["host"].count == 1
    assert s.step_s == pytest.approx(max(pcie, dot))
    assert s.groups["host"].exposed_s == pytest.approx(max(0.0, pcie - dot))


def test_a_widened_loop_counts_its_trips_by_the_step_its_body_adds() -> None:
    """XLA's widened loops (`wide.` bodies, two original iterations each) add 2 to the induction variable the
    condition compares with N: N/2 trips, not N (a bidirectional collective-matmul loop over tensor 8 on v5p:
    `i < 4`, `add(%p#4, 2)`, two iterations), read from the body's ROOT tuple."""
    from server.profiles.hlo_program import computations, trip_count

    def module(step: int) -> str:
        return (
            "HloModule m, is_scheduled=true\n"
            "\n%wide.body (p: (f32[], u32[])) -> (f32[], u32[]) {\n"
            "  %p = (f32[], u32[]) parameter(0)\n"
            "  %x = f32[] get-tuple-element(%p), index=0\n"
            "  %i = u32[] get-tuple-element(%p), index=1\n"
            f"  %c = u32[] constant({step})\n"
            "  %n = u32[] add(%i, %c)\n"
            "  ROOT %t = (f32[], u32[]) tuple(%x, %n)\n"
            "}\n"
            "\n%cond (q: (f32[], u32[])) -> pred[] {\n"
            "  %q = (f32[], u32[]) parameter(0)\n"
            "  %j = u32[] get-tuple-element(%q), index=1\n"
            "  %four = u32[] constant(4)\n"
            "  ROOT %lt = pred[] compare(%j, %four), direction=LT\n"
            "}\n"
            "\nENTRY %main (a: f32[]) -> (f32[], u32[]) {\n"
            "  %a = f32[] parameter(0)\n"
            "  %z = u32[] constant(0)\n"
            "  %init = (f32[], u32[]) tuple(%a, %z)\n"
            "  ROOT %w = (f32[], u32[]) while(%init), condition=%cond, body=%wide.body\n"
            "}\n"
        )

    for step, trips in ((1, 4), (2, 2), (3, 2)):
        text = module(step)
        line = next(ln for ln in text.splitlines() if " while(" in ln)
        assert trip_count(line, computations(text)) == trips, step
