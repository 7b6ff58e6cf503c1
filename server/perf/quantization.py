"""MaxText's `quantization` modes on a TPU: which matmuls each mode quantizes, to which operand dtype, and so
at which of the chip's peaks (ChipSpec.matmul_peaks, server/config/slices.py) they run.

Read from MaxText's src/maxtext/layers/quantizations.py at e591f30cb (2026-08-22); line numbers below are of
that file unless another is named. MaxText quantizes through one of two libraries: AQT (the default,
`use_qwix_quantization: false`, base.yml L149) or Qwix (`use_qwix_quantization: true`). The modes' names hardly
overlap, and where they do (int8, fp8) both libraries quantize the same matmuls to the same dtype, so the mode
name alone says what runs.

What is quantized, in every mode: the weight matmuls of the decoder layers (q/k/v and output projections, the
MLP). Not quantized: the logits matmul ("We do not quantize the logits matmul", layers/decoders.py L843; Qwix's
rules match `decoder/.*layers.*` only, L809 and L828); attention's score and context matmuls (AQT is applied
through DenseGeneral's dot_general, layers/linears.py L77-82, and attention_op.py uses its quantizer only for
the KV cache; on TPU the default attention is the splash kernel, not a dot_general; the experimental
`experimental_sa_quant_q_fp8`/`_k_fp8` flags, base.yml L1193-1194, are not modelled); the MoE grouped matmuls
(megablox gmm, ragged_dot) except under fp8_full ('Only "fp8_full" quantizes GMM', layers/moe.py L1554).

The three matmuls of a weight W in a training step are the forward x.W ('fwd'), the activation gradient
dy.W^T ('dlhs') and the weight gradient x^T.dy ('drhs'); a mode may quantize some of them only.

Not modelled: the quantize/dequantize work itself (scales, casts: elementwise, on the vector units), which is
why Google quotes 1.3x for fp8 over bf16 training on TPU7x against a 2x peak (cloud.google.com/tpu/docs/
ironwood-performance).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from server.config.slices import ChipSpec, MatmulPeak

MAXTEXT_COMMIT = "e591f30cb"
PASSES = ("fwd", "dlhs", "drhs")  # forward, activation gradient, weight gradient


@dataclass(frozen=True)
class Mode:
    """One value of MaxText's `quantization` key, as it runs on a TPU."""

    name: str
    dtype: str  # operand dtype of the quantized matmuls on the MXU; 'bf16' when none is multiplied quantized
    passes: tuple[str, ...]  # which of the three matmuls of each decoder-layer weight run in `dtype`
    grouped_moe: bool  # whether MoE grouped matmuls (megablox gmm / ragged_dot) are quantized as well
    source: str  # where in MaxText this is read (quantizations.py lines unless named)
    note: str = ""


_QWIX_RULE = "Qwix make_qt_rule L825-836: weight, activation and backward qtype alike, op_names=('dot_general',)"
_WEIGHT_ONLY = (
    "weight-only quantization stores 8-bit weights but multiplies in bf16 (AQT runs the MXU in int8 only when both "
    "operands have 2-8 bits); "
)


def _listed_not_a_mode(name: str) -> Mode:
    """A weight-only mode MaxText's quantization doc lists that its code at e591f30cb does not accept."""
    return Mode(
        name,
        "bf16",
        (),
        False,
        "not a mode at e591f30cb: AQT's _get_quant_config L621-643 raises 'Invalid value', Qwix's "
        "get_qt_provider L862-871 returns no provider (no quantization)",
        _WEIGHT_ONLY + "MaxText's quantization doc still lists it",
    )


# Qwix's fp4 mode, under either of its names.
_FP4 = Mode(
    "fp4",
    "fp4",
    PASSES,
    False,
    "Qwix L845-846, " + _QWIX_RULE,
    "no TPU publishes an fp4 rate: runs at the bf16 peak",
)
_NANOO = "a recipe for AMD MI300/MI325 GPUs (fp8 'fnuz' formats, not TPU7x's e4m3fn/e5m2): priced in bf16"

MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode(
            "int8",
            "int8",
            PASSES,
            False,
            "AQT _get_int8_quant_config L405-426 (fwd_bits=8, dlhs_bits=8, drhs_bits=8 unless "
            "quantization_local_shard_count is 0, int32 accumulators); Qwix L842-843, " + _QWIX_RULE,
            "with AQT and quantization_local_shard_count: 0 the weight gradient stays bf16 (default -1, base.yml L156)",
        ),
        Mode("int4", "int4", PASSES, False, "Qwix L839-840, " + _QWIX_RULE),
        _listed_not_a_mode("int8w"),
        _listed_not_a_mode("int4w"),
        Mode(
            "intmp",
            "bf16",
            (),
            False,
            "AQT L627-631 and L605-618: per-layer w_bits/a_bits from quant_cfg_path, through aqt dot_general_make("
            "lhs_bits=a_bits, rhs_bits=w_bits) L580-595, which quantizes the forward matmul only",
            "ASAP does not read quant_cfg_path: priced in bf16. MaxText's shipped files are weight-only but for "
            "dense_llm_subchannel.json's 8-bit default (configs/quantization/); base.yml L118 calls it an inference "
            "mode",
        ),
        Mode(
            "fp8",
            "fp8",
            PASSES,
            False,
            "AQT L632-633, L682-683: Fp8Quantization L305-316 (flax Fp8DirectDotGeneralOp: e4m3 operands, e5m2 "
            "output gradient); Qwix L851-852, " + _QWIX_RULE,
        ),
        Mode("fp8_e4m3", "fp8", PASSES, False, "Qwix L851-852, " + _QWIX_RULE),
        Mode("fp8_e5m2", "fp8", PASSES, False, "Qwix L848-849, " + _QWIX_RULE),
        Mode(
            "fp8_gpu",
            "fp8",
            PASSES,
            False,
            "Qwix L867-868 NvidaFp8Provider L771-785 (flax Fp8DirectDotGeneralOp on the rule of L851-852)",
            "a recipe for NVIDIA GPUs",
        ),
        Mode(
            "fp8_full",
            "fp8",
            PASSES,
            True,
            "Qwix L854-855, get_fp8_full_qwix_rule_w_sparsity L798-819: e4m3 weights and activations, e5m2 "
            "gradients, op_names=('dot_general', 'gmm', 'ragged_dot'); with use_batch_split_schedule, "
            "QwixQuantization L669-674 and L234-246 (the same dtypes)",
        ),
        Mode(
            "aqt_fp8",
            "fp8",
            ("fwd",),
            False,
            "AQT L636-637, _get_aqt_fp8_quant_config L574-577: config_v4(fwd_bits='e4m3', dlhs_bits=None, "
            "drhs_bits=None): the backward matmuls stay bf16",
        ),
        Mode(
            "aqt_fp8_full",
            "fp8",
            PASSES,
            False,
            "AQT L638-639, _get_aqt_fp8_default_config L522-571: fwd e4m3, dlhs and drhs e5m2",
        ),
        _FP4,
        replace(_FP4, name="fp4_e2m1"),  # the same branch of Qwix (L845-846) under its other name
        Mode(
            "nanoo_fp8",
            "bf16",
            (),
            False,
            "AQT L634-635, L684-685: NANOOFp8Quantization L394-402 (flax NANOOFp8DotGeneralOp)",
            _NANOO,
        ),
        Mode(
            "fp8_nanoo",
            "bf16",
            (),
            False,
            "Qwix L869-870: NANOOFp8Provider L788-795",
            _NANOO,
        ),
    )
}
_TRANSFORMER_ENGINE = Mode(
    "te_*",
    "bf16",
    (),
    False,
    "AQT path L640-641, L686-687: TransformerEngineQuantization L994-1031 (NVIDIA TransformerEngine recipes)",
    "TransformerEngine runs on NVIDIA GPUs only: nothing of it runs on a TPU; priced in bf16",
)


def mode(name: str) -> Mode | None:
    """The mode MaxText runs for this `quantization` value; None for '' (bf16) and for a value MaxText does not
    accept (AQT raises at L643; Qwix quantizes nothing, L862-871)."""
    key = name.strip().lower()
    if key.startswith("te_"):
        return _TRANSFORMER_ENGINE
    return MODES.get(key)


@dataclass(frozen=True)
class MatmulPlan:
    """At which peak the decoder layers' weight matmuls run on one chip under one `quantization` value."""

    quantization: str  # the config's value ('' for none)
    mode: Mode | None
    peak: MatmulPeak  # the chip's peak for the mode's dtype (its bf16 peak when nothing runs quantized)
    bf16_peak: float  # per chip

    @property
    def dtype(self) -> str:
        """The operand dtype of the quantized matmuls; 'bf16' when the mode multiplies nothing in another."""
        return self.mode.dtype if self.mode and self.mode.passes else "bf16"

    @property
    def passes(self) -> tuple[str, ...]:
        return self.mode.passes if self.mode else ()

    @property
    def pass_share(self) -> float:
        """Share of the weight matmuls' FLOPs that run in `dtype` (the three passes have equal FLOPs)."""
        return len(self.passes) / len(PASSES)

    @property
    def speedup(self) -> float:
        """Throughput of the weight matmuls over bf16, the three passes together: the quantized ones at `peak`,
        the others at the bf16 peak (so 2 for int8 on v6e, 1 for fp8 on v6e, 1.2 for aqt_fp8 on TPU7x)."""
        q = self.pass_share
        return 1.0 / (q * self.bf16_peak / self.peak.flops + (1.0 - q))

    @property
    def quantized(self) -> bool:
        """Whether any matmul runs faster than at the bf16 peak."""
        return self.speedup > 1.0

    def describe(self) -> str:
        """E.g. 'int8 matmuls at 1,836 TOP/s per chip'; 'fp8 matmuls at the bf16 peak: no faster fp8 rate on
        this chip'."""
        if not self.quantization:
            return "bf16 matmuls"
        if self.mode is None:
            return f"quantization '{self.quantization}' is not a MaxText mode: bf16 matmuls"
        if self.quantized:
            which = "" if len(self.passes) == len(PASSES) else f" ({', '.join(self.passes)} only)"
            return f"{self.dtype} matmuls{which} at {self.peak.flops / 1e12:,.0f} TOP/s per chip"
        if self.dtype == "bf16":
            return f"{self.quantization}: bf16 matmuls"
        return f"{self.dtype} matmuls at the bf16 peak: no faster {self.dtype} rate on this chip"

    def to_json(self) -> dict[str, object]:
        return {
            "quantization": self.quantization,
            "dtype": self.dtype,
            "passes": list(self.passes),
            "grouped_moe": bool(self.mode and self.mode.grouped_moe),
            "peak_flops_per_chip": self.peak.flops,
            "native": self.peak.native,
            "peak_source": self.peak.source,
            "speedup": self.speedup,
            "mode_source": f"MaxText {MAXTEXT_COMMIT} src/maxtext/layers/quantizations.py: {self.mode.source}"
            if self.mode
            else None,
            "note": self.mode.note if self.mode else "",
        }


def matmul_plan(quantization: str, chip: ChipSpec) -> MatmulPlan:
    """The peak the decoder layers' weight matmuls run at under MaxText's `quantization` on `chip`."""
    m = mode(quantization)
    dtype = m.dtype if m and m.passes else "bf16"
    return MatmulPlan(quantization.strip(), m, chip.matmul_peak(dtype), chip.peak_bf16_flops)
