"""Write ASAP's catalog of MaxText's model files from a MaxText checkout at a named commit.

    .venv/bin/python tools/models_from_maxtext.py --maxtext PATH [--commit REV] [--out FILE]

PATH is a MaxText work tree or git directory (read with `git show REV:...`, so the work tree's state does not
matter), or a plain directory of MaxText's sources (read from disk; the commit is then what --commit says).
The output (default `server/config/data/maxtext_models.json`, loaded by `server/config/models.py`) holds every key
of every model file under `<configs>/models/` with its value as YAML loads it, and base.yml's value of every
key a model file sets and of every key in STRUCTURAL_KEYS below. The same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from server.config.models import CHECKOUT_MODELS_DIRS, ModelFileError, parse_model_text  # noqa: E402

REPOSITORY = "AI-Hypercomputer/maxtext"
DEFAULT_OUT = ROOT / "server" / "config" / "data" / "maxtext_models.json"

# base.yml keys that decide the model's structure and cost, beyond those some model file sets. Read from
# MaxText at e591f30cb: the training-FLOPs function and its helpers (src/maxtext/utils/maxtext_utils.py:278-1392,
# `calculate_tflops_training_per_device` and the gemma2/gemma3/gemma4/llama4/MLA/indexer/GDN/engram/mHC/DeepSeek-V4
# helpers it calls), the derived dimensions in src/maxtext/configs/types.py (3393-3401: global_parameter_scale;
# 3894-3910: moe_mlp_dim) and the decoder blocks' switches (MoE routing and dispatch, attention kernels, biases,
# tied logits, vocabulary tiling, quantization, remat and offload).
STRUCTURAL_KEYS: tuple[str, ...] = (
    # dimensions and their scale
    "model_name", "decoder_block", "global_parameter_scale",
    "base_emb_dim", "base_num_query_heads", "base_num_kv_heads", "base_mlp_dim", "base_moe_mlp_dim",
    "base_num_decoder_layers", "head_dim", "vocab_size", "mlp_activations", "mlp_activations_limit",
    # attention: type, pattern, windows, sinks, projections
    "attention", "attention_type", "sliding_window_size", "chunk_attn_window_size", "nope_layer_interval",
    "share_kv_projections", "global_head_dim", "global_num_kv_heads", "attention_sink", "attention_output_dim",
    "fused_qkv", "fused_mlp", "use_qk_norm", "attn_logits_soft_cap", "final_logits_soft_cap",
    "local_rope_proportion", "global_rope_proportion", "partial_rotary_factor", "temperature_tuning",
    "use_ragged_attention", "moba", "moba_chunk_size", "moba_topk", "float32_qk_product", "float32_logits",
    # multi-head latent attention and the sparse-attention indexer (DeepSeek 2/3/3.2)
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "mla_qk_head_chunk_size",
    "use_indexer", "indexer_head_dim", "indexer_n_heads", "indexer_topk", "indexer_sparse_training",
    # DeepSeek-V4: compressed attention, grouped output projection, hyper-connections, hash layers
    "compress_ratios", "o_groups", "o_lora_rank", "mhc_expansion_rate", "first_num_hash_layers",
    # mixture of experts: layout, routing, dispatch
    "num_experts", "num_experts_per_tok", "shared_experts", "first_num_dense_layers", "interleave_moe_layer_step",
    "moe_expert_input_dim", "capacity_factor", "sparse_matmul", "megablox", "use_tokamax_gmm", "use_gmm_v2",
    "use_ring_of_experts", "use_random_routing", "use_custom_sort_vjp", "ragged_buffer_factor",
    "shard_exp_on_fsdp", "moe_fsdp_use_two_stage_all_gather", "moe_dispatch_no_expert_sharding",
    "num_moe_token_chunks", "num_moe_emb_chunks", "use_batch_split_schedule", "batch_split_factor",
    "routed_score_func", "routed_scaling_factor", "routed_bias", "norm_topk_prob", "n_routing_groups",
    "topk_routing_group", "load_balance_loss_weight", "float32_gate_logits",
    # gated delta-net (linear attention) layers of Qwen3-Next / Qwen3.5
    "inhomogeneous_layer_cycle_interval", "gdn_chunk_size", "gdn_conv_kernel_dim", "gdn_key_head_dim",
    "gdn_num_key_heads", "gdn_num_value_heads", "gdn_value_head_dim", "use_qk_norm_in_gdn",
    # Gemma 4 small: KV-shared layers, double-wide MLP, per-layer embeddings
    "num_kv_shared_layers", "use_double_wide_mlp", "hidden_size_per_layer_input", "vocab_size_per_layer_input",
    # multi-token prediction, engram memory
    "mtp_num_layers", "engram_layers", "engram_head_dim", "engram_kernel_size", "engram_max_ngram_size",
    "engram_num_heads", "engram_vocab_bases",
    # multimodal encoders (their FLOPs are added when use_multimodal)
    "use_multimodal", "use_audio", "freeze_vision_encoder_params", "image_size_for_vit", "tile_size_for_vit",
    "num_channels_for_vit", "patch_size_for_vit", "hidden_size_for_vit", "intermediate_size_for_vit",
    "num_hidden_layers_for_vit", "pixel_shuffle_ratio_for_vit", "projector_input_dim_for_vit",
    "projector_output_dim_for_vit",
    # biases, norms, embeddings and logits
    "mlp_bias", "attention_bias", "logits_via_embedding", "normalize_embedding_logits", "use_post_attn_norm",
    "use_post_ffw_norm", "trainable_position_size", "use_iota_embed", "use_untrainable_positional_embedding",
    "num_vocab_tiling", "vocab_tiling_ag_once", "cast_logits_to_fp32", "logits_dot_in_fp32",
    # numerics and quantization
    "dtype", "weight_dtype", "grad_dtype", "mu_dtype", "activations_in_float32", "matmul_precision",
    "quantization", "quantization_local_shard_count", "use_qwix_quantization", "quantize_kvcache",
    # the training step: tokens, accumulation, DPO, optimizer, remat, offload, scan, pipeline
    "per_device_batch_size", "max_target_length", "gradient_accumulation_steps", "use_dpo", "opt_type",
    "remat_policy", "scan_layers", "param_scan_axis", "optimizer_memory_host_offload",
    "parameter_memory_host_offload", "num_layers_per_pipeline_stage", "num_pipeline_microbatches",
    "num_pipeline_repeats", "pipeline_parallel_layers", "enable_dropout", "dropout_rate",
    # how the model file and the command line combine (pyconfig.py:481, 183)
    "override_model_config", "override_logical_axis_rules",
)  # fmt: skip


class Source:
    """Files of one MaxText tree at one commit."""

    commit: str
    commit_date: str

    def list_yml(self, directory: str) -> list[str]:
        raise NotImplementedError

    def list_tree(self, directory: str) -> list[str]:
        """Every file under `directory`, at any depth, sorted."""
        raise NotImplementedError

    def read(self, path: str) -> str:
        raise NotImplementedError

    def exists_dir(self, directory: str) -> bool:
        raise NotImplementedError


class GitSource(Source):
    def __init__(self, repo: Path, rev: str):
        self.repo = repo
        self.commit = self._git("rev-parse", "--verify", f"{rev}^{{commit}}").strip()
        self.commit_date = self._git("log", "-1", "--format=%cI", self.commit).strip()

    def _git(self, *args: str) -> str:
        out = subprocess.run(["git", "-C", str(self.repo), *args], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"git {' '.join(args)} failed in {self.repo}: {out.stderr.strip()}")
        return out.stdout

    def list_yml(self, directory: str) -> list[str]:
        names = self._git("ls-tree", "--name-only", self.commit, f"{directory}/").splitlines()
        return sorted(n for n in names if n.endswith(".yml"))

    def list_tree(self, directory: str) -> list[str]:
        return sorted(self._git("ls-tree", "-r", "--name-only", self.commit, f"{directory}/").splitlines())

    def read(self, path: str) -> str:
        return self._git("show", f"{self.commit}:{path}")

    def exists_dir(self, directory: str) -> bool:
        out = subprocess.run(
            ["git", "-C", str(self.repo), "cat-file", "-t", f"{self.commit}:{directory}"],
            capture_output=True,
            text=True,
            check=False,
        )
        return out.returncode == 0 and out.stdout.strip() == "tree"


class DirSource(Source):
    def __init__(self, root: Path, commit: str):
        self.root = root
        self.commit = commit
        self.commit_date = ""

    def list_yml(self, directory: str) -> list[str]:
        return sorted(f"{directory}/{p.name}" for p in (self.root / directory).glob("*.yml") if p.is_file())

    def list_tree(self, directory: str) -> list[str]:
        base = self.root / directory
        return sorted(f"{directory}/{p.relative_to(base).as_posix()}" for p in base.rglob("*") if p.is_file())

    def read(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8")

    def exists_dir(self, directory: str) -> bool:
        return (self.root / directory).is_dir()


def open_source(path: Path, rev: str) -> Source:
    probe = subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"], capture_output=True, check=False)
    if probe.returncode == 0:
        return GitSource(path, rev)
    return DirSource(path, "" if rev == "HEAD" else rev)


def _keys(src: Source, path: str) -> dict[str, Any]:
    try:
        keys, _ = parse_model_text(src.read(path), Path(path))
    except ModelFileError as e:
        raise SystemExit(f"{path}@{src.commit[:9]}: {e.message}") from None
    return keys


def build_catalog(src: Source, structural: Iterable[str] = STRUCTURAL_KEYS) -> dict[str, Any]:
    """The catalog as data (see the module docstring)."""
    models_dir = next((d for d in CHECKOUT_MODELS_DIRS if src.exists_dir(d)), None)
    if models_dir is None:
        raise SystemExit(f"no MaxText models directory ({', '.join(CHECKOUT_MODELS_DIRS)}) at {src.commit or 'HEAD'}")
    base_file = f"{models_dir.rsplit('/', 1)[0]}/base.yml"
    models: dict[str, Any] = {}
    for path in src.list_yml(models_dir):
        name = path.rsplit("/", 1)[1].removesuffix(".yml")
        models[name] = {"file": path, "keys": _keys(src, path)}
    base = _keys(src, base_file)
    wanted = {k for m in models.values() for k in m["keys"]} | set(structural)
    missing = sorted(k for k in set(structural) if k not in base)
    if missing:
        print(f"note: not in {base_file}: {', '.join(missing)}", file=sys.stderr)
    return {
        "repository": REPOSITORY,
        "commit": src.commit,
        "commit_date": src.commit_date,
        "models_dir": models_dir,
        "base": {"file": base_file, "keys": {k: base[k] for k in sorted(wanted) if k in base}},
        "models": dict(sorted(models.items())),
    }


def dumps(catalog: dict[str, Any]) -> str:
    """Stable formatting: sorted keys, two-space indent, one trailing newline."""
    return json.dumps(catalog, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--maxtext", required=True, type=Path, help="a MaxText work tree or git directory")
    p.add_argument("--commit", default="HEAD", metavar="REV", help="the commit to read (default HEAD)")
    p.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output file (default {DEFAULT_OUT.relative_to(ROOT)})"
    )
    args = p.parse_args(argv)
    src = open_source(args.maxtext, args.commit)
    cat = build_catalog(src)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps(cat), encoding="utf-8")
    print(f"{args.out}: {len(cat['models'])} models of {REPOSITORY}@{cat['commit'][:9] or '?'} ({cat['commit_date']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
