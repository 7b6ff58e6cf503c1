"""Model dimensions of MaxText's model files (configs/models/<name>.yml).

These are the facts ASAP resolves `model_name` to.

Every number below was read from the model file named in ``source`` (repository AI-Hypercomputer/maxtext,
current layout ``src/maxtext/configs/models/``; the older layout was ``src/MaxText/configs/models/``), at the
commit given after ``@``. A key the model file does not set takes MaxText's ``base.yml`` default
(``src/maxtext/configs/base.yml``@000b810b): ``num_experts: 1``, ``num_experts_per_tok: 1``,
``mlp_activations: ["silu", "linear"]``, ``logits_via_embedding: false``, ``decoder_block: "llama2"``,
``base_moe_mlp_dim: -1`` (kept here as ``None``), ``shared_experts: 0``, ``head_dim: 128``,
``vocab_size: 32_000``.

MaxText scales these with ``global_parameter_scale`` (default 1, a power of two); ASAP reads the ``base_*``
values and applies the scale itself (``types.py``: ``emb_dim = 2**emb_scale * base_emb_dim`` and so on).
"""

from __future__ import annotations

from dataclasses import dataclass

_REPO = "MaxText (AI-Hypercomputer/maxtext)"
_MODELS_DIR = "src/maxtext/configs/models"


def _src(name: str, commit: str) -> str:
    return f"{_REPO} {_MODELS_DIR}/{name}.yml@{commit}"


@dataclass(frozen=True)
class ModelDims:
    name: str
    emb_dim: int  # base_emb_dim
    num_query_heads: int  # base_num_query_heads
    num_kv_heads: int  # base_num_kv_heads
    mlp_dim: int  # base_mlp_dim
    num_decoder_layers: int  # base_num_decoder_layers
    head_dim: int  # head_dim
    vocab_size: int
    num_experts: int = 1
    num_experts_per_tok: int = 1
    mlp_activations: tuple[str, ...] = ("silu", "linear")
    logits_via_embedding: bool = False
    decoder_block: str = ""
    base_moe_mlp_dim: int | None = None  # if the model file has a separate MoE expert mlp dim
    shared_experts: int = 0
    source: str = ""  # e.g. "MaxText src/maxtext/configs/models/llama2-7b.yml"


_GELU: tuple[str, ...] = ("gelu", "linear")
_GPT3: tuple[str, ...] = ("gelu",)

_ALL: tuple[ModelDims, ...] = (
    # base.yml itself (model_name: "default"): the model every run gets without a model file.
    ModelDims(
        "default", 2048, 16, 16, 7168, 16, 128, 32000,
        decoder_block="llama2",
        source=f"{_REPO} src/maxtext/configs/base.yml@000b810b",
    ),
    # ---- Llama 2 ----
    ModelDims(
        "llama2-7b", 4096, 32, 32, 11008, 32, 128, 32000,
        decoder_block="llama2", source=_src("llama2-7b", "7c7f628c"),
    ),
    ModelDims(
        "llama2-13b", 5120, 40, 40, 13824, 40, 128, 32000,
        decoder_block="llama2", source=_src("llama2-13b", "5505348a"),
    ),
    ModelDims(
        "llama2-70b", 8192, 64, 8, 28672, 80, 128, 32000,
        decoder_block="llama2", source=_src("llama2-70b", "5505348a"),
    ),
    # ---- Llama 3 / 3.1 / 3.3 (decoder_block "llama2", rope_max_timescale 500_000) ----
    ModelDims(
        "llama3-8b", 4096, 32, 8, 14336, 32, 128, 128256,
        decoder_block="llama2", source=_src("llama3-8b", "6aa8b844"),
    ),
    ModelDims(
        "llama3-70b", 8192, 64, 8, 28672, 80, 128, 128256,
        decoder_block="llama2", source=_src("llama3-70b", "8fe46880"),
    ),
    ModelDims(
        "llama3-405b", 16384, 128, 8, 53248, 126, 128, 128256,
        decoder_block="llama2", source=_src("llama3-405b", "5505348a"),
    ),
    ModelDims(
        "llama3.1-8b", 4096, 32, 8, 14336, 32, 128, 128256,
        decoder_block="llama2", source=_src("llama3.1-8b", "92b299ed"),
    ),
    ModelDims(
        "llama3.1-70b", 8192, 64, 8, 28672, 80, 128, 128256,
        decoder_block="llama2", source=_src("llama3.1-70b", "6aa8b844"),
    ),
    ModelDims(
        "llama3.1-405b", 16384, 128, 8, 53248, 126, 128, 128256,
        decoder_block="llama2", source=_src("llama3.1-405b", "3e7d8b8b"),
    ),
    ModelDims(
        "llama3.3-70b", 8192, 64, 8, 28672, 80, 128, 128256,
        decoder_block="llama2", source=_src("llama3.3-70b", "5505348a"),
    ),
    # ---- Mistral / Mixtral ----
    ModelDims(
        "mistral-7b", 4096, 32, 8, 14336, 32, 128, 32000,
        decoder_block="mistral", source=_src("mistral-7b", "3e7d8b8b"),
    ),
    ModelDims(
        "mixtral-8x7b", 4096, 32, 8, 14336, 32, 128, 32000,
        num_experts=8, num_experts_per_tok=2, decoder_block="mixtral", base_moe_mlp_dim=14336,
        source=_src("mixtral-8x7b", "807d0114"),
    ),
    ModelDims(
        "mixtral-8x22b", 6144, 48, 8, 16384, 56, 128, 32768,
        num_experts=8, num_experts_per_tok=2, decoder_block="mixtral", base_moe_mlp_dim=16384,
        source=_src("mixtral-8x22b", "6aa8b844"),
    ),
    # ---- Gemma (gelu gated MLP, tied embeddings) ----
    ModelDims(
        "gemma-2b", 2048, 8, 1, 16384, 18, 256, 256128,
        mlp_activations=_GELU, logits_via_embedding=True, decoder_block="gemma",
        source=_src("gemma-2b", "5505348a"),
    ),
    ModelDims(
        "gemma-7b", 3072, 16, 16, 24576, 28, 256, 256128,
        mlp_activations=_GELU, logits_via_embedding=True, decoder_block="gemma",
        source=_src("gemma-7b", "5505348a"),
    ),
    # Gemma 2: base_num_decoder_layers is HALF the real layer count; MaxText merges each
    # [local_attention, global_attention] pair into one decoder layer (comment in the model files).
    ModelDims(
        "gemma2-2b", 2304, 8, 4, 9216, 13, 256, 256128,
        mlp_activations=_GELU, logits_via_embedding=True, decoder_block="gemma2",
        source=_src("gemma2-2b", "b33ec50f"),
    ),
    ModelDims(
        "gemma2-9b", 3584, 16, 8, 14336, 21, 256, 256128,
        mlp_activations=_GELU, logits_via_embedding=True, decoder_block="gemma2",
        source=_src("gemma2-9b", "8fe46880"),
    ),
    ModelDims(
        "gemma2-27b", 4608, 32, 16, 36864, 23, 128, 256128,
        mlp_activations=_GELU, logits_via_embedding=True, decoder_block="gemma2",
        source=_src("gemma2-27b", "7985c145"),
    ),
    # ---- GPT-3 family (single gelu MLP, fused_qkv, learned positions, tied embeddings) ----
    # There is no gpt3-52b model file; MaxText has gpt3-52k, a 52-thousand-parameter test model.
    ModelDims(
        "gpt3-175b", 12288, 96, 96, 49152, 96, 128, 50304,
        mlp_activations=_GPT3, logits_via_embedding=True, decoder_block="gpt3",
        source=_src("gpt3-175b", "8fe46880"),
    ),
    ModelDims(
        "gpt3-22b", 6144, 24, 24, 24576, 48, 256, 32768,
        mlp_activations=_GPT3, logits_via_embedding=True, decoder_block="gpt3",
        source=_src("gpt3-22b", "75264ef1"),
    ),
    ModelDims(
        "gpt3-6b", 3072, 12, 12, 12288, 48, 256, 32768,
        mlp_activations=_GPT3, logits_via_embedding=True, decoder_block="gpt3",
        source=_src("gpt3-6b", "b33ec50f"),
    ),
    ModelDims(
        "gpt3-52k", 16, 2, 2, 64, 1, 8, 1024,
        mlp_activations=_GPT3, logits_via_embedding=True, decoder_block="gpt3",
        source=_src("gpt3-52k", "5505348a"),
    ),
    # ---- Qwen3 (qk norm) ----
    ModelDims(
        "qwen3-4b", 2560, 32, 8, 9728, 36, 128, 151936,
        logits_via_embedding=True, decoder_block="qwen3", source=_src("qwen3-4b", "5505348a"),
    ),
    ModelDims(
        "qwen3-8b", 4096, 32, 8, 12288, 36, 128, 151936,
        decoder_block="qwen3", source=_src("qwen3-8b", "5505348a"),
    ),
    ModelDims(
        "qwen3-14b", 5120, 40, 8, 17408, 40, 128, 151936,
        decoder_block="qwen3", source=_src("qwen3-14b", "8fe46880"),
    ),
    ModelDims(
        "qwen3-32b", 5120, 64, 8, 25600, 64, 128, 151936,
        decoder_block="qwen3", source=_src("qwen3-32b", "6aa8b844"),
    ),
    # Fully MoE: base_mlp_dim equals base_moe_mlp_dim (types.py requires that for fully MoE models).
    # logits_via_embedding is absent from this file -> base.yml default false.
    ModelDims(
        "qwen3-235b-a22b", 4096, 64, 4, 1536, 94, 128, 151936,
        num_experts=128, num_experts_per_tok=8, decoder_block="qwen3_moe", base_moe_mlp_dim=1536,
        source=_src("qwen3-235b-a22b", "5505348a"),
    ),
    # ---- DeepSeek V3 (MLA attention, 3 dense layers then MoE) ----
    # head_dim is absent from the model file -> base.yml default 128. Its attention is MLA
    # (attention_type "mla"): q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128,
    # qk_rope_head_dim 64, v_head_dim 128, so q/k heads are 192 wide and head_dim is not what it uses.
    # first_num_dense_layers: 3 (dense layers use base_mlp_dim 18432; MoE layers use base_moe_mlp_dim).
    ModelDims(
        "deepseek3-671b", 7168, 128, 128, 18432, 61, 128, 129280,
        num_experts=256, num_experts_per_tok=8, decoder_block="deepseek", base_moe_mlp_dim=2048,
        shared_experts=1, source=_src("deepseek3-671b", "5505348a"),
    ),
)  # fmt: skip

MODELS: dict[str, ModelDims] = {m.name: m for m in _ALL}

# The MaxText key each ModelDims field comes from, for overriding by explicit base_* keys:
FIELD_KEYS: dict[str, str] = {
    "emb_dim": "base_emb_dim",
    "num_query_heads": "base_num_query_heads",
    "num_kv_heads": "base_num_kv_heads",
    "mlp_dim": "base_mlp_dim",
    "num_decoder_layers": "base_num_decoder_layers",
    "head_dim": "head_dim",
    "vocab_size": "vocab_size",
    "num_experts": "num_experts",
    "num_experts_per_tok": "num_experts_per_tok",
    "mlp_activations": "mlp_activations",
    "logits_via_embedding": "logits_via_embedding",
    "decoder_block": "decoder_block",
    "base_moe_mlp_dim": "base_moe_mlp_dim",
    "shared_experts": "shared_experts",
}
