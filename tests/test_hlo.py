"""server/profiles/hlo.py: collectives read from XProf hlo_op_expression text, replica groups, mesh axes."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from server.profiles.hlo import (
    UNKNOWN_ASYNC,
    CollectiveOp,
    axes_label,
    collective_kind,
    collective_mesh_axes,
    expand_replica_groups,
    mesh_axes_of_group,
    parse_collective,
    parse_instruction,
    parse_mesh_groups,
    result_shape,
    shape_bytes,
)
from server.profiles.hlo_program import computations, summarize, walk

REAL = Path(__file__).resolve().parent / "data" / "profiles" / "xprof-real-tpu-v5-training"
FIXTURE = REAL / "tpu_training.hlo_stats.json.gz"
MESH = [("data", 2), ("fsdp", 4), ("tensor", 2)]

AG_277 = (
    "%all-gather.277 = bf16[1,2048,16,128]{1,3,2,0:T(8,128)(2,1)} all-gather(bf16[1,512,16,128]{1,3,2,0:T(8,128)(2,1)}"
    " %fusion.522), channel_id=91, replica_groups=[1,4]<=[4], dimensions={1}, use_global_device_ids=true,"
    ' frontend_attributes={async_collective_name="all-gather-start.1"}'
)
FUSION_635 = (
    "%fusion.635 = bf16[512,7168]{1,0:T(8,128)(2,1)} fusion(bf16[2048,7168]{1,0:T(8,128)(2,1)}"
    " %get-tuple-element.1182), kind=kCustom, calls=%all-reduce-scatter.clone"
)
ALL_TO_ALL = (
    "%all-to-all = bf16[4,1,2048,512]{3,2,1,0:T(8,128)(2,1)} all-to-all(bf16[4,1,2048,512]{3,2,1,0:T(8,128)(2,1)}"
    " %bitcast.905), channel_id=5, replica_groups={{0,1,2,3}}, dimensions={0}"
)
ALL_REDUCE_TUPLE = (
    "%all-reduce.73 = (f32[]{:T(128)}, f32[]{:T(128)}, /*index=2*/f32[]{:T(128)}) all-reduce(f32[]{:T(128)}"
    " %a, f32[]{:T(128)} %b, f32[]{:T(128)} %c), channel_id=71, replica_groups={{0,1,2,3}},"
    " use_global_device_ids=true, to_apply=%region_43.2091.clone"
)
MEGACORE = (
    "%fusion.606 = (bf16[7168,512]{1,0:T(8,128)(2,1)}, f32[16,2048]{1,0:T(8,128)}) fusion(bf16[7168,2048]{1,0}"
    " %get-tuple-element.1966, bf16[1,16,128,2048]{2,3,1,0:T(8,128)(2,1)} %async-collective-done.8),"
    " kind=kCustom, calls=%megacore_fusion.2.clone"
)


def _rows() -> list[dict[str, Any]]:
    with gzip.open(FIXTURE) as f:
        table = json.load(f)
    ids = [c["id"] for c in table["cols"]]
    return [{k: (cell or {}).get("v") for k, cell in zip(ids, row["c"], strict=False)} for row in table["rows"]]


# ---------------------------------------------------------------------------------------------
# shapes


def test_shape_bytes() -> None:
    assert shape_bytes("bf16[1,2048,16,128]{1,3,2,0:T(8,128)(2,1)}") == 1 * 2048 * 16 * 128 * 2
    assert shape_bytes("f32[]{:T(128)}") == 4
    assert shape_bytes("(f32[2]{0}, /*index=1*/s4[8]{0:T(1024)(128)(8,1)}, c128[1], pred[3])") == 8 + 4 + 16 + 3
    assert shape_bytes("f8e4m3fn[10] f8e5m2[10] f8e4m3fnuz[2] u8[1] s8[1]") == 24
    assert shape_bytes("f64[1] s64[1] u64[1] c64[1] bf16[1] f16[1] s16[1] u16[1] u4[2]") == 32 + 8 + 1
    assert shape_bytes("f32[<=16,2]") == 128  # bounded dynamic dimension: the bound
    assert shape_bytes("token[] u32[]{:S(2)}") == 4
    assert shape_bytes("nonsense") == 0
    assert shape_bytes("f32[a,b]") == 0


def test_parse_instruction_splits_result_operands_attributes() -> None:
    inst = parse_instruction(ALL_REDUCE_TUPLE)
    assert inst is not None
    assert inst.name == "all-reduce.73"
    assert inst.opcode == "all-reduce"
    assert inst.result is not None and inst.result.elements is not None and len(inst.result.elements) == 3
    assert len(inst.operands) == 3
    assert "replica_groups={{0,1,2,3}}" in inst.attributes
    no_shapes = parse_instruction("%ag = f32[8,4]{1,0} all-gather(%param), replica_groups={{0,1}}, dimensions={0}")
    assert no_shapes is not None and no_shapes.operands == (None,)
    assert parse_instruction("not hlo at all") is None


# ---------------------------------------------------------------------------------------------
# real XProf rows


def test_real_all_gather() -> None:
    op = parse_collective(AG_277, "all-gather")
    assert op is not None
    assert (op.kind, op.phase) == ("all-gather", "sync")
    assert op.result_bytes == 1 * 2048 * 16 * 128 * 2
    assert op.operand_bytes == 1 * 512 * 16 * 128 * 2
    assert op.payload_bytes == op.result_bytes
    assert op.groups == ((0, 1, 2, 3),)
    assert op.group_size == 4
    assert op.dimensions == (1,)
    assert op.name == "all-gather.277"


def test_real_all_reduce_scatter_fusion_infers_group_size() -> None:
    op = parse_collective(FUSION_635, "all-reduce-scatter fusion")
    assert op is not None
    assert (op.kind, op.phase) == ("all-reduce-scatter", "sync")
    assert op.groups is None
    assert op.group_size == 4  # 2048 / 512
    assert op.operand_bytes == op.payload_bytes == 2048 * 7168 * 2
    assert op.result_bytes == 512 * 7168 * 2
    # Without the category the fusion's callee names it.
    assert parse_collective(FUSION_635) == op


def test_real_all_to_all_and_tuple_all_reduce() -> None:
    a2a = parse_collective(ALL_TO_ALL, "all-to-all")
    assert a2a is not None
    assert a2a.kind == "all-to-all"
    assert a2a.payload_bytes == a2a.operand_bytes == 4 * 2048 * 512 * 2
    assert a2a.group_size == 4 and a2a.dimensions == (0,)
    ar = parse_collective(ALL_REDUCE_TUPLE, "all-reduce")
    assert ar is not None
    assert (ar.kind, ar.phase, ar.result_bytes, ar.operand_bytes, ar.group_size) == ("all-reduce", "sync", 12, 12, 4)


def test_fusions_consuming_a_collective_are_not_collectives() -> None:
    assert collective_kind("megacore fusion", MEGACORE) is None
    assert parse_collective(MEGACORE, "megacore fusion") is None
    assert parse_collective(MEGACORE) is None
    assert parse_collective("%add.1 = f32[8]{0} add(f32[8]{0} %a, f32[8]{0} %b)", "non-fusion elementwise") is None


def test_every_real_collective_row_parses() -> None:
    expected_kind = {
        "all-gather": "all-gather",
        "all-reduce": "all-reduce",
        "all-to-all": "all-to-all",
        "all-reduce-scatter fusion": "all-reduce-scatter",
    }
    seen: dict[str, int] = {}
    for row in _rows():
        category, expression = row["category"], row["hlo_op_expression"]
        op = parse_collective(expression, category)
        if category not in expected_kind:
            assert op is None, (category, row["hlo_op_name"])
            continue
        assert op is not None, row["hlo_op_name"]
        assert op.kind == expected_kind[category]
        assert op.phase == "sync"
        assert parse_collective(expression) == op  # the opcode alone gives the same answer
        assert op.operand_bytes > 0 and op.result_bytes > 0
        assert op.group_size == 4  # a v5 slice of 4 chips, all fsdp
        assert collective_kind(category, expression) == (op.kind, op.phase)
        if op.kind == "all-gather":
            assert op.result_bytes == 4 * op.operand_bytes
            assert op.groups == ((0, 1, 2, 3),)
        elif op.kind == "all-reduce-scatter":
            assert op.operand_bytes == 4 * op.result_bytes
            assert op.payload_bytes == op.operand_bytes
        else:
            assert op.operand_bytes == op.result_bytes
            assert op.groups == ((0, 1, 2, 3),)
            assert collective_mesh_axes(op, [("data", 1), ("fsdp", 4), ("tensor", 1)]) == ("fsdp",)
        seen[op.kind] = seen.get(op.kind, 0) + 1
    assert seen == {"all-gather": 4, "all-reduce": 5, "all-to-all": 2, "all-reduce-scatter": 8}


def test_truncated_and_mangled_real_expressions_never_raise() -> None:
    rng = random.Random(1234)
    expressions = [(r["category"], r["hlo_op_expression"]) for r in _rows()]
    expressions += [("", AG_277), ("", FUSION_635), ("", ALL_REDUCE_TUPLE), ("all-to-all", ALL_TO_ALL)]
    for category, expression in expressions:
        cuts = {rng.randrange(len(expression) + 1) for _ in range(25)} | {0, 1, len(expression) - 1}
        for cut in cuts:
            for text in (expression[:cut], expression[cut:]):
                op = parse_collective(text, category)
                collective_kind(category, text)
                shape_bytes(text)
                if op is not None:
                    assert op.result_bytes >= 0 and op.operand_bytes >= 0
                    op.payload_bytes  # noqa: B018
        for _ in range(25):
            chars = list(expression)
            for _ in range(rng.randrange(1, 6)):
                i = rng.randrange(len(chars))
                chars[i] = rng.choice("{}()[],=<>%T' 0123456789")
            text = "".join(chars)
            parse_collective(text, category)
            parse_collective(text)
            expand_replica_groups(text)


@pytest.mark.parametrize(
    "text",
    ["", "=", "% = (", "%x = (((((", "%x = f32[ all-gather(", "replica_groups=[", "mesh[", "{{", "[2,2]<=[", "\x00"],
)
def test_garbage_never_raises(text: str) -> None:
    parse_collective(text)
    parse_collective(text, "all-gather")
    collective_kind("all-reduce", text)
    expand_replica_groups(text)
    shape_bytes(text)


def test_category_without_readable_text_gives_partial_op() -> None:
    op = parse_collective("garbled", "all-reduce")
    assert op is not None and (op.kind, op.result_bytes, op.groups) == ("all-reduce", 0, None)


# ---------------------------------------------------------------------------------------------
# async forms, other collectives


def test_all_gather_start_and_done() -> None:
    start = parse_collective(
        "%all-gather-start = (bf16[512,128]{1,0}, bf16[2048,128]{1,0}) all-gather-start(bf16[512,128]{1,0} %p),"
        " channel_id=1, replica_groups=[2,4]<=[8], dimensions={0}, use_global_device_ids=true"
    )
    assert start is not None
    assert (start.kind, start.phase) == ("all-gather", "start")
    assert (start.operand_bytes, start.result_bytes) == (512 * 128 * 2, 2048 * 128 * 2)
    assert start.groups == ((0, 1, 2, 3), (4, 5, 6, 7)) and start.group_size == 4
    done = parse_collective(
        "%all-gather-done = bf16[2048,128]{1,0} all-gather-done((bf16[512,128]{1,0}, bf16[2048,128]{1,0})"
        " %all-gather-start)"
    )
    assert done is not None
    assert (done.kind, done.phase, done.operand_bytes, done.result_bytes) == (
        "all-gather",
        "done",
        512 * 128 * 2,
        2048 * 128 * 2,
    )
    assert done.group_size == 4  # inferred from the sizes: the done states no groups
    # Nested tuple form ((operands), (results)) of a combined all-gather-start.
    nested = parse_collective(
        "%ags = ((f32[2]{0}, f32[4]{0}), (f32[8]{0}, f32[16]{0})) all-gather-start(f32[2]{0} %a, f32[4]{0} %b),"
        " replica_groups={{0,1,2,3}}, dimensions={0}"
    )
    assert nested is not None and (nested.operand_bytes, nested.result_bytes) == (24, 96)


def test_all_reduce_start_done() -> None:
    start = parse_collective(
        "%all-reduce-start = f32[1024]{0} all-reduce-start(f32[1024]{0} %p), channel_id=2,"
        " replica_groups={{0,1},{2,3}}, to_apply=%add"
    )
    assert start is not None
    assert (start.kind, start.phase, start.payload_bytes, start.group_size) == ("all-reduce", "start", 4096, 2)
    done = parse_collective("%all-reduce-done = f32[1024]{0} all-reduce-done(f32[1024]{0} %all-reduce-start)")
    assert done is not None and (done.kind, done.phase, done.payload_bytes) == ("all-reduce", "done", 4096)
    assert done.groups is None and done.group_size is None


def test_collective_permute_start_done_and_pairs() -> None:
    start = parse_collective(
        "%collective-permute-start = (f32[128]{0}, f32[128]{0}, u32[]{:S(2)}, u32[]{:S(2)})"
        " collective-permute-start(f32[128]{0} %p), channel_id=3, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}"
    )
    assert start is not None
    assert (start.kind, start.phase) == ("collective-permute", "start")
    assert (start.operand_bytes, start.result_bytes, start.payload_bytes) == (512, 512, 512)
    assert start.pairs == ((0, 1), (1, 2), (2, 3), (3, 0))
    assert start.groups is None
    assert collective_mesh_axes(start, [("data", 1), ("fsdp", 4)]) == ("fsdp",)
    done = parse_collective(
        "%collective-permute-done = f32[128]{0} collective-permute-done((f32[128]{0}, f32[128]{0}, u32[], u32[])"
        " %collective-permute-start)",
        "collective-permute",
    )
    assert done is not None and (done.phase, done.operand_bytes, done.result_bytes) == ("done", 512, 512)


def test_reduce_scatter_with_transposed_iota() -> None:
    op = parse_collective(
        "%reduce-scatter = f32[256]{0} reduce-scatter(f32[1024]{0} %p), channel_id=4,"
        " replica_groups=[2,4]<=[4,2]T(1,0), dimensions={0}, use_global_device_ids=true, to_apply=%add",
        "reduce-scatter",
    )
    assert op is not None
    assert (op.kind, op.payload_bytes, op.group_size) == ("reduce-scatter", 4096, 4)
    assert op.groups == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert collective_mesh_axes(op, [("fsdp", 4), ("tensor", 2)]) == ("fsdp",)


def test_async_start_wrapping_reduce_scatter() -> None:
    text = (
        "%reduce-scatter-start = ((f32[1024]{0}), f32[256]{0}) async-start(f32[1024]{0} %p),"
        ' async_execution_thread="main", calls=%reduce-scatter.1'
    )
    op = parse_collective(text)
    assert op is not None
    assert (op.kind, op.phase, op.operand_bytes, op.result_bytes, op.group_size) == (
        "reduce-scatter",
        "start",
        4096,
        1024,
        4,
    )
    done = parse_collective(
        "%reduce-scatter-done = f32[256]{0} async-done(((f32[1024]{0}), f32[256]{0}) %reduce-scatter-start),"
        " calls=%reduce-scatter.1"
    )
    assert done is not None and (done.kind, done.phase, done.operand_bytes, done.result_bytes) == (
        "reduce-scatter",
        "done",
        4096,
        1024,
    )


def test_tpu_async_collective_done() -> None:
    text = (
        "%async-collective-done.7 = bf16[1,2048,16,128]{3,1,2,0} async-collective-done("
        "(bf16[1,512,16,128]{3,1,2,0}, bf16[1,2048,16,128]{3,1,2,0}) %async-collective-start.7)"
    )
    assert collective_kind("async-collective-done", text) == (UNKNOWN_ASYNC, "done")
    op = parse_collective(text, "async-collective-done")
    assert op is not None and op.payload_bytes == 2048 * 16 * 128 * 2
    named = text + ', frontend_attributes={async_collective_name="all-gather-start.3"}'
    assert collective_kind("async-collective-done", named) == ("all-gather", "done")
    assert collective_kind("custom fusion", named) == ("all-gather", "done")


def test_ragged_all_to_all_and_collective_broadcast() -> None:
    ragged = parse_collective(
        "%ragged-all-to-all = bf16[1024,64]{1,0} ragged-all-to-all(bf16[512,64]{1,0} %input,"
        " bf16[1024,64]{1,0} %output, s64[4]{0} %io, s64[4]{0} %ss, s64[4]{0} %oo, s64[4]{0} %rs),"
        " channel_id=5, replica_groups={{0,1,2,3}}"
    )
    assert ragged is not None
    assert (ragged.kind, ragged.operand_bytes, ragged.result_bytes, ragged.group_size) == (
        "ragged-all-to-all",
        512 * 64 * 2,
        1024 * 64 * 2,
        4,
    )
    broadcast = parse_collective(
        "%cb = f32[128]{0} collective-broadcast(f32[128]{0} %p), channel_id=6, replica_groups={{0,1},{2,3}}"
    )
    assert broadcast is not None and (broadcast.kind, broadcast.payload_bytes, broadcast.group_size) == (
        "collective-broadcast",
        512,
        2,
    )


def test_send_recv() -> None:
    pairs = 'frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,2}}"}'
    send = parse_collective(f"%send = (f32[64]{{0}}, u32[], token[]) send(f32[64]{{0}} %p, token[] %t), {pairs}")
    assert send is not None
    assert (send.kind, send.phase, send.payload_bytes, send.pairs) == ("send", "start", 256, ((0, 1), (1, 2)))
    recv = parse_collective(f"%recv = (f32[64]{{0}}, u32[], token[]) recv(token[] %t), channel_id=6, {pairs}")
    assert recv is not None and (recv.kind, recv.phase, recv.operand_bytes, recv.payload_bytes) == (
        "recv",
        "start",
        0,
        256,
    )
    send_done = parse_collective("%send-done = token[] send-done((f32[64]{0}, u32[], token[]) %send), channel_id=6")
    assert send_done is not None and (send_done.kind, send_done.phase, send_done.payload_bytes) == ("send", "done", 256)
    recv_done = parse_collective(
        "%recv-done = (f32[64]{0}, token[]) recv-done((f32[64]{0}, u32[], token[]) %recv), channel_id=6", "recv-done"
    )
    assert recv_done is not None and (recv_done.kind, recv_done.phase, recv_done.payload_bytes) == (
        "recv",
        "done",
        256,
    )


def test_collective_kind_category_first() -> None:
    assert collective_kind("all-reduce-scatter fusion", FUSION_635) == ("all-reduce-scatter", "sync")
    assert collective_kind("all-gather", AG_277) == ("all-gather", "sync")
    assert collective_kind("all-gather", "") == ("all-gather", "sync")
    assert collective_kind("all-reduce", "%x = f32[4]{0} all-reduce-start(f32[4]{0} %p)") == ("all-reduce", "start")
    assert collective_kind("loop fusion", "%fusion.1 = f32[4]{0} fusion(f32[4]{0} %p), kind=kLoop") is None
    assert collective_kind("", "%c = f32[4]{0} collective-permute-done(f32[4]{0} %s)") == ("collective-permute", "done")


def test_replica_groups_empty_means_all_devices() -> None:
    op = parse_collective("%ar = f32[8]{0} all-reduce(f32[8]{0} %p), replica_groups={}, to_apply=%add")
    assert op is not None and op.groups == () and op.group_size is None
    assert collective_mesh_axes(op, MESH) == ("data", "fsdp", "tensor")


# ---------------------------------------------------------------------------------------------
# replica group syntaxes


def test_explicit_groups() -> None:
    assert expand_replica_groups("{{0,1},{2,3}}") == ((0, 1), (2, 3))
    assert expand_replica_groups("replica_groups={{0, 2}, {1, 3}}") == ((0, 2), (1, 3))
    assert expand_replica_groups("{}") == ()
    assert expand_replica_groups("{{0,a}}") is None
    assert expand_replica_groups("{{0,1}") is None


def test_iota_groups() -> None:
    assert expand_replica_groups("[1,4]<=[4]") == ((0, 1, 2, 3),)
    assert expand_replica_groups("[4,2]<=[8]") == ((0, 1), (2, 3), (4, 5), (6, 7))
    # iota(8).reshape(4,2) = [[0,1],[2,3],[4,5],[6,7]]; transposed: [[0,2,4,6],[1,3,5,7]].
    assert expand_replica_groups("[2,4]<=[4,2]T(1,0)") == ((0, 2, 4, 6), (1, 3, 5, 7))
    # a[i,j,k] = 4i+2j+k read in (k, j, i) order: 0,4 | 2,6 | 1,5 | 3,7.
    assert expand_replica_groups("[4,2]<=[2,2,2]T(2,1,0)") == ((0, 4), (2, 6), (1, 5), (3, 7))
    # a[i,j,k] read in (i, k, j) order: 0,2,1,3 | 4,6,5,7.
    assert expand_replica_groups("[2,4]<=[2,2,2]T(0,2,1)") == ((0, 2, 1, 3), (4, 6, 5, 7))
    # 16 devices as (data 2, fsdp 4, tensor 2); groups over data: stride 8.
    assert expand_replica_groups("[8,2]<=[2,8]T(1,0)") == tuple((i, i + 8) for i in range(8))
    assert expand_replica_groups("[2,4]<=[4]") is None  # sizes disagree
    assert expand_replica_groups("[2,2]<=[2,2]T(0,0)") is None  # not a permutation


def test_mesh_groups() -> None:
    assert expand_replica_groups("mesh['x'=2,'y'=4] {'y'}") == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert expand_replica_groups("mesh['x'=2,'y'=4] {'x'}") == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert expand_replica_groups("mesh['axis_0'=4] {'axis_0'}") == ((0, 1, 2, 3),)
    assert expand_replica_groups("mesh[x=2,y=2] {y}") == ((0, 1), (2, 3))  # XLA's unquoted printing
    full = parse_mesh_groups("mesh['data'=2,'fsdp'=4,'tensor'=2] {'fsdp','tensor'}")
    assert full is not None
    assert full.groups == (tuple(range(8)), tuple(range(8, 16)))
    assert full.axes == ("fsdp", "tensor")
    strided = parse_mesh_groups("mesh['data'=2,'fsdp'=4,'tensor'=2] {'tensor','data'}")
    assert strided is not None and strided.axes == ("data", "tensor")
    assert strided.groups == ((0, 1, 8, 9), (2, 3, 10, 11), (4, 5, 12, 13), (6, 7, 14, 15))
    # Sub-axes: x=8 as [x:(1)2, x:(2)2, x:(4)2] (major to minor); x:(2)2 varies in steps of 2.
    assert expand_replica_groups("mesh['x'=8] {'x':(2)2}") == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert expand_replica_groups("mesh['x'=8] {'x':(1)2,'x':(4)2}") == ((0, 1, 4, 5), (2, 3, 6, 7))
    # Explicit and iota device orders.
    assert expand_replica_groups("mesh['a'=2,'b'=2], device_ids=(0,2,1,3) {'b'}") == ((0, 2), (1, 3))
    assert expand_replica_groups("mesh['a'=2,'b'=2], device_ids=([2,2]T(1,0)) {'b'}") == ((0, 2), (1, 3))
    assert expand_replica_groups("mesh['a'=2] {'b'}") is None
    assert expand_replica_groups("maximal_mesh[device_id=0]") is None


def test_mesh_form_in_expression_names_axes() -> None:
    op = parse_collective(
        "%all-reduce-start = bf16[4096,14336]{1,0} all-reduce-start(bf16[4096,14336]{1,0} %gte), channel_id=1,"
        " replica_groups=mesh['axis_0'=1,'axis_1'=8] {'axis_1'}, use_global_device_ids=true, to_apply=%add.clone"
    )
    assert op is not None
    assert op.mesh_axes == ("axis_1",)
    assert op.groups == (tuple(range(8)),) and op.group_size == 8
    ag = parse_collective(
        "%ag = f32[8,4]{1,0} all-gather(f32[2,4]{1,0} %param), channel_id=1,"
        " replica_groups=mesh['data'=2,'fsdp'=4,'tensor'=2] {'fsdp'}, dimensions={0}, use_global_device_ids=true"
    )
    assert ag is not None and ag.mesh_axes == ("fsdp",) and ag.group_size == 4
    assert collective_mesh_axes(ag, MESH) == ("fsdp",)
    assert ag.groups is not None and ag.groups[0] == (0, 2, 4, 6)


# ---------------------------------------------------------------------------------------------
# mesh axes of a group


@pytest.mark.parametrize(
    ("group", "axes"),
    [
        ((0, 1), ("tensor",)),
        ((0, 2, 4, 6), ("fsdp",)),
        ((1, 3, 5, 7), ("fsdp",)),
        ((0, 8), ("data",)),
        ((0, 1, 2, 3, 4, 5, 6, 7), ("fsdp", "tensor")),
        ((0, 1, 8, 9), ("data", "tensor")),
        (tuple(range(16)), ("data", "fsdp", "tensor")),
        ((0, 4), ("fsdp",)),  # a strided subset of fsdp: still fsdp
        ((0, 3), ("fsdp", "tensor")),  # a diagonal: both vary
        ((5,), ()),
        ((0, 99), ()),  # ids outside the mesh are ignored
    ],
)
def test_mesh_axes_of_group(group: tuple[int, ...], axes: tuple[str, ...]) -> None:
    assert mesh_axes_of_group(group, MESH) == axes


def test_axes_label_and_collective_axes() -> None:
    assert axes_label(("fsdp",)) == "fsdp"
    assert axes_label(("fsdp", "tensor")) == "fsdp+tensor"
    assert axes_label(()) == ""
    assert mesh_axes_of_group((0, 1), []) == ()
    op = CollectiveOp("all-reduce", "sync", 4, 4, ((0, 8), (1, 9)), 2, None, None)
    assert collective_mesh_axes(op, MESH) == ("data",)


def test_operands_that_pick_a_tuple_element_keep_the_attributes() -> None:
    """MaxText's optimized HLO (libtpu 0.0.50) names tuple elements as operands (`%while.47#5`) and puts memory
    spaces in layouts (`S(1)`): the replica groups after them must still be read (they were lost before)."""
    line = (
        "%all-reduce.54 = (bf16[256]{0:T(256)(128)(2,1)S(1)}, bf16[2,256]{1,0:T(2,128)(2,1)S(1)}) "
        "all-reduce(%fusion.228#0, %while.47#5), channel_id=53, replica_groups=mesh['axis_0'=16] {'axis_0'}, "
        "use_global_device_ids=true, to_apply=%region_8.11.clone"
    )
    op = parse_collective(line)
    assert op is not None and op.group_size == 16 and op.groups == (tuple(range(16)),)
    assert op.result_bytes == (256 + 2 * 256) * 2


# ---------------------------------------------------------------------------------------------
# ragged all-to-all as MaxText's dropless MoE compiles it (issue 14)

# Trimmed from the optimized HLO of MaxText's train step, Mixtral 8x7B (2 layers, v5p-16, fsdp 4 x expert 2,
# dropless; libtpu 0.0.52), the layout of the sparsecore computation before the async one as in the Qwen3-30B-A3B
# expert 8 program: a dispatch as an async start wrapping the ragged all-to-all (groups only inside), a combine
# as a synchronous op printing its operands by name only, in a layer loop of 2.
RAGGED_HLO = (Path(__file__).parent / "data" / "hlo" / "moe_ragged_all_to_all.hlo.txt").read_text()
RAGGED_MESH = [("data", 1), ("fsdp", 4), ("expert", 2)]
ROWS = 4096 * 2 * 2048 * 2  # bf16[4096,2,2048]: a device's 2048 tokens x top_k 2 rows of emb 4096
WORST = 8192 * 2 * 2048 * 2  # bf16[8192,2,2048]: the receive buffer MaxText sizes for the worst case


def _ragged_line(name: str) -> str:
    return next(line for line in RAGGED_HLO.splitlines() if line.strip().startswith(f"%{name} = "))


def test_ragged_all_to_all_async_start_reads_its_tuple() -> None:
    """The start's operands are printed by name, but its result tuple states their types first:
    ((input, output, offsets x4), output, u32[], u32[]). The payload is the routed rows, not the output."""
    start = parse_collective(_ragged_line("ragged-all-to-all-start"))
    assert start is not None
    assert (start.kind, start.phase) == ("ragged-all-to-all", "start")
    assert (start.operand_bytes, start.result_bytes, start.payload_bytes) == (ROWS, WORST, ROWS)
    assert start.groups is None  # the async start states no groups: they are in %async_computation.16
    done = parse_collective(_ragged_line("ragged-all-to-all-done"))
    assert done is not None and (done.kind, done.phase, done.result_bytes) == ("ragged-all-to-all", "done", WORST)
    # XProf's text of the done types its operand, the start's tuple
    start_tuple = _ragged_line("ragged-all-to-all-start").split(" = ")[1].split(" async-start")[0]
    typed = _ragged_line("ragged-all-to-all-done").replace("async-done(%", f"async-done({start_tuple} %")
    typed_done = parse_collective(typed)
    assert typed_done is not None and (typed_done.operand_bytes, typed_done.payload_bytes) == (ROWS, ROWS)


def test_ragged_all_to_all_sync_with_untyped_operands() -> None:
    """The combine sends out of the worst-case buffer (its input) into the [tokens x top_k, emb] output: its
    payload is the output's size, which the text alone states; the input needs its definition's shape."""
    line = _ragged_line("ragged_all_to_all.163")
    alone = parse_collective(line)
    assert alone is not None and alone.group_size == 2
    assert (alone.operand_bytes, alone.result_bytes, alone.payload_bytes) == (0, ROWS, ROWS)  # was 0 bytes
    lines = [m for m in RAGGED_HLO.splitlines() if " = " in m]
    shapes = {m.split(" = ")[0].strip().removeprefix("ROOT ").lstrip("%"): result_shape(m) for m in lines}
    op = parse_collective(line, operand_shape=shapes.get)
    assert op is not None
    assert (op.operand_bytes, op.result_bytes, op.payload_bytes) == (WORST, ROWS, ROWS)
    assert collective_mesh_axes(op, RAGGED_MESH) == ("expert",)
    # a dispatch the other way round: every input row is sent, the output is the worst case
    dispatch = parse_collective(
        "%ragged_all_to_all.162 = bf16[8192,2,2048]{2,1,0:T(2,128)(2,1)} ragged-all-to-all(%copy-done.44, "
        "%broadcast_in_dim.979, %reduce.373, %fusion.774#1, %reduce.374, /*index=5*/%fusion.776#0), channel_id=1, "
        "replica_groups={{0,1},{2,3},{4,5},{6,7}}",
        operand_shape={"copy-done.44": result_shape("%copy-done.44 = bf16[4096,2,2048]{2,1,0} copy-done(%c)")}.get,
    )
    assert dispatch is not None and (dispatch.operand_bytes, dispatch.payload_bytes) == (ROWS, ROWS)


def test_operand_shapes_resolve_tuple_elements() -> None:
    tuple_def = result_shape(_ragged_line("fusion.835"))
    assert tuple_def is not None and tuple_def.elements is not None and len(tuple_def.elements) == 2
    op = parse_collective(
        "%ar = s32[2]{0} all-reduce(%fusion.835#0), replica_groups={{0,1}}, to_apply=%add",
        operand_shape={"fusion.835": tuple_def}.get,
    )
    assert op is not None and op.operand_bytes == 8
    missing = parse_collective(
        "%ar = s32[2]{0} all-reduce(%fusion.835#7), replica_groups={{0,1}}, to_apply=%add",
        operand_shape={"fusion.835": tuple_def}.get,
    )
    assert missing is not None and missing.operand_bytes == 0 and missing.payload_bytes == 8  # from the result
    assert result_shape("not an instruction") is None


def test_ragged_all_to_all_program_walk_per_step_and_axis() -> None:
    """The walk finds the wrapped computation after a `}, execution_thread="sparsecore"` one (before, it was read
    as part of the sparsecore computation: the start came out on no axis), takes the replica groups from the
    wrapped ragged-all-to-all, types the synchronous one's operands from their definitions, counts each per loop
    trip, and the summary's V (routed rows x the group) is ASAP's dispatch-and-combine figure."""
    comps = computations(RAGGED_HLO)
    assert {"async_computation.95", "async_computation.16", "region_1.57_spmd", "main.231_spmd"} <= set(comps)
    assert not any("ragged" in line for line in comps["async_computation.95"].lines)
    w = walk(RAGGED_HLO)
    ragged = {c.op.name: c for c in w.collectives if c.kind == "ragged-all-to-all"}
    assert set(ragged) == {"ragged-all-to-all-start", "ragged_all_to_all.163"}  # each once: not the wrapped op
    assert len(w.collectives) == 2
    for c in ragged.values():
        assert c.count == 2 and c.op.group_size == 2 and c.payload_bytes == ROWS
        assert collective_mesh_axes(c.op, RAGGED_MESH) == ("expert",)
    assert (ragged["ragged-all-to-all-start"].op.operand_bytes, ragged["ragged-all-to-all-start"].op.result_bytes) == (
        ROWS,
        WORST,
    )
    assert (ragged["ragged_all_to_all.163"].op.operand_bytes, ragged["ragged_all_to_all.163"].op.result_bytes) == (
        WORST,
        ROWS,
    )
    (summary,) = summarize(w, RAGGED_MESH)
    assert (summary.kind, summary.axes, summary.count, summary.group_size) == ("ragged-all-to-all", ("expert",), 4, 2)
    assert summary.total_bytes == 4 * ROWS
    assert summary.v_bytes == 2 * ROWS and summary.to_json()["v_bytes"] == 2 * ROWS


def test_async_done_and_update_of_an_unnamed_wrapper_are_not_entered_twice() -> None:
    """A wrapper whose text names no collective is entered as a call: its start only, so the collective inside
    counts once even when the done also names the computation."""
    hlo = """HloModule m

%wrapped (p0: f32[8], p1: f32[16]) -> f32[16] {
  %p0 = f32[8]{0} parameter(0)
  %p1 = f32[16]{0} parameter(1)
  ROOT %ragged_all_to_all.1 = f32[16]{0} ragged-all-to-all(%p0, %p1, %p2, %p3, %p4, %p5), replica_groups={{0,1}}
}

ENTRY %main (a: f32[8]) -> f32[16] {
  %a = f32[8]{0} parameter(0)
  %b = f32[16]{0} parameter(1)
  %async-start.1 = ((f32[8]{0}, f32[16]{0}), f32[16]{0}, u32[]{:S(2)}) async-start(%a, %b), calls=%wrapped
  %async-update.1 = ((f32[8]{0}, f32[16]{0}), f32[16]{0}, u32[]{:S(2)}) async-update(%async-start.1), calls=%wrapped
  ROOT %async-done.1 = f32[16]{0} async-done(%async-update.1), calls=%wrapped
}
"""
    w = walk(hlo)
    assert [(c.op.name, c.count, c.payload_bytes, c.op.group_size) for c in w.collectives] == [
        ("ragged_all_to_all.1", 1, 32, 2)
    ]


# ---------------------------------------------------------------------------------------------
# collectives offloaded to the SparseCores, as tpu7x compiles them (issue 14)

# Trimmed from the optimized HLO of MaxText's train step, llama3.1-70b on tpu7x-512 (fsdp 64 x context 8,
# seq 131072; jax 0.12.0.1, libtpu 0.0.52; /work/scratch/dumps/l70b-full): the real offloaded collectives with
# their wrappers (backend configs and metadata cut; the loops' tuples cut to what the collectives use). Each is
# `X.call-start = ((), (), (s32 scratch...)) async-start(), async_execution_thread="sparsecore",
# calls=%async_computation.N`, an `X.call-update = ((input), output, (scratch)) async-update(X.call-start, %input)`
# and an `X.call-done`; %async_computation.N is a custom-call whose `called_computations={...}` holds the
# collective and its replica groups (`mesh['axis_0'=512] {'axis_0'}`: all 512 devices, fsdp x context;
# `mesh['axis_0'=64,'axis_1'=8] {'axis_1'}`: the context axis). In the layer loop (80): a weight all-gather and
# its gradient's reduce-scatter over fsdp+context and a K/V all-gather over context; in the loss loop (4): an
# all-reduce over all devices.
SPARSECORE_HLO = (Path(__file__).parent / "data" / "hlo" / "tpu7x_sparsecore_collectives.hlo.txt").read_text()
TPU7X_MESH = [("data", 1), ("fsdp", 64), ("context", 8), ("tensor", 1)]


def test_sparsecore_offloaded_collectives_land_on_mesh_axes() -> None:
    """Before, each came out twice on no axis: once at its start (the scratch tuple's bytes as its payload) and
    once at its update (the data plus the scratch), with no replica groups (they are two calls down): 383 GB of
    the 70B program's all-gathers and reduce-scatters on axis 'none'. Now once, at the start, with the kind,
    sizes and groups of the collective inside."""
    w = walk(SPARSECORE_HLO)
    assert not w.unknown_trip_counts
    got = {c.op.name: c for c in w.collectives}
    assert set(got) == {
        "all-gather.195.cloned.1.call-start",
        "all-gather.199.cloned.1.call-start",
        "reduce-scatter.58.cloned.1.call-start",
        "all-reduce.74.cloned.1.call-start",
    }
    weights = 8192 * 28672 * 2  # bf16[1,8192,28672]: one layer's MLP weight, gathered from 512 shards of 16 rows
    kv = 8 * 131072 * 128 * 2  # bf16[1,8,131072,128]: K or V over the whole sequence, from 8 context shards
    embed = 8192 * 128256 * 2  # bf16[8192,128256]
    expected = {
        "all-gather.195.cloned.1.call-start": ("all-gather", 80, weights // 512, weights, weights, 512),
        "all-gather.199.cloned.1.call-start": ("all-gather", 80, kv // 8, kv, kv, 8),
        "reduce-scatter.58.cloned.1.call-start": ("reduce-scatter", 80, weights, weights // 512, weights, 512),
        "all-reduce.74.cloned.1.call-start": ("all-reduce", 4, embed, embed, embed, 512),
    }
    for name, (kind, count, operand, result, payload, group) in expected.items():
        c = got[name]
        assert (c.kind, c.count, c.op.operand_bytes, c.op.result_bytes, c.payload_bytes, c.op.group_size) == (
            kind,
            count,
            operand,
            result,
            payload,
            group,
        ), name
    axes = {name: collective_mesh_axes(c.op, TPU7X_MESH) for name, c in got.items()}
    assert axes["all-gather.199.cloned.1.call-start"] == ("context",)
    assert {a for n, a in axes.items() if n != "all-gather.199.cloned.1.call-start"} == {("fsdp", "context")}
    rows = summarize(w, TPU7X_MESH)
    assert {axes_label(r.axes) for r in rows} == {"context", "fsdp+context"}
    assert sum(r.total_bytes for r in rows) == 80 * (2 * weights + kv) + 4 * embed  # 105 GB, none of it scratch


def test_sparsecore_wrapper_named_after_no_collective_counts_the_inner_one() -> None:
    """A start whose name does not say the kind is no collective itself: the walk enters its computation and,
    through the custom-call's `called_computations`, counts the collective inside, once (update and done
    skipped), with the same sizes and axes."""
    hlo = SPARSECORE_HLO
    for name in ("all-gather.195", "all-gather.199", "reduce-scatter.58", "all-reduce.74"):
        hlo = hlo.replace(f"%{name}.cloned.1.call-", f"%offload.{name.split('.')[1]}.call-")
    w = walk(hlo)
    got = {
        c.op.name: (c.kind, c.op.phase, c.count, c.payload_bytes, collective_mesh_axes(c.op, TPU7X_MESH))
        for c in w.collectives
    }
    weights, kv, embed = 8192 * 28672 * 2, 8 * 131072 * 128 * 2, 8192 * 128256 * 2
    assert got == {
        "all-gather.221": ("all-gather", "sync", 80, weights, ("fsdp", "context")),
        "all-gather.230": ("all-gather", "sync", 80, kv, ("context",)),
        "reduce-scatter.69": ("reduce-scatter", "sync", 80, weights, ("fsdp", "context")),
        "all-reduce.75": ("all-reduce", "sync", 4, embed, ("fsdp", "context")),
    }
