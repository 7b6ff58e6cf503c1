"""Synthetic TPU device profiles (``<host>.xplane.pb``) whose ground truth is known exactly.

Each scenario is one "layer block" of HLO ops (a scanned decoder layer, forward and
backward, plus its collectives) that a training step runs ``scale`` times, followed by a
gap in which the device is idle. Every op is described by its duration and by the
fraction of the chip's peak FLOP rate and peak HBM bandwidth it achieves; its ``flops``
and ``bytes_accessed`` are derived from those and the peaks, so the op's roofline verdict
(Compute when ``flop_util >= hbm_util``) and its roofline efficiency do not depend on
the peaks chosen. Collectives instead carry the bytes of the shapes in their HLO text
(operand + result), so payloads parsed from ``hlo_op_expression`` are consistent with
``bytes_accessed``.

The written XSpace is what XProf 2.24.2 needs to fill overview_page, roofline_model,
hlo_stats, op_profile and framework_op_stats (see README.md in this folder for what XProf
reports from it):

- one plane ``/device:TPU:<i>`` per local device, with plane stats
  ``device_type_string``, ``peak_teraflops_per_second``, ``peak_hbm_bw_gigabytes_per_second``;
- line ``Steps``: one event per step with stats ``group_id`` and ``step_num``
  (XProf ignores steps without ``group_id``);
- line ``XLA Modules``: one ``jit_train_step(<program_id>)`` event per step;
- line ``XLA Ops``: one event per op execution with stat ``group_id`` (XProf counts no
  step when the ops lack it); the op's event metadata is named with the full HLO
  expression and has ``display_name`` = the HLO instruction name (XProf takes
  ``hlo_op_expression`` from the metadata name when a display name is present) and stats
  ``program_id``, ``symbol_id``, ``hlo_category``, ``flops``, ``model_flops``,
  ``bytes_accessed``, ``tf_op`` and ``long_name``.

Usage: ``python tests/profiles/synth.py OUT_DIR --scenario comm --hosts 2``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__:
    from .xspace import PlaneBuilder, XSpace
else:  # run as a script: python tests/profiles/synth.py
    from xspace import PlaneBuilder, XSpace  # type: ignore[no-redef]

__all__ = [
    "COLLECTIVE_CATEGORIES",
    "GROUND_TRUTH",
    "PROGRAM_ID",
    "SCENARIOS",
    "Collective",
    "GroundTruth",
    "Mesh",
    "OpSpec",
    "OpTruth",
    "Scenario",
    "ground_truth",
    "scenario_ops",
    "write_profile",
]

PS_PER_US = 1_000_000
START_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z: fixed, so output is byte-for-byte reproducible
PROGRAM_ID = 2041036616644817336  # the jit(train_step) HLO module's program id (a real-looking 64-bit id)
MODULE_NAME = "jit_train_step"

# hlo_category values that are collectives. XProf labels all of them "HBM" in roofline_model.
COLLECTIVE_CATEGORIES = frozenset(
    {
        "all-gather",
        "all-gather-start",
        "all-gather-done",
        "all-reduce",
        "all-reduce-start",
        "all-reduce-done",
        "reduce-scatter",
        "all-reduce-scatter fusion",
        "all-to-all",
        "collective-permute",
        "collective-permute-start",
        "collective-permute-done",
    }
)

# Layout suffixes as TPU HLO prints them (tiles of 8x128; bf16 packs two rows).
_TILE = {"bf16": "T(8,128)(2,1)", "f32": "T(8,128)", "s32": "T(8,128)"}
_DTYPE_BYTES = {"bf16": 2, "f32": 4, "s32": 4}


def _shape(dtype: str, dims: Sequence[int]) -> str:
    """``bf16[4096,14336]{1,0:T(8,128)(2,1)}``: a TPU-style HLO shape with its layout."""
    minor_to_major = ",".join(str(i) for i in reversed(range(len(dims))))
    return f"{dtype}[{','.join(str(d) for d in dims)}]{{{minor_to_major}:{_TILE[dtype]}}}"


def _nbytes(dtype: str, dims: Sequence[int]) -> int:
    return _DTYPE_BYTES[dtype] * math.prod(dims)


# ---------------------------------------------------------------------------------------------
# The logical mesh over all devices and the three replica_groups syntaxes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mesh:
    """The slice's logical mesh: ``data`` x ``fsdp`` devices, device id = d * fsdp + f.

    ``fsdp`` groups are contiguous device ids ({0,1},{2,3} for 2x2); ``data`` groups are
    strided ({0,2},{1,3}).
    """

    data: int
    fsdp: int

    @classmethod
    def for_devices(cls, n: int) -> Mesh:
        data = 2 if n >= 4 and n % 2 == 0 else 1
        return cls(data=data, fsdp=n // data)

    @property
    def devices(self) -> int:
        return self.data * self.fsdp

    def size(self, axis: str) -> int:
        return {"data": self.data, "fsdp": self.fsdp}[axis]

    def groups(self, axis: str) -> tuple[tuple[int, ...], ...]:
        """The replica groups of a collective over ``axis``."""
        if axis == "fsdp":
            return tuple(tuple(d * self.fsdp + f for f in range(self.fsdp)) for d in range(self.data))
        if axis == "data":
            return tuple(tuple(d * self.fsdp + f for d in range(self.data)) for f in range(self.fsdp))
        raise ValueError(f"unknown mesh axis {axis!r}")

    def replica_groups(self, axis: str, syntax: str) -> str:
        """``replica_groups=...`` for ``axis`` in one of the syntaxes XLA prints.

        explicit: ``{{0,1},{2,3}}``; iota: ``[2,2]<=[4]`` (fsdp) or the transposed
        ``[2,2]<=[2,2]T(1,0)`` (data); mesh: ``mesh['axis_0'=2,'axis_1'=2] {'axis_1'}``
        (XLA's named-axis form, axis names as the compiler prints them); mesh_named: the
        same with the user's axis names, ``mesh['data'=2,'fsdp'=2] {'fsdp'}``.
        """
        n_groups = self.devices // self.size(axis)
        if syntax == "explicit":
            inner = ",".join("{" + ",".join(str(i) for i in g) + "}" for g in self.groups(axis))
            return "{" + inner + "}"
        if syntax == "iota":
            if axis == "fsdp":
                return f"[{n_groups},{self.fsdp}]<=[{self.devices}]"
            return f"[{n_groups},{self.data}]<=[{self.data},{self.fsdp}]T(1,0)"
        if syntax in ("mesh", "mesh_named"):
            names = ("axis_0", "axis_1") if syntax == "mesh" else ("data", "fsdp")
            used = names[0] if axis == "data" else names[1]
            return f"mesh['{names[0]}'={self.data},'{names[1]}'={self.fsdp}] {{'{used}'}}"
        raise ValueError(f"unknown replica_groups syntax {syntax!r}")


@dataclass(frozen=True)
class Collective:
    """What a collective op does, as the analyzer should recover it from the HLO text."""

    kind: str  # all-gather, reduce-scatter, all-reduce (the async pair and the fusion map to these)
    axis: str  # mesh axis it runs over
    group_size: int
    groups: tuple[tuple[int, ...], ...]
    syntax: str | None  # replica_groups syntax in hlo_op_expression; None when the text has none
    result_bytes: int  # bytes of the (array) result shape, per device
    operand_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "axis": self.axis,
            "group_size": self.group_size,
            "num_groups": len(self.groups),
            "groups": [list(g) for g in self.groups],
            "syntax": self.syntax,
            "result_bytes": self.result_bytes,
            "operand_bytes": self.operand_bytes,
        }


@dataclass(frozen=True)
class OpSpec:
    """One HLO op of a scenario's layer block.

    ``flop_util``/``hbm_util`` are the fractions of peak FLOP/s and peak HBM bandwidth the
    op achieves; ``bytes_accessed`` overrides ``hbm_util`` (collectives use their shapes).
    """

    name: str
    category: str
    duration_us: float
    tf_op: str
    expression: str
    flop_util: float = 0.0
    hbm_util: float = 0.0
    bytes_accessed: int | None = None
    collective: Collective | None = None

    def flops(self, peak_tflops: float) -> int:
        return round(self.flop_util * peak_tflops * 1e12 * self.duration_us * 1e-6)

    def bytes(self, peak_hbm_gbps: float) -> int:
        if self.bytes_accessed is not None:
            return self.bytes_accessed
        return round(self.hbm_util * peak_hbm_gbps * 1e9 * self.duration_us * 1e-6)


# ---------------------------------------------------------------------------------------------
# Scenario op tables
# ---------------------------------------------------------------------------------------------

# A llama-3-8B-like layer per chip: 2 x 2048 tokens, d_model 4096, MLP 14336.
_B, _S, _E, _M = 2, 2048, 4096, 14336
_JIT = "jit(train_step)/jit(main)"
_FWD = f"{_JIT}/jvp(Transformer)/decoder/layers"
_BWD = f"{_JIT}/transpose(jvp(Transformer))/decoder/layers"
_DOT = "dot_general[dimension_numbers=(((2,), (0,)), ((), ())) precision=None preferred_element_type=bfloat16]"
_DOT_W = "dot_general[dimension_numbers=(((0, 1), (0, 1)), ((), ())) precision=None preferred_element_type=bfloat16]"
_SPLASH = (
    "self_attention/AttentionOp_0/AttentionOp_0.apply_attention/AttentionOp_0.tpu_flash_attention/"
    "jit(shmap_body)/vmap(jit(_splash_attention))"
)


def _conv(
    name: str,
    us: float,
    fu: float,
    hu: float,
    tf_op: str,
    out: Sequence[int],
    lhs: Sequence[int],
    rhs: Sequence[int],
    calls: str,
) -> OpSpec:
    expr = (
        f"%{name} = {_shape('bf16', out)} fusion({_shape('bf16', lhs)} %copy-done.49, "
        f"{_shape('bf16', rhs)} %get-tuple-element.1703), kind=kOutput, calls=%{calls}"
    )
    return OpSpec(name, "convolution fusion", us, tf_op, expr, flop_util=fu, hbm_util=hu)


def _loop(
    name: str,
    us: float,
    fu: float,
    hu: float,
    tf_op: str,
    out: Sequence[int],
    dtype: str = "bf16",
    category: str = "loop fusion",
) -> OpSpec:
    expr = (
        f"%{name} = {_shape(dtype, out)} fusion({_shape(dtype, out)} %param.9, "
        f"{_shape(dtype, out)} %get-tuple-element.230), kind=kLoop, calls=%fused_computation.{name.split('.')[-1]}"
    )
    return OpSpec(name, category, us, tf_op, expr, flop_util=fu, hbm_util=hu)


def _dus(name: str, us: float, hu: float) -> OpSpec:
    stacked, update = (16, _E, _M // 16), (1, _E, _M // 16)
    expr = (
        f"%{name} = {_shape('f32', stacked)} dynamic-update-slice({_shape('f32', stacked)} %get-tuple-element.1342, "
        f"{_shape('f32', update)} %copy.490, s32[]{{:T(128)S(6)}} %select.145, s32[]{{:T(128)}} %constant.756, "
        f"s32[]{{:T(128)}} %constant.756)"
    )
    tf_op = f"{_JIT}/transpose(jvp(Transformer))/decoder/while/body/dynamic_update_slice:"
    return OpSpec(name, "dynamic-update-slice", us, tf_op, expr, flop_util=0.0, hbm_util=hu)


def _copy(name: str, us: float, hu: float) -> OpSpec:
    dims = (1, _E, _M // 16)
    expr = f"%{name} = {_shape('f32', dims)} copy({_shape('f32', (1, _E, _M // 16))} %fusion.636)"
    tf_op = f"{_JIT}/transpose(jvp(Transformer))/decoder/while/body/dynamic_update_slice:"
    return OpSpec(name, "data formatting", us, tf_op, expr, hbm_util=hu)


def _custom_call(name: str, us: float, fu: float, hu: float, kernel: str, backward: bool) -> OpSpec:
    q = (_B * 16, _S, 128)
    expr = (
        f"%{name} = ({_shape('bf16', q)}, {_shape('f32', (_B * 16, _S, 128))}) custom-call("
        f"{_shape('bf16', q)} %copy.478, {_shape('bf16', q)} %copy.479, {_shape('bf16', q)} %copy.480), "
        f'custom_call_target="tpu_custom_call", backend_config={{"custom_call_config": {{"kernel_name": "{kernel}"}}}}'
    )
    base = _BWD + "/checkpoint/rematted_computation" if backward else _FWD
    tf_op = f"{base}/{_SPLASH}/{kernel}/jit(wrapped)/pallas_call:"
    return OpSpec(name, "custom-call", us, tf_op, expr, flop_util=fu, hbm_util=hu)


def _weight_shard(mesh: Mesh) -> tuple[tuple[int, int], tuple[int, int]]:
    """(sharded, full) shapes of an MLP weight sharded over fsdp on its first dimension."""
    return (-(-_E // mesh.fsdp), _M), (_E, _M)


def _all_gather(name: str, us: float, mesh: Mesh, syntax: str, tf_op: str, channel: int) -> OpSpec:
    shard, full = _weight_shard(mesh)
    expr = (
        f"%{name} = {_shape('bf16', full)} all-gather({_shape('bf16', shard)} %fusion.{channel + 500}), "
        f"channel_id={channel}, replica_groups={mesh.replica_groups('fsdp', syntax)}, dimensions={{0}}, "
        f"use_global_device_ids=true"
    )
    coll = Collective(
        "all-gather", "fsdp", mesh.fsdp, mesh.groups("fsdp"), syntax, _nbytes("bf16", full), _nbytes("bf16", shard)
    )
    return OpSpec(
        name, "all-gather", us, tf_op, expr, bytes_accessed=coll.result_bytes + coll.operand_bytes, collective=coll
    )


def _all_gather_async(
    start: str, done: str, start_us: float, done_us: float, mesh: Mesh, syntax: str, tf_op: str, channel: int
) -> list[OpSpec]:
    shard, full = _weight_shard(mesh)
    pair = f"({_shape('bf16', shard)}, {_shape('bf16', full)})"
    start_expr = (
        f"%{start} = {pair} all-gather-start({_shape('bf16', shard)} %fusion.{channel + 500}), "
        f"channel_id={channel}, replica_groups={mesh.replica_groups('fsdp', syntax)}, dimensions={{0}}, "
        f"use_global_device_ids=true"
    )
    done_expr = f"%{done} = {_shape('bf16', full)} all-gather-done({pair} %{start})"
    rb, ob = _nbytes("bf16", full), _nbytes("bf16", shard)
    coll = Collective("all-gather", "fsdp", mesh.fsdp, mesh.groups("fsdp"), syntax, rb, ob)
    done_coll = Collective("all-gather", "fsdp", mesh.fsdp, mesh.groups("fsdp"), None, rb, ob)
    return [
        OpSpec(start, "all-gather-start", start_us, tf_op, start_expr, bytes_accessed=ob, collective=coll),
        OpSpec(done, "all-gather-done", done_us, tf_op, done_expr, bytes_accessed=rb, collective=done_coll),
    ]


def _reduce_scatter(name: str, us: float, mesh: Mesh, syntax: str, tf_op: str, channel: int) -> OpSpec:
    shard, full = _weight_shard(mesh)
    expr = (
        f"%{name} = {_shape('bf16', shard)} reduce-scatter({_shape('bf16', full)} %fusion.{channel + 600}), "
        f"channel_id={channel}, replica_groups={mesh.replica_groups('fsdp', syntax)}, use_global_device_ids=true, "
        f"dimensions={{0}}, to_apply=%add.{channel}.clone"
    )
    coll = Collective(
        "reduce-scatter", "fsdp", mesh.fsdp, mesh.groups("fsdp"), syntax, _nbytes("bf16", shard), _nbytes("bf16", full)
    )
    return OpSpec(
        name, "reduce-scatter", us, tf_op, expr, bytes_accessed=coll.result_bytes + coll.operand_bytes, collective=coll
    )


def _all_reduce_scatter_fusion(name: str, us: float, mesh: Mesh, tf_op: str, calls: str) -> OpSpec:
    """TPU's reduce-scatter: a kCustom fusion calling %all-reduce-scatter; no replica_groups in its text."""
    shard, full = _weight_shard(mesh)
    expr = (
        f"%{name} = {_shape('bf16', shard)} fusion({_shape('bf16', full)} %get-tuple-element.1182), "
        f"kind=kCustom, calls=%{calls}"
    )
    coll = Collective(
        "reduce-scatter", "fsdp", mesh.fsdp, mesh.groups("fsdp"), None, _nbytes("bf16", shard), _nbytes("bf16", full)
    )
    return OpSpec(
        name,
        "all-reduce-scatter fusion",
        us,
        tf_op,
        expr,
        bytes_accessed=coll.result_bytes + coll.operand_bytes,
        collective=coll,
    )


def _all_reduce(name: str, us: float, mesh: Mesh, syntax: str, tf_op: str, channel: int, dims: Sequence[int]) -> OpSpec:
    expr = (
        f"%{name} = {_shape('f32', dims)} all-reduce({_shape('f32', dims)} %fusion.{channel + 700}), "
        f"channel_id={channel}, replica_groups={mesh.replica_groups('data', syntax)}, use_global_device_ids=true, "
        f"to_apply=%region_{channel}.clone"
    )
    nb = _nbytes("f32", dims)
    coll = Collective("all-reduce", "data", mesh.data, mesh.groups("data"), syntax, nb, nb)
    return OpSpec(name, "all-reduce", us, tf_op, expr, bytes_accessed=2 * nb, collective=coll)


def _mlp_convs(scale_us: float = 1.0, fu: float = 0.78) -> list[OpSpec]:
    """Forward and backward MLP matmuls; durations are multiplied by ``scale_us``."""
    x, h, wi, wo = (_B, _S, _E), (_B, _S, _M), (_E, _M), (_M, _E)
    return [
        _conv("fusion.556", 1400 * scale_us, fu, 0.10, f"{_FWD}/mlp/wi_0/{_DOT}:", h, x, wi, "fused_computation.45"),
        _conv("fusion.557", 1400 * scale_us, fu, 0.10, f"{_FWD}/mlp/wi_1/{_DOT}:", h, x, wi, "fused_computation.46"),
        _conv(
            "fusion.560", 1400 * scale_us, fu - 0.02, 0.10, f"{_FWD}/mlp/wo/{_DOT}:", x, h, wo, "fused_computation.49"
        ),
        _conv(
            "fusion.571",
            700 * scale_us,
            fu - 0.08,
            0.12,
            f"{_FWD}/self_attention/query/{_DOT}:",
            x,
            x,
            (_E, _E),
            "fused_computation.60",
        ),
        _conv(
            "fusion.590", 1400 * scale_us, fu - 0.04, 0.11, f"{_BWD}/mlp/wi_0/{_DOT}:", x, h, wo, "fused_computation.81"
        ),
        _conv(
            "fusion.591",
            700 * scale_us,
            fu - 0.06,
            0.14,
            f"{_BWD}/mlp/wi_0/{_DOT_W}:",
            wi,
            x,
            h,
            "fused_computation.82",
        ),
    ]


def _compute_block(mesh: Mesh, *, implausible: bool = False) -> list[OpSpec]:
    """Matmul-dominated layer: 70% of device time in convolution fusions (96% of a step is busy)."""
    ops = _mlp_convs()  # 7000 us
    ops += [
        _loop("fusion.601", 500, 0.01, 0.80, f"{_FWD}/mlp/mul:", (_B, _S, _M)),
        _loop("fusion.602", 300, 0.02, 0.75, f"{_FWD}/pre_self_attention_norm/rsqrt:", (_B, _S, _E), "f32"),
        _loop("fusion.603", 200, 0.01, 0.78, f"{_BWD}/mlp/mul:", (_B, _S, _M)),
    ]
    if implausible:
        # Splash-attention kernels whose reported flops exceed what the chip can do in their time.
        ops += [
            _custom_call("splash_mha_fwd_residuals", 300, 1.60, 0.05, "splash_mha_fwd_residuals", backward=False),
            _custom_call("splash_mha_dkv_segmented", 300, 1.25, 0.05, "splash_mha_dkv_segmented", backward=True),
        ]
    else:
        ops.append(
            _custom_call("splash_mha_fwd_residuals", 600, 0.55, 0.05, "splash_mha_fwd_residuals", backward=False)
        )
    ops += [
        _all_gather("all-gather.277", 300, mesh, "iota", f"{_FWD}/mlp/wi_0/{_DOT}:", channel=91),
        _all_reduce_scatter_fusion("fusion.635", 300, mesh, f"{_BWD}/mlp/wi_0/{_DOT_W}:", "all-reduce-scatter.clone"),
        _all_reduce("all-reduce.23", 100, mesh, "explicit", f"{_BWD}/decoder_norm/reduce_sum[axes=(0, 1)]:", 23, (_E,)),
        _dus("dynamic-update-slice.33", 200, 0.70),
        _copy("copy.488", 100, 0.60),
    ]
    return ops  # 9600 us busy


def _hbm_block(mesh: Mesh) -> list[OpSpec]:
    """Memory-bound layer: loop fusions 45% and dynamic-update-slice 20% of device time."""
    return [
        _loop("fusion.339", 1500, 0.02, 0.78, f"{_JIT}/reduce_sum[axes=(0, 1, 2)]:", (_M // 4, 16, _E), "f32"),
        _loop("fusion.340", 1200, 0.01, 0.74, f"{_JIT}/optimizer/adam/mul:", (_E, _M), "f32"),
        _loop("fusion.341", 1000, 0.02, 0.80, f"{_FWD}/pre_self_attention_norm/rsqrt:", (_B, _S, _E), "f32"),
        _loop("fusion.342", 800, 0.01, 0.70, f"{_BWD}/mlp/mul:", (_B, _S, _M)),
        _dus("dynamic-update-slice.33", 1200, 0.45),
        _dus("dynamic-update-slice.31", 800, 0.40),
        _conv(
            "fusion.556",
            1200,
            0.62,
            0.15,
            f"{_FWD}/mlp/wi_0/{_DOT}:",
            (_B, _S, _M),
            (_B, _S, _E),
            (_E, _M),
            "fused_computation.45",
        ),
        _conv(
            "fusion.590",
            800,
            0.58,
            0.16,
            f"{_BWD}/mlp/wi_0/{_DOT}:",
            (_B, _S, _E),
            (_B, _S, _M),
            (_M, _E),
            "fused_computation.81",
        ),
        _copy("copy.488", 500, 0.70),
        _copy("copy.490", 100, 0.65),
        _all_reduce("all-reduce.23", 300, mesh, "iota", f"{_BWD}/decoder_norm/reduce_sum[axes=(0, 1)]:", 23, (_E, 128)),
        _all_gather("all-gather.277", 400, mesh, "explicit", f"{_FWD}/mlp/wi_0/{_DOT}:", channel=91),
    ]  # 9800 us busy


def _comm_block(mesh: Mesh, *, syntax: dict[str, str]) -> list[OpSpec]:
    """Collective-heavy layer: 45% of device time in collectives, in every replica_groups syntax."""
    ops = _mlp_convs(scale_us=0.5, fu=0.62)  # 3500 us; matmuls slowed by the collectives they wait on
    ops += [
        _loop("fusion.601", 700, 0.01, 0.80, f"{_FWD}/mlp/mul:", (_B, _S, _M)),
        _loop("fusion.603", 500, 0.01, 0.78, f"{_BWD}/mlp/mul:", (_B, _S, _M)),
        _copy("copy.488", 300, 0.60),
        _all_gather("all-gather.277", 800, mesh, syntax["all-gather"], f"{_FWD}/mlp/wi_0/{_DOT}:", channel=91),
    ]
    ops += _all_gather_async(
        "all-gather-start.8",
        "all-gather-done.8",
        150,
        1050,
        mesh,
        syntax["all-gather-start"],
        f"{_FWD}/mlp/wi_1/{_DOT}:",
        channel=97,
    )
    ops += [
        _reduce_scatter("reduce-scatter.12", 900, mesh, syntax["reduce-scatter"], f"{_BWD}/mlp/wo/{_DOT_W}:", 31),
        _all_reduce_scatter_fusion("fusion.635", 1000, mesh, f"{_BWD}/mlp/wi_0/{_DOT_W}:", "all-reduce-scatter.clone"),
        _all_reduce(
            "all-reduce.23",
            600,
            mesh,
            syntax["all-reduce"],
            f"{_BWD}/mlp/wi_0/{_DOT_W}:",
            23,
            (-(-_E // mesh.fsdp), _M),
        ),
    ]
    return ops  # 9500 us busy, 4500 us of it collectives


_COMM_SYNTAX = {
    "all-gather": "iota",
    "all-gather-start": "explicit",
    "reduce-scatter": "mesh",
    "all-reduce": "iota",
}
_COMM_MESH_SYNTAX = {
    "all-gather": "mesh",
    "all-gather-start": "mesh",
    "reduce-scatter": "mesh_named",
    "all-reduce": "mesh",
}


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    block: Callable[[Mesh], list[OpSpec]]
    idle_us: float  # idle gap at the end of each step, per layer block (so it scales with `scale`)
    has_steps: bool = True


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            "compute",
            "matmul convolution fusions dominate; high FLOP rate; XProf program bound_by Compute",
            _compute_block,
            idle_us=400,
        ),
        Scenario(
            "hbm",
            "loop fusions and dynamic-update-slice dominate; low operational intensity; bound_by HBM",
            _hbm_block,
            idle_us=200,
        ),
        Scenario(
            "comm",
            "45% of device time in collectives (sync and async all-gather, reduce-scatter, "
            "all-reduce-scatter fusion, all-reduce); replica_groups in all three syntaxes: explicit, "
            "iota (plain and transposed) and mesh",
            lambda m: _comm_block(m, syntax=_COMM_SYNTAX),
            idle_us=500,
        ),
        Scenario(
            "comm_mesh",
            "as comm, but every replica_groups in XLA's mesh form (mesh['axis_0'=2,'axis_1'=2] "
            "{'axis_1'}; one op with the user's axis names)",
            lambda m: _comm_block(m, syntax=_COMM_MESH_SYNTAX),
            idle_us=500,
        ),
        Scenario(
            "no_steps",
            "the compute ops with no Steps line (XLA Modules and XLA Ops only)",
            _compute_block,
            idle_us=400,
            has_steps=False,
        ),
        Scenario(
            "implausible",
            "the compute ops, with two splash-attention custom-calls whose flops imply roofline "
            "efficiency 1.6 and 1.25",
            lambda m: _compute_block(m, implausible=True),
            idle_us=400,
        ),
        Scenario(
            "idle",
            "the compute ops with the device idle 40% of every step (host-bound between steps)",
            _compute_block,
            idle_us=6400,
        ),
    ]
}


def scenario_ops(scenario: str, mesh: Mesh) -> list[OpSpec]:
    """The ops of one layer block of ``scenario`` on ``mesh``."""
    return SCENARIOS[scenario].block(mesh)


# ---------------------------------------------------------------------------------------------
# Timeline shared by the writer and the ground truth
# ---------------------------------------------------------------------------------------------


def _step_factors(steps: int, step_jitter: float, seed: int) -> list[float]:
    """Deterministic per-step duration multipliers, uniform in [1 - jitter, 1 + jitter]."""
    if not 0.0 <= step_jitter < 1.0:
        raise ValueError("step_jitter must be in [0, 1)")
    rng = random.Random(seed)
    return [1.0 + step_jitter * (2.0 * rng.random() - 1.0) for _ in range(steps)]


@dataclass(frozen=True)
class _Step:
    op_ps: tuple[int, ...]  # duration of each block op in this step
    idle_ps: int  # idle gap at the end of the step

    def busy_ps(self, scale: int) -> int:
        return sum(self.op_ps) * scale


def _timeline(
    ops: Sequence[OpSpec], idle_us: float, steps: int, scale: int, step_jitter: float, seed: int
) -> list[_Step]:
    out = []
    for f in _step_factors(steps, step_jitter, seed):
        op_ps = tuple(round(op.duration_us * PS_PER_US * f) for op in ops)
        out.append(_Step(op_ps, round(idle_us * scale * PS_PER_US * f)))
    return out


# ---------------------------------------------------------------------------------------------
# Ground truth
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpTruth:
    name: str
    category: str
    bound_by: str  # XProf's rule: Compute when flops / bytes >= peak FLOP/s / peak HBM B/s, else HBM
    roofline_efficiency: float  # achieved rate / the roof at the op's operational intensity
    flops: int  # per occurrence
    bytes_accessed: int  # per occurrence
    occurrences_per_device: int
    self_time_fraction_of_op_time: float
    expression: str
    tf_op: str
    collective: Collective | None

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "collective"}
        d["collective"] = self.collective.to_dict() if self.collective else None
        return d


@dataclass(frozen=True)
class GroundTruth:
    """What a correct reading of the profile finds. Fractions are of one device's time; all
    devices (and hosts) are identical. "op time" is the busy time (sum of op self times);
    "device time" is what XProf divides by: the Steps span, or the first-op-to-last-op span
    when there is no Steps line."""

    scenario: str
    hosts: int
    devices_per_host: int
    mesh: Mesh
    steps: int  # steps XProf should report (0 without a Steps line)
    step_time_ms: tuple[float, ...]
    step_time_ms_mean: float
    op_time_us_per_device: float
    device_time_us_per_device: float
    op_time_fraction_by_category: dict[str, float]
    device_time_fraction_by_category: dict[str, float]  # includes "IDLE"
    collective_fraction_of_op_time: float
    collective_fraction_of_device_time: float
    compute_bound_fraction_of_op_time: float
    hbm_bound_fraction_of_op_time: float
    idle_fraction: float  # XProf's device_idle_time_percent / 100
    duty_cycle: float  # XProf's device_duty_cycle_percent / 100: busy / (last op end - first op start)
    program_bound_by: str
    program_operational_intensity: float  # flops per byte over the whole program
    program_flop_rate_gflops: float  # per device: total flops / device time (XProf's Program measured_flop_rate)
    program_flop_utilization: float  # program_flop_rate / peak
    program_hbm_bw_gibps: float  # per device: total bytes / device time, in GiB/s (XProf's unit)
    program_roofline_efficiency: float  # flop utilization if Compute-bound, HBM bandwidth utilization if HBM-bound
    ridge_point: float  # peak FLOP/s / peak HBM B/s (XProf's hbm_ridge_point)
    implausible_ops: tuple[str, ...]  # ops with roofline efficiency > 1
    ops: dict[str, OpTruth] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        for k in self.__dataclass_fields__:
            v = getattr(self, k)
            if k == "ops":
                v = {name: op.to_dict() for name, op in v.items()}
            elif k == "mesh":
                v = {"data": v.data, "fsdp": v.fsdp}
            elif isinstance(v, tuple):
                v = list(v)
            d[k] = v
        return d


def ground_truth(
    scenario: str,
    *,
    hosts: int = 1,
    devices_per_host: int = 4,
    steps: int = 5,
    peak_tflops: float = 197.0,
    peak_hbm_gbps: float = 819.0,
    scale: int = 1,
    step_jitter: float = 0.0,
    seed: int = 0,
) -> GroundTruth:
    """The exact ground truth of ``write_profile`` called with the same arguments."""
    spec = SCENARIOS[scenario]
    mesh = Mesh.for_devices(hosts * devices_per_host)
    ops = spec.block(mesh)
    timeline = _timeline(ops, spec.idle_us, steps, scale, step_jitter, seed)
    per_op_ps = [sum(st.op_ps[i] for st in timeline) * scale for i in range(len(ops))]
    busy = sum(per_op_ps)
    step_ps = [st.busy_ps(scale) + st.idle_ps for st in timeline]
    # XProf's device time: the Steps span; without steps, first op start to last op end.
    device_ps = sum(step_ps) if spec.has_steps else sum(step_ps) - timeline[-1].idle_ps
    op_span_ps = sum(step_ps) - timeline[-1].idle_ps

    ridge = peak_tflops * 1e12 / (peak_hbm_gbps * 1e9)
    by_cat: dict[str, int] = {}
    compute_ps = 0
    truths: dict[str, OpTruth] = {}
    total_flops = total_bytes = 0
    n = steps * scale
    for op, ps in zip(ops, per_op_ps, strict=True):
        flops, nbytes = op.flops(peak_tflops), op.bytes(peak_hbm_gbps)
        total_flops += flops * n
        total_bytes += nbytes * n
        by_cat[op.category] = by_cat.get(op.category, 0) + ps
        seconds = ps * 1e-12
        bound = "Compute" if nbytes == 0 or flops / nbytes >= ridge else "HBM"
        if bound == "Compute":
            compute_ps += ps
            eff = flops * n / seconds / (peak_tflops * 1e12)
        else:
            eff = nbytes * n / seconds / (peak_hbm_gbps * 1e9)
        truths[op.name] = OpTruth(
            op.name, op.category, bound, eff, flops, nbytes, n, ps / busy, op.expression, op.tf_op, op.collective
        )
    coll_ps = sum(ps for cat, ps in by_cat.items() if cat in COLLECTIVE_CATEGORIES)
    dev_frac = {cat: ps / device_ps for cat, ps in by_cat.items()}
    dev_frac["IDLE"] = (device_ps - busy) / device_ps
    flop_rate = total_flops / (device_ps * 1e-12) / 1e9
    byte_rate = total_bytes / (device_ps * 1e-12)
    oi = total_flops / total_bytes
    program_bound = "Compute" if oi >= ridge else "HBM"
    return GroundTruth(
        scenario=scenario,
        hosts=hosts,
        devices_per_host=devices_per_host,
        mesh=mesh,
        steps=steps if spec.has_steps else 0,
        step_time_ms=tuple(ps / 1e9 for ps in step_ps) if spec.has_steps else (),
        step_time_ms_mean=sum(step_ps) / len(step_ps) / 1e9 if spec.has_steps else 0.0,
        op_time_us_per_device=busy / PS_PER_US,
        device_time_us_per_device=device_ps / PS_PER_US,
        op_time_fraction_by_category={cat: ps / busy for cat, ps in by_cat.items()},
        device_time_fraction_by_category=dev_frac,
        collective_fraction_of_op_time=coll_ps / busy,
        collective_fraction_of_device_time=coll_ps / device_ps,
        compute_bound_fraction_of_op_time=compute_ps / busy,
        hbm_bound_fraction_of_op_time=(busy - compute_ps) / busy,
        idle_fraction=1.0 - busy / device_ps,
        duty_cycle=busy / op_span_ps,
        program_bound_by=program_bound,
        program_operational_intensity=oi,
        program_flop_rate_gflops=flop_rate,
        program_flop_utilization=flop_rate / (peak_tflops * 1e3),
        program_hbm_bw_gibps=byte_rate / 2**30,
        program_roofline_efficiency=(
            flop_rate / (peak_tflops * 1e3) if program_bound == "Compute" else byte_rate / (peak_hbm_gbps * 1e9)
        ),
        ridge_point=ridge,
        implausible_ops=tuple(name for name, t in truths.items() if t.roofline_efficiency > 1.0),
        ops=truths,
    )


# Ground truth of every scenario at the defaults of write_profile (1 host x 4 devices, 5 steps).
GROUND_TRUTH: dict[str, GroundTruth] = {name: ground_truth(name) for name in SCENARIOS}


# ---------------------------------------------------------------------------------------------
# Writer
# ---------------------------------------------------------------------------------------------


def _hbm_breakdown(nbytes: int) -> bytes:
    """A serialized MemoryAccessBreakdown: a third of the bytes written to HBM, the rest read.

    XProf's op_profile takes its per-op bandwidths (``bandwidthUtils``, ``rawBytesAccessedArray``)
    from this stat; hlo_stats and roofline_model use ``bytes_accessed``.
    """
    from xprof.protobuf import op_metrics_pb2

    written = nbytes // 3
    breakdown = op_metrics_pb2.MemoryAccessBreakdown()
    for op_type, n in (
        (op_metrics_pb2.OpMetrics.MemoryAccessed.READ, nbytes - written),
        (op_metrics_pb2.OpMetrics.MemoryAccessed.WRITE, written),
    ):
        breakdown.memory_accessed.add(
            operation_type=op_type, memory_space=op_metrics_pb2.MEMORY_SPACE_HBM, bytes_accessed=n
        )
    return breakdown.SerializeToString(deterministic=True)


def _device_plane(
    space: Any,
    local_id: int,
    ops: Sequence[OpSpec],
    timeline: Sequence[_Step],
    *,
    scale: int,
    has_steps: bool,
    device_type: str,
    peak_tflops: float,
    peak_hbm_gbps: float,
) -> None:
    plane = space.planes.add(id=local_id + 1, name=f"/device:TPU:{local_id}")
    b = PlaneBuilder(plane)
    b.add_plane_stats(
        {
            "device_type_string": device_type,
            "peak_teraflops_per_second": float(peak_tflops),
            "peak_hbm_bw_gigabytes_per_second": float(peak_hbm_gbps),
        }
    )
    steps_line = b.line(1, "Steps", START_NS) if has_steps else None
    modules_line = b.line(2, "XLA Modules", START_NS)
    ops_line = b.line(3, "XLA Ops", START_NS)
    op_ids = [
        b.event_metadata(
            op.expression,
            display_name=op.name,
            stats={
                "program_id": PROGRAM_ID,
                "symbol_id": symbol_id,
                "hlo_category": op.category,
                "flops": op.flops(peak_tflops),
                "model_flops": op.flops(peak_tflops),
                "bytes_accessed": op.bytes(peak_hbm_gbps),
                "memory_access_breakdown": _hbm_breakdown(op.bytes(peak_hbm_gbps)),
                "tf_op": op.tf_op,
                "long_name": op.expression,
            },
        )
        for symbol_id, op in enumerate(ops, start=1)
    ]
    module_id = b.event_metadata(f"{MODULE_NAME}({PROGRAM_ID})", stats={"program_id": PROGRAM_ID})
    group_stat = b.stat_id("group_id")
    events = ops_line.events
    t = 0
    for step, st in enumerate(timeline):
        step_begin = t
        pairs = list(zip(op_ids, st.op_ps, strict=True))
        for _ in range(scale):
            for mid, dur in pairs:
                ev = events.add(metadata_id=mid, offset_ps=t, duration_ps=dur)
                ev.stats.add(metadata_id=group_stat, int64_value=step)
                t += dur
        mod = modules_line.events.add(metadata_id=module_id, offset_ps=step_begin, duration_ps=t - step_begin)
        b.add_stat(mod.stats, "group_id", step)
        b.add_stat(mod.stats, "run_id", 1000 + step)
        t += st.idle_ps
        if steps_line is not None:
            b.event(steps_line, str(step), step_begin, t - step_begin, stats={"group_id": step, "step_num": step})


def write_profile(
    run_dir: Path,
    scenario: str,
    *,
    hosts: int = 1,
    devices_per_host: int = 4,
    steps: int = 5,
    device_type: str = "TPU v5 lite",
    peak_tflops: float = 197.0,
    peak_hbm_gbps: float = 819.0,
    scale: int = 1,
    step_jitter: float = 0.0,
    seed: int = 0,
) -> list[Path]:
    """Write ``<run_dir>/host<i>.xplane.pb`` for each host and return their paths.

    ``scale`` repeats the layer block ``scale`` times per step (more events, same
    metadata); fractions do not change, step time grows linearly. ``step_jitter`` j
    multiplies every duration of step s (ops and idle) by a seeded factor in [1-j, 1+j],
    which leaves every time fraction unchanged. ``device_type`` is only a label: XProf
    takes the peaks from the plane stats, never from the device type.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    if hosts < 1 or devices_per_host < 1 or steps < 1 or scale < 1:
        raise ValueError("hosts, devices_per_host, steps and scale must be >= 1")
    spec = SCENARIOS[scenario]
    ops = spec.block(Mesh.for_devices(hosts * devices_per_host))
    timeline = _timeline(ops, spec.idle_us, steps, scale, step_jitter, seed)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for host in range(hosts):
        hostname = f"host{host}"
        space = XSpace()
        space.hostnames.append(hostname)
        for local in range(devices_per_host):
            _device_plane(
                space,
                local,
                ops,
                timeline,
                scale=scale,
                has_steps=spec.has_steps,
                device_type=device_type,
                peak_tflops=peak_tflops,
                peak_hbm_gbps=peak_hbm_gbps,
            )
        path = run_dir / f"{hostname}.xplane.pb"
        path.write_bytes(space.SerializeToString(deterministic=True))
        paths.append(path)
    return paths


def _main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--scenario", choices=list(SCENARIOS), default="compute")
    ap.add_argument("--hosts", type=int, default=1)
    ap.add_argument("--devices-per-host", type=int, default=4)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--step-jitter", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    paths = write_profile(
        args.run_dir,
        args.scenario,
        hosts=args.hosts,
        devices_per_host=args.devices_per_host,
        steps=args.steps,
        scale=args.scale,
        step_jitter=args.step_jitter,
        seed=args.seed,
    )
    for p in paths:
        print(p, p.stat().st_size)
    gt = ground_truth(
        args.scenario,
        hosts=args.hosts,
        devices_per_host=args.devices_per_host,
        steps=args.steps,
        scale=args.scale,
        step_jitter=args.step_jitter,
        seed=args.seed,
    )
    for k, v in itertools.islice(gt.to_dict().items(), 0, 23):
        print(f"{k}: {v}")


if __name__ == "__main__":
    _main()
