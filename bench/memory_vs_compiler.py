"""ASAP's memory and collective estimate against the TPU compiler (issues 8, 14, 26): for a set of (model, slice,
mesh) cases, compile a train step for the slice with libtpu on this machine and print, per case, the estimate's
per-chip bytes beside the compiler's, the components of each, whether each says it fits, and the collective bytes per
step of every mesh-axis group; then the targets' figures for development and held-out cases apart, beside two
baselines.

    .venv/bin/python bench/memory_vs_compiler.py [--maxtext-python PY | --reference] [--split dev|held-out]
        [--filter TEXT] [--details] [--no-compile] [--write-golden] [--db PATH] [--max-layers 3]

Which program is compiled (said on the first line): MaxText's own train step (MaxText's `train_compile` in its own
environment, server/compile/verify_maxtext.py) when one is there: --maxtext-python, else $ASAP_MAXTEXT_PYTHON, else
the Makefile's `.venv-maxtext` (`make maxtext-env`); otherwise ASAP's reference program (server/compile/ref_model.py,
plain attention, no MoE), which only the cases not marked maxtext_only are compiled with (--reference forces it). With
the reference program a model deeper than --max-layers is compiled at two reduced depths and extrapolated linearly.
MaxText's program is compiled whole: its layer scan makes a whole model cost what a reduced one does, and XLA unrolls a
scan of a few layers, whose backward then overlaps layers as the model's never does (gpt-oss-20b at 4 layers: twelve
routed-row buffers live at once). A case may still give `depths` (compared at that depth) or two (extrapolated).

Each case is written as a small MaxText YAML config (model_name or base_* dims, compile_topology,
per_device_batch_size, max_target_length, ici_* keys, remat_policy, `# LIBTPU_INIT_ARGS=` for the flags a recipe ran
with, set in the compile's environment) and verified like `asap verify` does it. Compiles are cached in ASAP's store
(--db for another sqlite file; a fresh file gives a cold run), so a rerun after an estimate change only re-prices the
estimate; each MaxText compile's optimized HLO, memory-usage report, live ranges and buffer assignment are kept under
.tmp/memory_vs_compiler/hlo/ (--details prints the temp heap: its size, the bytes live at once and the largest
buffers then). --no-compile compares with the golden file's figures, else the cached compiles, and compiles nothing.

Component names differ: the estimate has weights, gradients, optimizer (the state), weight_casts (the bf16 copy
of the layer weights), activations (kept for the backward pass), embedding_one_hot (use_iota_embed), the loss'
logits and output_head, an offloaded stack's relayout, and the backward's temporaries (server/perf/memory.py: the
loss, an offloaded stack's relayout and the backward pass are not live at once, the largest phase counts); the
compiler has argument (the state and the tokens), output (the new state, aliased to the donated argument), temp
(gradients, kept activations and every other temporary) and generated code. The table sets the estimate's
weights+optimizer beside argument and the rest of its peak beside temp; `uncertain` lines name the components the
estimate counts in full that the compiler may not keep.

Cases. Issue 8's twelve (llama2-7b, llama3-8b, gemma-2b, qwen3-4b, MaxText's `default`; five remat policies; three
that do not fit). Issue 14's: large vocabularies at 8k tokens (the demo's fsdp 16 proposal, fsdp 64, llama3.1-8b on
v5e-256 where the head's gradient is all-reduced, num_vocab_tiling, use_iota_embed), the published 128k llama3.1-70b
recipe on Ironwood, Gemma 2 (a tied 256k vocabulary) and the tuned DeepSeek-V3. Issue 26's: host offload (MaxText's
llama3.1-8b 8k recipe on v6e-256 and a 4-layer llama3.1-8b on v5p-8, both offloading the layer input and q/k/v/out;
DeepSeek-V3's v5p-1024 recipe, pure FSDP), MoE (DeepSeek-V3, gpt-oss-20b), long context (32k tokens, context 4) and
fp8 (fp8_full through Qwix) and Llama 4 Scout's recipe at pdbs 12 (97% of the HBM: what the compiler keeps when it
must fit) as development cases, and held out, written down before the memory model's fixes and
compiled after them: llama3.1-70b's 8k offload recipe, gpt-oss-120b's Ironwood recipe (offloading the layer input and
mlpwo), Llama 4 Scout's v5p recipe, llama3.1-8b at 128k (context 4) and gemma3-12b (262k tied vocabulary). (Qwen3-235B
over expert 4, Llama 4 Maverick, an offloading Qwen3-30B and fp8_full on llama3.1-70b and Mixtral were written down
too and dropped uncompiled, for the compile time of a machine shared with other work; fp8_full on llama3.1-70b, v6e-64
fsdp 64, was compiled after the development cases' fixes and is held out.)

Targets (issue 26, on MaxText's program): fit/OOM agreement on every case; per-chip memory within 10% of the compiler
on every case that fits; none more than 5% under it. Printed for development and held-out cases apart, beside the
baselines: the state alone (weights, gradients, optimizer) and the state times a constant, the median compiled/state
of the other development cases (leave one out). Collective bytes per axis group are reported without a target.
A benchmark: always exits 0.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import moe_vs_compiler as moe_bench  # noqa: E402  (its HLO capture and peak reading)

from server.common import store  # noqa: E402
from server.compile import verify_maxtext  # noqa: E402
from server.compile.verify import (  # noqa: E402
    Compiled,
    VerifyResult,
    combine,
    compiler_hbm_bytes,
    estimate_json,
    libtpu_available,
    verify,
    versions,
)
from server.config import resolve as config_mod  # noqa: E402
from server.config.mesh import check  # noqa: E402
from server.config.slices import parse_slice  # noqa: E402
from server.perf.estimate import EstimateError, estimate  # noqa: E402

GiB = 2**30
MEMORY_TARGET = 0.10
GOLDEN = ROOT / "tests" / "data" / "verify" / "memory_compiled.json"
CACHE = ROOT / ".tmp" / "memory_vs_compiler"  # the cases' YAML files and each MaxText compile's HLO and reports
MAXTEXT_VENV = ROOT / ".venv-maxtext"  # the Makefile's MAXTEXT_VENV (make maxtext-env)


@dataclass(frozen=True)
class Case:
    name: str
    slice: str
    model: str | dict[str, Any]  # a model_name, or explicit base_* keys
    mesh: dict[str, int]  # ici_*_parallelism keys without the prefix and suffix
    pdbs: float = 1
    seq: int = 2048
    remat: str = "full"
    extra: dict[str, Any] = field(default_factory=dict)
    # compared with MaxText's program only (--maxtext-python): ASAP's reference program has plain dot-product
    # attention, whose [heads, seq, seq] scores at 8k-128k tokens say nothing about MaxText's flash kernel
    maxtext_only: bool = False
    slices: int = 1  # compile_topology_num_slices
    dcn: dict[str, int] = field(default_factory=dict)  # dcn_*_parallelism keys without the prefix and suffix
    # MaxText's program at reduced depth (base_num_decoder_layers on its command line, which the model file's own
    # needs: override_model_config): one depth, compared at that depth; two, each compiled and the compiler's
    # figures extrapolated linearly to the model's depth (server/compile/verify.py combine), compared there. Empty:
    # the whole model.
    depths: tuple[int, ...] = ()
    # more keys for MaxText's command line (keys a model file sets, which the YAML file cannot override)
    cli: dict[str, Any] = field(default_factory=dict)
    # held out: compiled after the memory model's fixes and never looked at while making them (issue 26)
    held_out: bool = False
    # the run's LIBTPU_INIT_ARGS: written as the config's `# LIBTPU_INIT_ARGS=` comment (so the compile's cache key
    # holds them) and set in MaxText's compile environment (libtpu reads them there)
    libtpu_flags: str = ""

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")[:80]

    def compile_cli(self, depth: int | None) -> dict[str, Any]:
        """MaxText's command-line keys for one compile (at `depth` layers, or the model's)."""
        out = dict(self.cli)
        if depth is not None:
            out = {"override_model_config": True, "base_num_decoder_layers": depth, **out}
        elif out:
            out = {"override_model_config": True, **out}
        return out

    def estimate_cli(self) -> dict[str, Any]:
        """The command-line keys of what is compared: the compiled depth when there is one, else the model's."""
        return self.compile_cli(self.depths[0] if len(self.depths) == 1 else None)

    def yaml(self) -> str:
        lines = [f"# {self.name}", "base_config: base.yml  # MaxText's own, for --maxtext-python"]
        if self.libtpu_flags:
            lines.append(f"# LIBTPU_INIT_ARGS={self.libtpu_flags}")
        if isinstance(self.model, str):
            lines.append(f"model_name: {self.model}")
        else:
            lines += [f"{k}: {v}" for k, v in self.model.items()]
        lines += [
            f"compile_topology: {self.slice}",
            f"compile_topology_num_slices: {self.slices}",
            f"per_device_batch_size: {self.pdbs}",
            f"max_target_length: {self.seq}",
            f"remat_policy: {self.remat}",
        ]
        axes = {"data": 1, "fsdp": 1, "tensor": 1, **self.mesh}
        lines += [f"ici_{a}_parallelism: {d}" for a, d in axes.items()]
        lines += [f"dcn_{a}_parallelism: {d}" for a, d in self.dcn.items()]
        lines += [f"{k}: {v}" for k, v in self.extra.items()]
        return "\n".join(lines) + "\n"


# v5e-N / v6e-N: N chips; v5p-N: N/2 chips (DOMAIN.md §3). Sizes chosen so that a cold run stays under about
# 25 minutes on two cores: a few 7-8B models (about 2.5 min a case at 2 and 3 layers), the rest 1-4B models
# (MaxText's `default` model is 1.2B), short sequences, small per-device batches.
# Keys of published recipes the issue 26 cases share: flash attention with 2048-blocks (tpu-recipes, MaxText's
# benchmarks/maxtext_*_model_configs.py), synthetic data, and the custom remat policy offloading each layer's input
# and its q/k/v/out projections to host memory (llama3_1_8b_8192, llama3_1_405b_8192_fsdp_dcn, maverick).
_FLASH_2048: dict[str, Any] = {
    "attention": "flash",
    "dataset_type": "synthetic",
    "sa_block_q": 2048,
    "sa_block_kv": 2048,
    "sa_block_kv_compute": 2048,
    "sa_block_q_dkv": 2048,
    "sa_block_kv_dkv": 2048,
    "sa_block_kv_dkv_compute": 2048,
    "sa_block_q_dq": 2048,
    "sa_block_kv_dq": 2048,
}
_FLASH_2048_FUSED: dict[str, Any] = {**_FLASH_2048, "sa_use_fused_bwd_kernel": True}
# MaxText's benchmarks/xla_flags_library.py DENSE_VMEM_LIMIT_FLAG, which every flash recipe with 2048-blocks sets: the
# splash kernels' blocks need the larger scoped VMEM (without it libtpu stops with CompileTimeScopedVmemOom)
DENSE_VMEM_LIMIT = "--xla_tpu_scoped_vmem_limit_kib=98304"
OFFLOAD_TEST_CASE = "llama3.1-8b v5p-8 fsdp4 pdbs2 seq4096 offload input+qkv+out (4 layers)"
_OFFLOAD_QKVO: dict[str, Any] = {
    "decoder_layer_input": "offload",
    "query_proj": "offload",
    "key_proj": "offload",
    "value_proj": "offload",
    "out_proj": "offload",
}

# llama4_scout_dropless_v5p_256's keys beside the model, batch and remat (both Scout cases)
_SCOUT_RECIPE: dict[str, Any] = {
    "decoder_layer_input": "offload",
    "dtype": "bfloat16",
    "weight_dtype": "float32",
    "megablox": True,
    "sparse_matmul": True,
    "opt_type": "adamw",
    **_FLASH_2048,
}
CASES: tuple[Case, ...] = (
    Case("llama2-7b v5e-16 fsdp16 full", "v5e-16", "llama2-7b", {"fsdp": 16}),
    Case(
        "llama3-8b v6e-16 fsdp4 x tensor4 pdbs2 save_dot_except_mlp",
        "v6e-16",
        "llama3-8b",
        {"fsdp": 4, "tensor": 4},
        2,
        2048,
        "save_dot_except_mlp",
    ),
    Case("default v5e-4 fsdp4 pdbs2 full", "v5e-4", "default", {"fsdp": 4}, 2),
    Case(
        "default v5e-8 data2 x fsdp4 pdbs2 save_qkv_proj",
        "v5e-8",
        "default",
        {"data": 2, "fsdp": 4},
        2,
        2048,
        "save_qkv_proj",
    ),
    Case(
        "default v6e-8 fsdp4 x tensor2 pdbs2 minimal", "v6e-8", "default", {"fsdp": 4, "tensor": 2}, 2, 2048, "minimal"
    ),
    Case(
        "default v5p-16 fsdp8 pdbs4 minimal_with_context",
        "v5p-16",
        "default",
        {"fsdp": 8},
        4,
        2048,
        "minimal_with_context",
    ),
    Case(
        "default v5p-32 data2 x fsdp8 pdbs2 seq4096 save_out_proj",
        "v5p-32",
        "default",
        {"data": 2, "fsdp": 8},
        2,
        4096,
        "save_out_proj",
    ),
    Case("gemma-2b v5e-4 fsdp4 full", "v5e-4", "gemma-2b", {"fsdp": 4}),
    Case("qwen3-4b v6e-4 fsdp4 seq4096 full", "v6e-4", "qwen3-4b", {"fsdp": 4}, 1, 4096),
    # do not fit: the state alone (16 B/param over 4 shards), the kept activations
    Case("llama2-7b v5e-16 data4 x fsdp4 full (state 27 GB a chip)", "v5e-16", "llama2-7b", {"data": 4, "fsdp": 4}),
    Case("llama3-8b v6e-4 fsdp4 full (state 32 GB a chip)", "v6e-4", "llama3-8b", {"fsdp": 4}),
    Case("default v5e-4 fsdp4 pdbs16 minimal (activations)", "v5e-4", "default", {"fsdp": 4}, 16, 2048, "minimal"),
    # Large vocabularies at long sequences (issue 14): 128k-vocabulary logits, the gathered output head and its
    # gradient, num_vocab_tiling, use_iota_embed. The demo's proposal (examples/llama3-8b-v6e-16.yml with fsdp 16);
    # llama3.1-8b at 8k tokens on v5e-256, where the head's gradient takes the all-reduce path (16 rows a device).
    Case(
        "llama3-8b v6e-16 fsdp16 pdbs2 seq8192 full (the demo's fsdp proposal)",
        "v6e-16",
        "llama3-8b",
        {"fsdp": 16},
        2,
        8192,
        maxtext_only=True,
    ),
    Case(
        "llama3-8b v6e-16 fsdp16 pdbs2 seq8192 full num_vocab_tiling 4",
        "v6e-16",
        "llama3-8b",
        {"fsdp": 16},
        2,
        8192,
        extra={"num_vocab_tiling": 4},
        maxtext_only=True,
    ),
    Case("llama3-8b v6e-64 fsdp64 pdbs1 seq8192 full", "v6e-64", "llama3-8b", {"fsdp": 64}, 1, 8192, maxtext_only=True),
    Case(
        "llama3.1-8b v5e-256 fsdp256 pdbs1 seq8192 full",
        "v5e-256",
        "llama3.1-8b",
        {"fsdp": 256},
        1,
        8192,
        maxtext_only=True,
    ),
    Case(
        "llama3.1-8b v5e-256 fsdp256 pdbs2 seq8192 full",
        "v5e-256",
        "llama3.1-8b",
        {"fsdp": 256},
        2,
        8192,
        maxtext_only=True,
    ),
    Case(
        "llama3.1-8b v5e-256 fsdp256 pdbs1 seq8192 full use_iota_embed",
        "v5e-256",
        "llama3.1-8b",
        {"fsdp": 256},
        1,
        8192,
        extra={"use_iota_embed": True},
        maxtext_only=True,
    ),
    # A tuned config that ran (MaxText benchmarks, llama3_8b_8192 on v6e-256: bench/references.py) and that
    # today's MaxText and libtpu reject: the test of published runs (tests/test_estimate.py) takes the compiler's
    # verdict on today's stack from this case.
    Case(
        "llama3-8b v6e-256 fsdp256 pdbs8 seq8192 full iota (the tuned llama3_8b_8192)",
        "v6e-256",
        "llama3-8b",
        {"fsdp": -1},
        8,
        8192,
        extra={
            "attention": "flash",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            "sa_block_q": 1024,
            "sa_block_q_dkv": 2048,
            "sa_block_q_dq": 2048,
        },
        maxtext_only=True,
    ),
    # Long context: the published 128k llama3.1-70b recipe on Ironwood, its memory keys as run_recipe.sh sets them
    # (AI-Hypercomputer/tpu-recipes@c8cfe2f, training/ironwood/llama3.1-70b/128k-bf16-tpu7x-4x8x8/xpk/run_recipe.sh;
    # tpu7x-4x8x8 is 512 devices): fsdp 64 x context 8, pdbs 0.125, custom remat keeping five tensors, vocab tiling 4.
    Case(
        "llama3.1-70b tpu7x-512 fsdp64 x context8 seq131072 (tpu-recipes 128k)",
        "tpu7x-512",
        "llama3.1-70b",
        {"fsdp": -1, "context": 8},
        0.125,
        131072,
        "custom",
        extra={
            "dtype": "bfloat16",
            "decoder_layer_input": "device",
            "context": "device",
            "query_proj": "device",
            "key_proj": "device",
            "value_proj": "device",
            "mlpwo": "device",
            "num_vocab_tiling": 4,
            "opt_type": "adam_pax",
            "use_iota_embed": True,
            "attention": "flash",
            "sa_block_q": 2048,
            "sa_block_kv": 2048,
            "sa_block_kv_compute": 512,
            "sa_block_q_dkv": 1024,
            "sa_block_kv_dkv": 4096,
            "sa_block_kv_dkv_compute": 256,
            "sa_q_layout": "SEQ_MINOR",
            "sa_k_layout": "HEAD_DIM_MINOR",
            "sa_v_layout": "SEQ_MINOR",
            "sa_use_fused_bwd_kernel": True,
            "dq_reduction_steps": 3,
            "use_tokamax_splash": True,
            "use_max_logit_estimate": 30,
        },
        maxtext_only=True,
    ),
    # Gemma 2 (issue 14): each MaxText layer a local and a global attention layer (the scan keeps one input a pair, its
    # backward holds both layers' working sets), a tied 256k vocabulary with the final logits soft-capped. The table's
    # head gradient is reduce-scattered in a loop right after the loss over more than 4 devices (unrolled over 4, the
    # logits then carried into the backward), all-reduced below 64 rows a device (v5e-64), and the Adam update copies
    # the float32 table and its moments row-major where those tiles are nearly full (224, 112 and 576 rows, not 144 or
    # 288). The config is the first. Left out: pdbs 2 and 3 on v5e-16, which the compiler fits (14.55 and 14.53
    # of 15.75 GiB; at pdbs 3 only by computing the logits' dot without gathering the table) where the estimate's usable
    # HBM of a v5e chip (16 GB less the runtime's share, 14.31 GiB; server/config/slices.py) says they do not.
    Case("gemma2-9b v5e-16 fsdp16 full (issue 14)", "v5e-16", "gemma2-9b", {"fsdp": 16}, maxtext_only=True),
    Case("gemma2-9b v5e-16 fsdp16 pdbs4 full (logits)", "v5e-16", "gemma2-9b", {"fsdp": 16}, 4, maxtext_only=True),
    Case("gemma2-9b v5e-32 fsdp32 full", "v5e-32", "gemma2-9b", {"fsdp": 32}, maxtext_only=True),
    Case("gemma2-9b v5e-32 fsdp32 pdbs2 full", "v5e-32", "gemma2-9b", {"fsdp": 32}, 2, maxtext_only=True),
    Case(
        "gemma2-9b v5e-64 fsdp64 full (tied head all-reduced)", "v5e-64", "gemma2-9b", {"fsdp": 64}, maxtext_only=True
    ),
    Case("gemma2-2b v5e-4 fsdp4 full", "v5e-4", "gemma2-2b", {"fsdp": 4}, maxtext_only=True),
    Case("gemma2-2b v5e-8 fsdp8 full", "v5e-8", "gemma2-2b", {"fsdp": 8}, maxtext_only=True),
    Case("gemma2-2b v5e-16 fsdp16 full", "v5e-16", "gemma2-2b", {"fsdp": 16}, maxtext_only=True),
    Case("gemma2-27b v5p-16 fsdp8 full", "v5p-16", "gemma2-27b", {"fsdp": 8}, maxtext_only=True),
    # MoE on MaxText's capacity (dense) path at scale: the tuned DeepSeek-V3 config of bench/references.py
    # (maxtext benchmarks/maxtext_trillium_model_configs.py@bfd388fd deepseek_v3_ep16), whole model (about 4 minutes
    # here). The compiler gathers all 256 experts of a matrix (bf16[256,7168,2048], 7 GiB) and, rematerialising
    # under memory pressure, still needs 31.41 of 31.24 GiB: it does not fit.
    Case(
        "deepseek3-671b 2x v6e-256 fsdp16 x expert16 dcn_fsdp2 capacity1.0 (tuned, 61 layers)",
        "v6e-256",
        "deepseek3-671b",
        {"fsdp": 16, "expert": 16},
        1,
        8192,
        "custom",
        extra={
            "decoder_layer_input": "offload",
            "use_iota_embed": True,
            "dataset_type": "synthetic",
            "sa_block_q": 2048,
            "sa_block_q_dkv": 2048,
            "sa_block_q_dq": 2048,
            "megablox": False,
            "sparse_matmul": False,
            "capacity_factor": 1.0,
            "dtype": "bfloat16",
            "opt_type": "sgd",
            "weight_dtype": "bfloat16",
            "attention": "flash",
        },
        maxtext_only=True,
        slices=2,
        dcn={"fsdp": 2},
    ),
    # -- issue 26: host offload, MoE, long context, large vocabularies, fp8, on MaxText's program only (reduced depth).
    # Development cases, looked at while fixing the memory model:
    Case(
        "llama3.1-8b v6e-256 fsdp256 pdbs4 seq8192 offload input+qkv+out (tpu-recipes llama3_1_8b_8192)",
        "v6e-256",
        "llama3.1-8b",
        {"fsdp": -1},
        4,
        8192,
        "custom",
        extra={**_OFFLOAD_QKVO, **_FLASH_2048_FUSED, "use_iota_embed": True},
        maxtext_only=True,
        # whole: at 2 and 4 layers the device memory falls with depth (15.38, 13.45 GiB), so no line through them is
        # the model's; the scan makes a whole compile cost what a reduced one does
        libtpu_flags=DENSE_VMEM_LIMIT,
    ),
    # the smallest offload case, at 4 layers (about 100 s here): tests/test_memory.py compiles it again where MaxText's
    # environment is. XLA unrolls a layer scan this short, so layers' buffers may overlap in its backward; its peak is
    # the loss, which depth does not change. The other issue 26 cases are compiled whole: the layer scan makes a whole
    # model cost what a reduced one does, and only a whole one schedules the backward as the model runs.
    Case(
        OFFLOAD_TEST_CASE,
        "v5p-8",
        "llama3.1-8b",
        {"fsdp": 4},
        2,
        4096,
        "custom",
        extra={**_OFFLOAD_QKVO, "attention": "flash", "dataset_type": "synthetic"},
        maxtext_only=True,
        depths=(4,),
    ),
    Case(
        "deepseek3-671b v5p-1024 fsdp512 pdbs6 seq8192 offload input+out dropless (deepseek3_671b_v5p_1024)",
        "v5p-1024",
        "deepseek3-671b",
        {"fsdp": -1},
        6,
        8192,
        "custom",
        extra={
            "decoder_layer_input": "offload",
            "out_proj": "offload",
            "dtype": "bfloat16",
            "weight_dtype": "float32",
            "megablox": True,
            "sparse_matmul": True,
            "use_custom_sort_vjp": True,  # (its tile_* keys are gone from MaxText 0.2.5: kernel tiling, not HBM)
            **_FLASH_2048,
            "sa_use_fused_bwd_kernel": False,
        },
        maxtext_only=True,
        # whole (the offloaded stacks' device copies grow with depth: see the llama3.1-8b recipe above)
        libtpu_flags=DENSE_VMEM_LIMIT,
    ),
    Case(
        "gpt-oss-20b v5p-32 fsdp16 pdbs4 seq8192 dropless",
        "v5p-32",
        "gpt-oss-20b",
        {"fsdp": 16},
        4,
        8192,
        extra={"dtype": "bfloat16", "megablox": True, "sparse_matmul": True, **_FLASH_2048},
        maxtext_only=True,
        libtpu_flags=DENSE_VMEM_LIMIT,
    ),
    Case(
        "llama3.1-8b v6e-32 fsdp8 x context4 pdbs0.25 seq32768 full",
        "v6e-32",
        "llama3.1-8b",
        {"fsdp": 8, "context": 4},
        0.25,
        32768,
        extra={**_FLASH_2048},
        maxtext_only=True,
        libtpu_flags=DENSE_VMEM_LIMIT,
    ),
    Case(
        "llama3.1-8b v6e-16 fsdp16 pdbs2 seq8192 full fp8_full (qwix)",
        "v6e-16",
        "llama3.1-8b",
        {"fsdp": 16},
        2,
        8192,
        extra={"quantization": "fp8_full", "use_qwix_quantization": True, **_FLASH_2048},
        maxtext_only=True,
        libtpu_flags=DENSE_VMEM_LIMIT,
    ),
    # Held out: written down before the memory model's fixes, compiled after them. The three below whose first compile
    # the model failed (llama3.1-70b's offload recipe, gpt-oss-120b's, Llama 4 Scout's) were then looked at and fixed
    # for, so they count as development; the two after them stay held out.
    Case(
        "llama3.1-70b v6e-256 fsdp256 pdbs5 seq8192 offload input+qkv (tpu-recipes llama3_1_70b_8192)",
        "v6e-256",
        "llama3.1-70b",
        {"fsdp": -1},
        5,
        8192,
        "custom",
        extra={
            "decoder_layer_input": "offload",
            "query_proj": "offload",
            "key_proj": "offload",
            "value_proj": "offload",
            **_FLASH_2048_FUSED,
            "use_iota_embed": True,
        },
        maxtext_only=True,
        libtpu_flags=DENSE_VMEM_LIMIT,
        # held out until its first compile, which the model then failed: development since
    ),
    Case(
        "gpt-oss-120b tpu7x-128 fsdp64 x data2 pdbs10 seq8192 offload input+mlpwo (tpu-recipes 8k bf16)",
        "tpu7x-128",
        "gpt-oss-120b",
        {"data": 2, "fsdp": 64},
        10,
        8192,
        "custom",
        extra={
            "decoder_layer_input": "offload",
            "mlpwo": "offload",
            "dtype": "bfloat16",
            "weight_dtype": "float32",
            "use_custom_sort_vjp": True,
            "shard_exp_on_fsdp": True,  # the recipe's fsdp_shard_on_exp, renamed in MaxText 0.2.5
            "megablox": True,
            "sparse_matmul": True,
            "attention": "flash",
            "sa_block_q": 1024,
            "sa_block_kv": 1024,
            "sa_block_kv_compute": 1024,
            "sa_block_q_dkv": 2048,
            "sa_block_kv_dkv": 2048,
            "sa_block_kv_dkv_compute": 2048,
            "sa_block_q_dq": 2048,
            "sa_block_kv_dq": 2048,
            "sa_use_fused_bwd_kernel": True,
            "opt_type": "adamw",
        },
        maxtext_only=True,
        # no scoped-VMEM flag: 96 MiB is more than a tpu7x core's 64 MiB VMEM (the kernels then overflow it)
        # held out until its first compile, which the model then failed: development since
    ),
    Case(
        "llama4-17b-16e v5p-256 fsdp128 pdbs8 seq8192 offload input dropless (llama4_scout_dropless_v5p_256)",
        "v5p-256",
        "llama4-17b-16e",
        {"fsdp": -1},
        8,
        8192,
        "custom",
        extra=_SCOUT_RECIPE,
        maxtext_only=True,
        libtpu_flags=DENSE_VMEM_LIMIT,
        # held out until its first compile, which the model then failed: development since
    ),
    Case(
        # the same at pdbs 12, 97% of v5p's usable HBM: compiled to see what the compiler keeps when it must
        "llama4-17b-16e v5p-256 fsdp128 pdbs12 seq8192 offload input dropless (llama4_scout_dropless_v5p_256)",
        "v5p-256",
        "llama4-17b-16e",
        {"fsdp": -1},
        12,
        8192,
        "custom",
        extra=_SCOUT_RECIPE,
        maxtext_only=True,
        libtpu_flags=DENSE_VMEM_LIMIT,
    ),
    Case(
        "llama3.1-8b v6e-64 fsdp8 x context8 pdbs0.125 seq131072 full (128k)",
        "v6e-64",
        "llama3.1-8b",
        {"fsdp": 8, "context": 8},  # (context 4 cannot be placed on v6e-64's 8x8 without splitting an axis)
        0.125,
        131072,
        extra={**_FLASH_2048},
        maxtext_only=True,
        libtpu_flags=DENSE_VMEM_LIMIT,
        held_out=True,
    ),
    Case(
        # written down with the held-out cases before the memory model's fixes, dropped uncompiled for compile time,
        # compiled after issue 26's fixes to the development cases (nothing fitted on it)
        "llama3.1-70b v6e-64 fsdp64 pdbs2 seq8192 full fp8_full (qwix)",
        "v6e-64",
        "llama3.1-70b",
        {"fsdp": 64},
        2,
        8192,
        extra={"quantization": "fp8_full", "use_qwix_quantization": True, **_FLASH_2048},
        maxtext_only=True,
        libtpu_flags=DENSE_VMEM_LIMIT,
        held_out=True,
    ),
    Case(
        "gemma3-12b v6e-32 fsdp32 pdbs2 seq8192 full (262k tied vocabulary)",
        "v6e-32",
        "gemma3-12b",
        {"fsdp": 32},
        2,
        8192,
        extra={**_FLASH_2048},
        maxtext_only=True,
        libtpu_flags=DENSE_VMEM_LIMIT,
        held_out=True,
    ),
)


def rel(e: float, c: float) -> float:
    return (e - c) / c if c else float("inf")


def gib(n: float | None) -> str:
    return "-" if n is None else f"{n / GiB:6.2f}"


def est_parts(est: dict[str, Any]) -> tuple[float, float]:
    """The estimate grouped as the compiler groups memory: (the state in the arguments, the rest of its peak, which
    the compiler has in temp)."""
    c = est["components"]
    state = c.get("weights", 0) + c.get("optimizer", 0)
    return state, float(est.get("memory_per_chip_bytes", 0.0)) - state


def collectives(r: VerifyResult) -> dict[str, tuple[float, float]]:
    """(estimate, compiler) bytes per step of every axis group either side has."""
    est = {a: float(sum(d.values())) for a, d in (r.estimate or {}).get("collectives_by_axis", {}).items()}
    comp = {a: float(sum(d.values())) for a, d in (r.compiled.collectives_by_axis() if r.compiled else {}).items()}
    return {a: (est.get(a, 0.0), comp.get(a, 0.0)) for a in sorted(set(est) | set(comp))}


@dataclass
class Outcome:
    """What a case's compile (or compiles, at two depths) said, beside the estimate of what was compiled."""

    status: str  # the verifier's: "ok" and "does-not-fit" are compared, anything else is not
    message: str
    compiled: Compiled | None  # None: the compiler stopped at its first out-of-memory (needs_bytes: at least that)
    needs_bytes: float | None
    estimate: dict[str, Any] | None  # verify.estimate_json of what was compiled
    cached: bool
    colls: dict[str, tuple[float, float]] = field(default_factory=dict)
    hlo: list[Path] = field(default_factory=list)  # MaxText: each compile's optimized HLO and memory reports

    @property
    def fits(self) -> bool | None:
        if self.status == "does-not-fit":
            return False
        return self.compiled.fits if self.compiled is not None else None


def reference_outcome(r: VerifyResult) -> Outcome:
    return Outcome(str(r.status), r.message, r.compiled, r.needs_bytes, r.estimate, r.cached, collectives(r))


def maxtext_config(case: Case) -> Path:
    """The case's YAML file (MaxText compiles a file; the verifier's cache keys on its content)."""
    path = CACHE / "configs" / f"{case.slug}.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != case.yaml():
        path.write_text(case.yaml())
    return path


def asap_estimate(case: Case) -> tuple[dict[str, Any] | None, str]:
    """ASAP's estimate of what is compared (the case's config with its command-line keys), as the verifier has it."""
    cfg = config_mod.with_overrides(config_mod.load(maxtext_config(case)), case.estimate_cli())
    try:
        return estimate_json(estimate(cfg, check(cfg))), ""
    except EstimateError as e:
        return None, str(e)
    except Exception as e:  # a benchmark: a broken estimate is reported beside the compile, which still runs
        return None, f"the estimate failed: {type(e).__name__}: {e}"


def model_depth(case: Case) -> int:
    """MaxText's num_decoder_layers of the case's model (what two reduced-depth compiles are extrapolated to)."""
    cfg = config_mod.with_overrides(config_mod.load(maxtext_config(case)), case.compile_cli(None))
    return int(cfg.model.num_decoder_layers) if cfg.model is not None else 0


def golden_outcome(case: Case, est: dict[str, Any] | None) -> Outcome | None:
    """The committed compiled figures of this very case (its YAML and command line), when there are."""
    rows = json.loads(GOLDEN.read_text())["cases"] if GOLDEN.exists() else []
    row = next((g for g in rows if g["yaml"] == case.yaml() and g.get("cli", {}) == case.estimate_cli()), None)
    if row is None or est is None:
        return None
    total = float(row["memory_per_chip_bytes"])
    if not row["components"]:
        return Outcome("does-not-fit", "golden: out of memory", None, total, est, True)
    layers = row.get("extrapolated_from_layers", [])
    compiled = Compiled(
        total, row["components"], float(row["hbm_limit_bytes"]), bool(row["fits"]), [], 0.0, layers, 0, bool(layers)
    )
    return Outcome("ok" if row["fits"] else "does-not-fit", "golden", compiled, None, est, True)


# What is kept of each MaxText compile's XLA dump (gzipped): moe_vs_compiler's three (the optimized HLO, the
# memory-usage report, the live ranges) and the buffer assignment, which names every allocation's values and offsets.
_KEEP = (*moe_bench._KEEP, "after_optimizations-buffer-assignment.txt")


def _capture_into(dest: Path) -> Any:
    """A stand-in for verify_maxtext.train_step_hlo that also copies _KEEP from the dump to `dest` before the
    verifier's temporary directory goes."""
    original = verify_maxtext.train_step_hlo

    def capture(dump_dir: Path) -> Path | None:
        found = original(dump_dir)
        if found is not None:
            dest.mkdir(parents=True, exist_ok=True)
            stem = found.name[: -len("after_optimizations.txt")]
            for suffix in _KEEP:
                src = found.with_name(stem + suffix)
                if src.exists():
                    with src.open("rb") as fi, gzip.open(dest / (suffix + ".gz"), "wb") as fo:
                        shutil.copyfileobj(fi, fo)
        return found

    return original, capture


def maxtext_outcome(case: Case, python: str, db: Any, timeout_s: float, no_compile: bool = False) -> Outcome:
    """MaxText's train_compile of the case (at each of its depths; its HLO and memory reports kept under CACHE/hlo)
    and ASAP's estimate of the same. `no_compile`: the cached compiles, else the golden file's figures."""
    path = maxtext_config(case)
    if no_compile:
        est, why = asap_estimate(case)
        found = golden_outcome(case, est)
        if found is not None:
            return found
    vers = verify_maxtext.versions(python)
    est, why = asap_estimate(case)
    results: list[tuple[int | None, VerifyResult]] = []
    kept: list[Path] = []
    for depth in case.depths or (None,):
        cli = case.compile_cli(depth)
        fp = hashlib.sha256(json.dumps([case.yaml(), sorted(cli.items()), vers], default=str).encode()).hexdigest()
        dest = CACHE / "hlo" / case.slug / f"{'whole' if depth is None else f'L{depth}'}-{fp[:12]}"
        have = all((dest / (k + ".gz")).exists() for k in moe_bench._KEEP)
        original, capture = _capture_into(dest)
        verify_maxtext.train_step_hlo = capture
        before = os.environ.get("LIBTPU_INIT_ARGS")
        if case.libtpu_flags:
            os.environ["LIBTPU_INIT_ARGS"] = case.libtpu_flags  # MaxText's compile inherits this environment
        else:
            os.environ.pop("LIBTPU_INIT_ARGS", None)
        try:
            r = verify(
                path,
                cli,
                maxtext_python=python,
                db=db,
                use_cache=have or no_compile,
                cached_only=no_compile,
                timeout_s=timeout_s,
            )
        finally:
            verify_maxtext.train_step_hlo = original
            if before is None:
                os.environ.pop("LIBTPU_INIT_ARGS", None)
            else:
                os.environ["LIBTPU_INIT_ARGS"] = before
        results.append((depth, r))
        kept.append(dest)
        if r.status != "ok":
            break  # an out-of-memory at a reduced depth is one at the model's too; an error is the case's
    cached = all(r.cached for _, r in results)
    last = results[-1][1]
    if est is None:
        return Outcome("no-estimate", why, None, None, None, cached, hlo=kept)
    if last.status not in ("ok", "does-not-fit"):
        return Outcome(str(last.status), last.message, None, None, est, cached, hlo=kept)
    if last.compiled is None or len(results) == 1:  # an out-of-memory, or one compile compared as it is
        return Outcome(str(last.status), last.message, last.compiled, last.needs_bytes, est, cached, hlo=kept)
    runs = [
        {
            "memory": r.compiled.components,
            "layers": d,
            "collectives": [],
            "compile_s": r.compiled.compile_s,
            "lower_s": 0,
        }
        for d, r in results
        if r.compiled is not None
    ]
    combined = combine(runs, model_depth(case), last.compiled.hbm_limit_bytes)
    status = "ok" if combined.fits else "does-not-fit"
    return Outcome(status, "extrapolated", combined, None, est, cached, hlo=kept)


_TEMP_ALLOCATION = re.compile(r"^allocation \d+: size (\d+), page 0, preallocated-temp:\n((?: value:.*\n)+)", re.M)
_BA_VALUE = re.compile(r" value: <\d+ (\S+) @\d+> \(size=(\d+),offset=(\d+)\): (.*)")
_LIVE = re.compile(r"^\s+(\S+):(\d+)-(\d+)$", re.M)


@dataclass(frozen=True)
class HeapValue:
    name: str
    size: int
    offset: int
    shape: str
    start: int  # first and last position in the schedule where it is live
    end: int


def temp_heap(buffers: str, live_ranges: str) -> tuple[int, list[HeapValue]]:
    """The compiler's HBM temp allocation (its size: the temp the memory stats report) and every value in it with its
    offset and live range, from the dump's buffer assignment and live ranges."""
    m = _TEMP_ALLOCATION.search(buffers)
    if m is None:
        return 0, []
    live = {v.group(1).removesuffix("{}"): (int(v.group(2)), int(v.group(3))) for v in _LIVE.finditer(live_ranges)}
    out = []
    for line in m.group(2).splitlines():
        v = _BA_VALUE.match(line)
        if v is not None and v.group(1) in live:
            s, e = live[v.group(1)]
            out.append(HeapValue(v.group(1), int(v.group(2)), int(v.group(3)), v.group(4), s, e))
    return int(m.group(1)), out


def peak_lines(dest: Path, limit: int = 14) -> list[str]:
    """What the compiler holds at its memory peak, for --details: from the buffer assignment, the temp heap's size,
    the most bytes live at once (the rest of the heap is fragmentation) and the largest values live then; else the
    live-range dump's own peak list."""
    hlo, _, live = moe_bench.load_hlo(dest)
    ba = dest / "after_optimizations-buffer-assignment.txt.gz"
    if live is not None and ba.exists():
        with gzip.open(ba, "rt") as f:
            size, values = temp_heap(f.read(), live)
        if values:
            end = max(v.end for v in values)
            usage = [0] * (end + 2)
            for v in values:
                usage[v.start] += v.size
                usage[v.end + 1] -= v.size
            running, best, at = 0, -1, 0
            for t, du in enumerate(usage):
                running += du
                if running > best:
                    best, at = running, t
            out = [
                f"{dest.name}: temp heap {size / GiB:.2f} GiB, at most {best / GiB:.2f} GiB live at once (position "
                f"{at} of {end}); largest live then:"
            ]
            for v in sorted((v for v in values if v.start <= at <= v.end), key=lambda v: -v.size)[:limit]:
                out.append(f"  {v.size / 2**20:9.1f} MiB  {v.name:<30} {v.shape[:56]:<56} [{v.start}-{v.end}]")
            return out
    if hlo is None or live is None:
        return []
    peak = moe_bench.peak_buffers(live, moe_bench._lines(hlo))
    out = [f"live at the peak of {dest.name}: {sum(b for _, b, _, _ in peak) / GiB:.2f} GiB, largest first"]
    for name, b, shape, op in sorted(peak, key=lambda t: -t[1])[:limit]:
        out.append(f"  {b / 2**20:9.1f} MiB  {name:<26} {shape:<44} {op[-80:]}")
    return out


def report(case: Case, o: Outcome, wall: float, details: bool = False) -> dict[str, Any]:
    est = o.estimate or {}
    c = o.compiled
    e_total = float(est.get("memory_per_chip_bytes", 0.0))
    c_total = c.memory_per_chip_bytes if c is not None else o.needs_bytes
    c_fits = o.fits
    e_fits = est.get("fits")
    how = ("golden file" if o.message.startswith("golden") else "cached") if o.cached else f"compiled in {wall:.0f} s"
    if c is not None and c.layers_compiled:
        how += f" ({'+'.join(map(str, c.layers_compiled))} of {c.layers} layers" + (
            ", extrapolated)" if c.extrapolated else ")"
        )
    split = "held-out" if case.held_out else "development"
    print(f"\n== {case.name} [{split}]: {o.status} [{how}]")
    if o.status not in ("ok", "does-not-fit"):
        print(f"   {o.message}")
        return {"case": case, "status": o.status}
    err = rel(e_total, c_total) if c_total else None
    at_least = " (at least: the compiler stopped at its first OOM)" if c is None else ""
    print(
        f"   per chip: estimate {gib(e_total)} GiB, compiler {gib(c_total)} GiB{at_least}"
        + (f", error {err:+.1%}" if err is not None and c is not None else "")
    )
    if c is not None:
        cc = c.components
        state, temp = est_parts(est)
        ec = est["components"]
        print("   estimate: " + ", ".join(f"{k} {v / GiB:.2f}" for k, v in ec.items() if v) + " GiB")
        print(
            "   compiler: "
            + ", ".join(f"{k} {cc[k] / GiB:.2f}" for k in ("argument", "output", "alias", "temp"))
            + f", code {cc['generated_code'] / 2**20:.1f} MiB"
        )
        print(
            f"   state: estimate weights+optimizer {gib(state)} vs argument {gib(cc['argument'])} GiB "
            f"({rel(state, cc['argument']):+.1%}); rest: estimate {gib(temp)} vs "
            f"temp {gib(cc['temp'])} GiB ({rel(temp, cc['temp']):+.1%})"
        )
    for note in est.get("uncertain", []):
        print(f"   uncertain: {note}")
    agree = e_fits == c_fits
    print(
        f"   fits: estimate {'yes' if e_fits else 'no'}, compiler "
        f"{'yes' if c_fits else 'no'}: {'agree' if agree else 'DISAGREE'}"
    )
    for axis, (e, cb) in o.colls.items():
        print(
            f"   collectives {axis:<14} estimate {e / 2**20:10.1f} MiB, compiler {cb / 2**20:10.1f} MiB"
            + (f" ({rel(e, cb):+.0%})" if cb else "")
        )
    if details:
        for dest in o.hlo:
            for line in peak_lines(dest):
                print("   " + line)
    comps = est.get("components", {})
    return {
        "case": case,
        "status": o.status,
        "fits_compiler": c_fits,
        "fits_estimate": e_fits,
        "mem_err": err if (c is not None and c_fits) else None,
        "compiled": c_total,
        "estimated": e_total,
        "state": sum(float(comps.get(k, 0)) for k in STATE),
        "colls": o.colls,
        "wall": wall,
        "cached": o.cached,
    }


def golden_row(case: Case, o: Outcome) -> dict[str, Any] | None:
    """What the compiler said about a case, for tests/test_memory.py: per-chip bytes (at least that much when it
    stopped at an out-of-memory), its components, the HBM it allows and whether it fits; `cli`, MaxText's
    command-line keys of what is compared (a reduced depth), and how it was compiled."""
    if o.status not in ("ok", "does-not-fit"):
        return None
    c = o.compiled
    row: dict[str, Any] = {
        "name": case.name,
        "yaml": case.yaml(),
        "fits": o.fits,
        "memory_per_chip_bytes": c.memory_per_chip_bytes if c is not None else o.needs_bytes,
        "components": c.components if c is not None else {},
        "hbm_limit_bytes": c.hbm_limit_bytes if c is not None else None,
    }
    if case.estimate_cli():
        row["cli"] = case.estimate_cli()
    if c is not None and c.extrapolated:
        row["extrapolated_from_layers"] = c.layers_compiled
    if case.held_out:
        row["held_out"] = True
    return row


# -- the targets' figures and the baseline ---------------------------------------------------------------------------
# The baseline's state: what a rule of thumb knows of a chip's memory (parameters x bytes a parameter / the axes that
# shard them), the estimate's components of that name.
STATE = ("weights", "gradients", "optimizer")
UNDER_TARGET = 0.05  # no case under the compiler by more than this


def figures(errs: list[float], fits: list[tuple[bool | None, bool | None]]) -> str:
    """Fit / OOM agreement, median and max |error|, the worst under and how many are under by more than 5%."""
    agree = sum(e == c for e, c in fits)
    if not errs:
        return f"fit/OOM agreement {agree}/{len(fits)}; no fitting case"
    under = min(errs)
    return (
        f"fit/OOM agreement {agree}/{len(fits)}; {len(errs)} fitting: median |error| "
        f"{statistics.median(abs(e) for e in errs):.1%}, max {max(abs(e) for e in errs):.1%}, worst under "
        f"{min(under, 0.0):+.1%}, {sum(e < -UNDER_TARGET for e in errs)} under by more than {UNDER_TARGET:.0%}"
    )


def baseline_multiple(rows: list[dict[str, Any]], fit_on: list[dict[str, Any]]) -> list[float]:
    """The rule of thumb, the state times one constant: for each row, the median compiled / state of the fitting
    rows of `fit_on` other than itself (leave one out)."""
    out = []
    for r in rows:
        ratios = [o["compiled"] / o["state"] for o in fit_on if o is not r and o["mem_err"] is not None and o["state"]]
        out.append(statistics.median(ratios) if ratios else 1.0)
    return out


def summary(rows: list[dict[str, Any]], usable: dict[str, float]) -> None:
    """The targets' figures for development and held-out cases apart, beside two baselines: the state alone
    (weights, gradients, optimizer) and the state times a constant fitted leave-one-out on development cases."""
    done = [r for r in rows if r["status"] in ("ok", "does-not-fit")]
    dev = [r for r in done if not r["case"].held_out]
    for name, part in (("development", dev), ("held-out", [r for r in done if r["case"].held_out])):
        if not part:
            print(f"{name}: no case compared")
            continue
        asap = [r["mem_err"] for r in part if r["mem_err"] is not None]
        verdicts = [(r["fits_estimate"], r["fits_compiler"]) for r in part]
        print(f"{name} ({len(part)} cases): ASAP: {figures(asap, verdicts)}")
        for label, mult in (
            ("state alone", [1.0] * len(part)),
            ("state x k (leave-one-out)", baseline_multiple(part, dev)),
        ):
            guesses = [r["state"] * m for r, m in zip(part, mult, strict=True)]
            fits = [(g <= usable[r["case"].name], r["fits_compiler"]) for g, r in zip(guesses, part, strict=True)]
            errs = [rel(g, r["compiled"]) for g, r in zip(guesses, part, strict=True) if r["mem_err"] is not None]
            print(f"   baseline, {label}: {figures(errs, fits)}")
    ok = [r for r in done if r["mem_err"] is not None]
    met = (
        done
        and all(r["fits_estimate"] == r["fits_compiler"] for r in done)
        and all(abs(r["mem_err"]) <= MEMORY_TARGET for r in ok)
        and all(r["mem_err"] >= -UNDER_TARGET for r in ok)
    )
    print(
        f"targets (fit/OOM agreement on every case; |error| <= {MEMORY_TARGET:.0%}; none under by more than "
        f"{UNDER_TARGET:.0%}), all cases: {'PASS' if met else 'MISS'}"
    )


def choose_program(args: argparse.Namespace) -> tuple[str | None, str]:
    """MaxText's environment to compile with (None: ASAP's reference program) and where it came from."""
    if args.reference:
        return None, "--reference"
    if args.maxtext_python:
        return args.maxtext_python, "--maxtext-python"
    env = os.environ.get("ASAP_MAXTEXT_PYTHON")
    if env:
        return env, "$ASAP_MAXTEXT_PYTHON"
    local = MAXTEXT_VENV / "bin" / "python"
    if local.exists():
        return str(local), f"the Makefile's MaxText environment ({local.relative_to(ROOT)}, make maxtext-env)"
    return None, "no MaxText environment (make maxtext-env, or $ASAP_MAXTEXT_PYTHON)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-layers", type=int, default=3, help="reference program: compile 2 and this many layers")
    ap.add_argument("--db", type=Path, help="sqlite file for the compile cache (default: ASAP's store)")
    ap.add_argument("--filter", default="", help="only the cases whose name contains this")
    ap.add_argument("--split", choices=("all", "dev", "held-out"), default="all", help="development or held-out cases")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per compile")
    ap.add_argument(
        "--maxtext-python",
        metavar="PY",
        help="compile MaxText's own train step with MaxText's train_compile in this environment (default: "
        "$ASAP_MAXTEXT_PYTHON, else the Makefile's .venv-maxtext when it exists) instead of ASAP's reference program",
    )
    ap.add_argument("--reference", action="store_true", help="ASAP's reference program even where MaxText is")
    ap.add_argument("--details", action="store_true", help="MaxText: the largest buffers at the compiler's peak")
    ap.add_argument(
        "--no-compile",
        action="store_true",
        help="MaxText's program without compiling: the golden file's figures of each case, else the cached compile",
    )
    ap.add_argument(
        "--write-golden",
        action="store_true",
        help=f"with MaxText's program: write every compared case's compiled memory to {GOLDEN.relative_to(ROOT)} "
        "(tests/test_memory.py checks the estimate against it without compiling)",
    )
    args = ap.parse_args()
    python, source = choose_program(args)
    if python is None and not libtpu_available():
        print("libtpu is not installed (pip install '.[compile]'): nothing to compare with")
        return
    os.nice(10)  # two cores shared with other work: the compiles (children) inherit this
    db = store.connect(args.db) if args.db else store.connect()
    if python is not None:
        vm = verify_maxtext.versions(python)
        program = (
            f"MaxText's own train step (train_compile; maxtext {vm.get('maxtext')}, jax {vm.get('jax')}, "
            f"libtpu {vm.get('libtpu')}; {python}, from {source})"
        )
    else:
        v = versions()
        program = (
            f"ASAP's reference program (jax {v['jax']}, libtpu {v['libtpu']}; max_layers {args.max_layers}; {source})"
        )
    print(f"compiled: {program}")
    cases = [
        c
        for c in CASES
        if args.filter in c.name
        and (python or not c.maxtext_only)
        and (args.split == "all" or (args.split == "held-out") == c.held_out)
    ]
    rows = []
    golden: list[dict[str, Any] | None] = []
    usable: dict[str, float] = {}
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="asap-mem-bench-") as tmp:
        for i, case in enumerate(cases):
            t0 = time.perf_counter()
            if python is not None:
                o = maxtext_outcome(case, python, db, args.timeout, args.no_compile)
            else:
                p = Path(tmp) / f"case{i}.yml"
                p.write_text(case.yaml())
                o = reference_outcome(verify(p, db=db, max_layers=args.max_layers, timeout_s=args.timeout))
            rows.append(report(case, o, time.perf_counter() - t0, args.details))
            golden.append(golden_row(case, o))
            limit = o.compiled.hbm_limit_bytes if o.compiled is not None else None
            usable[case.name] = limit or compiler_hbm_bytes(parse_slice(case.slice))
    total = time.perf_counter() - t_all
    if args.write_golden and python is not None:
        # the cases compared now replace their rows; the other cases' rows stay, in CASES' order
        new = {g["name"]: g for g in golden if g is not None}
        old = {g["name"]: g for g in json.loads(GOLDEN.read_text())["cases"]} if GOLDEN.exists() else {}
        merged = [new.get(c.name) or old[c.name] for c in CASES if c.name in new or c.name in old]
        doc = {"program": "maxtext", "versions": verify_maxtext.versions(python), "cases": merged}
        GOLDEN.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {len(new)} cases to {GOLDEN.relative_to(ROOT)} ({len(merged)} in all)")

    print(f"\n== summary ({program})")
    done = [r for r in rows if r["status"] in ("ok", "does-not-fit")]
    print(f"{'case':<72} {'split':>8} {'mem err':>8} {'fits e/c':>9}")
    for r in done:
        e = f"{r['mem_err']:+.1%}" if r["mem_err"] is not None else "-"
        fe, fc = ("y" if r["fits_estimate"] else "n"), ("y" if r["fits_compiler"] else "n")
        split = "held-out" if r["case"].held_out else "dev"
        print(f"{r['case'].name[:72]:<72} {split:>8} {e:>8} {fe + '/' + fc:>9}")
    summary(rows, usable)
    by_axis: dict[str, list[float]] = {}
    for r in done:
        for axis, (e, c) in r.get("colls", {}).items():
            if c > 0:
                by_axis.setdefault(axis, []).append(abs(rel(e, c)))
    for axis, es in sorted(by_axis.items()):
        print(
            f"collective bytes on {axis:<14} {len(es):2d} cases: median |error| {statistics.median(es):.0%}, "
            f"max {max(es):.0%} (no target)"
        )
    bad = [r for r in rows if r["status"] not in ("ok", "does-not-fit")]
    if bad:
        print(f"not compared: {', '.join(r['case'].name + ' (' + r['status'] + ')' for r in bad)}")
    cold = [r["wall"] for r in done if not r["cached"]]
    print(
        f"wall time {total:.0f} s for {len(rows)} cases"
        + (f"; compiles: median {statistics.median(cold):.0f} s, max {max(cold):.0f} s per case" if cold else "")
        + f"; {sum(r.get('cached', False) for r in done)} from the cache"
    )


if __name__ == "__main__":
    main()
