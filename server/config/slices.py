"""The slice catalog: TPU generations with their per-chip specs (each with its source),
slice naming rules and topologies, and `parse_slice` for `compile_topology` names.

This is the one table of hardware numbers in ASAP; every other module reads it.

One entry is not a spec: `cpu-N`, the N simulated devices of JAX on this machine's CPU
(`--xla_force_host_platform_device_count=N`). It exists only after `register_cpu_slice` was
called with peaks a micro-benchmark measured on this machine (server/lab/cpu_slice.py), and its
sources say so; nothing about it is hard-coded.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

GiB = 1024**3
GB = 10**9

# Sources, cited by key from the spec table below.
SOURCES: dict[str, str] = {
    "gcp-v4": "Google Cloud TPU docs, 'TPU v4' system architecture page (cloud.google.com/tpu/docs/v4)",
    "gcp-v5e": "Google Cloud TPU docs, 'TPU v5e' page (cloud.google.com/tpu/docs/v5e)",
    "gcp-v5p": "Google Cloud TPU docs, 'TPU v5p' page (cloud.google.com/tpu/docs/v5p)",
    "gcp-v6e": "Google Cloud TPU docs, 'TPU v6e (Trillium)' page (cloud.google.com/tpu/docs/v6e)",
    "gcp-tpu7x": "Google Cloud TPU docs, 'TPU7x (Ironwood)' page (cloud.google.com/tpu/docs/tpu7x)",
    "scaling-book": "How to Scale Your Model, jax-ml/scaling-book, tpus.md (TPU specs table)",
    "libtpu-hbm": "the HBM a program may use per JAX device, as libtpu states it when a compile runs out of memory "
    "('exceeds available HBM (15.75G)', G = GiB) and as memory_analysis' limit: libtpu 0.0.42.1 for v4, v5e, v5p "
    "and v6e, measured on this project's machine by compiling a program too large for each chip; 0.0.52 for "
    "v5e, v5p, v6e (the same figures) and tpu7x (MaxText's 128k llama3.1-70b compile, bench/memory_vs_compiler.py, "
    "tests/data/verify/memory_compiled.json hbm_limit_bytes)",
    "gib-hbm": "the generation's page gives the capacity as 16/32 'GB'; it is GiB: the compiler's usable limit "
    "(15.75 / 31.25 GiB, libtpu-hbm) exceeds 16e9 / 32e9 bytes",
    "maxtext-accel": "MaxText src/maxtext/utils/accelerator_to_spec_map.py (topology, wraparound, devices per chip)",
    "domain": "ASAP DOMAIN.md §3 (project domain brief, collected from the sources above)",
    "derived-ici": "per-chip bidirectional ICI bandwidth from the Google Cloud page of the generation "
    "(v6e 800 GB/s, tpu7x 1200 GB/s), divided by the chip's links and by 2 directions",
    "assumed-pcie": "no published figure found; assumed equal to v6e's (scaling book: 3.2e10 B/s per chip)",
    "calibrated-mxu": "calibrated: the value that best predicts the published MaxText runs of this generation "
    "in bench/mfu_references.py (v4: 6 runs, v5e: 24, v5p: 13, v6e: 8; tpu7x: the 8 bf16 dense Ironwood runs of "
    "bench/references.py IRONWOOD_DENSE_REFERENCES, 0.80 in and out of sample), the other model constants held global. "
    "It absorbs what the model does not describe per generation: MXU shape (v5e four 128x128 MXUs per core, "
    "v6e 256x256), clock and compiler maturity",
    "torus-3d": "a 3D torus chip has 6 ICI links (±x, ±y, ±z), as v4 and v5p",
    "domain-hop": "DOMAIN.md §4 (after the scaling book): each hop of a collective costs at least ~1 us",
    # Low-precision matmul peaks (ChipSpec.matmul_peaks).
    "gcp-v4-int8": "Google Cloud TPU docs, 'TPU v4' page: 'Peak compute per chip: 275 teraflops (bf16 or int8)', "
    "so int8 runs at the bf16 rate (the scaling book's table agrees: int8 2.75e14 = bf16)",
    "scaling-book-int8": "How to Scale Your Model, tpus.md specs table, 'FLOPs/s/chip (int8)': v5e 3.94e14, "
    "v5p 9.18e14, v6e 1.84e15 (jax-ml/scaling-book at 04d8de58); JAX's tpu_info (jax-tpu-info) lists the same",
    "jax-tpu-info": "JAX 0.10.2 jax/_src/pallas/mosaic/tpu_info.py get_tpu_info_for_chip (per TensorCore; x2 on "
    "v5p), published as the JAX docs' 'Pallas TPU Hardware Reference' table: int4 at 4x the bf16 rate (v5e 7.88e14, "
    "v5p 1.84e15, v6e 3.68e15 per chip, rounded figures; taken here as 4x the bf16 peak); 'Not Available' for int4 "
    "on v4 and TPU7x",
    "gcp-fp8": "Google Cloud TPU docs, 'TPU7x (Ironwood)' page, 'Peak compute per chip (FP8) (TFLOPs)': v5p 459, "
    "v6e 918 (each its bf16 peak), TPU7x 4614 (twice its bf16 peak); the TPU v5p page lists FP8 459 too",
    "no-fp8-mxu": "no FP8 in the MXU before Ironwood ('Ironwood chips are our first TPUs to support 8-bit "
    "floating point (FP8)', Google, discuss.google.dev 'Inside the optimization of FP8 training on Ironwood'; JAX's "
    "tpu_info: fp8 'Not Available' on v4, v5e, v5p): fp8 operands are multiplied as bf16, at most at the bf16 "
    "peak, as Google's TPU7x page lists for v5p and v6e",
    "no-int8-tpu7x": "no published int8 rate for TPU7x: Google's TPU7x page lists BF16 and FP8 peaks only and JAX's "
    "tpu_info lists int8 and int4 as 'Not Available'; priced at the bf16 peak (never faster than published)",
    "no-int4-v4": "no published int4 rate for TPU v4 (JAX's tpu_info: 'Not Available'); priced at the bf16 peak",
}


@dataclass(frozen=True)
class MatmulPeak:
    """The rate at which a chip's MXUs multiply operands of one dtype: dense ops/s per chip."""

    flops: float
    native: bool  # the MXU multiplies this dtype itself; False: no native rate, so it runs at the bf16 peak
    source: str  # key of SOURCES


# Operand dtypes with a peak in every TPU generation's table (ChipSpec.matmul_peaks).
LOW_PRECISION_DTYPES = ("int8", "fp8", "int4")


@dataclass(frozen=True)
class ChipSpec:
    """Per-chip numbers of one TPU generation. Bandwidths in bytes/s, FLOP/s dense bf16."""

    generation: str
    device_kind: str  # as JAX reports it (jax.devices()[0].device_kind)
    peak_bf16_flops: float
    hbm_bytes: int
    hbm_bw: float
    ici_link_bw: float  # one direction, one link
    ici_links: int  # links per chip
    torus_rank: Literal[2, 3]
    name_counts: Literal["cores", "chips", "devices"]  # what the N in '<gen>-N' counts
    name_units_per_chip: int  # how many of those a chip has
    devices_per_chip: int  # JAX devices per chip
    dcn_bw: float  # data-center network bytes/s per chip, one direction
    pcie_bw: float  # host <-> chip bytes/s (host offload of activations)
    mxu_efficiency: float  # sustained fraction of peak on large matmuls in MaxText training (calibrated)
    tensorcores: int = 1  # TensorCores per chip; XProf reports one device plane (and its peaks) per TensorCore
    mxu_dim: int = 128  # side of the systolic matmul array: a local matmul dimension below it leaves MXU rows idle
    hop_latency: float = 1e-6  # seconds per ring step of a collective (DOMAIN.md §4: "each hop costs at least ~1 us")
    # HBM one program may use per JAX device, as the TPU compiler states it ("exceeds available HBM (15.75G)"):
    # what the memory verdicts compare with. None: capacity less memory.RUNTIME_RESERVE.
    compiler_hbm_bytes: float | None = None
    # 'int8' / 'fp8' / 'int4' -> the peak matmuls with those operands run at, with its source. A dtype the MXU
    # has no native rate for is still listed, at the bf16 peak with native=False: that is what it runs at.
    matmul_peaks: dict[str, MatmulPeak] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # spec field -> key of SOURCES

    @property
    def hbm_ridge(self) -> float:
        """FLOPs per HBM byte where a kernel turns compute-bound (C / BW)."""
        return self.peak_bf16_flops / self.hbm_bw

    def matmul_peak(self, dtype: str) -> MatmulPeak:
        """The peak at which matmuls with `dtype` operands run on this chip. bf16, and a dtype the table has no
        entry for (fp4; any dtype on the measured cpu slice), run at the bf16 peak."""
        if dtype in self.matmul_peaks:
            return self.matmul_peaks[dtype]
        return MatmulPeak(self.peak_bf16_flops, dtype == "bf16", self.sources.get("peak_bf16_flops", ""))


Sourced = tuple[float, str]  # a spec number and the key of SOURCES it comes from


class _Topology(NamedTuple):
    """How a generation's slices are wired and named, from one source (ChipSpec's fields of the same names)."""

    torus_rank: Literal[2, 3]
    name_counts: Literal["cores", "chips", "devices"]
    units_per_chip: int  # ChipSpec.name_units_per_chip
    devices_per_chip: int
    source: str


def _tpu(
    generation: str,
    device_kind: str,
    *,
    peak_bf16_flops: Sourced,
    hbm_bytes: Sourced,
    compiler_hbm_bytes: Sourced,
    hbm_bw: Sourced,
    ici_link_bw: Sourced,
    ici_links: Sourced,
    dcn_bw: Sourced,
    pcie_bw: Sourced,
    mxu_efficiency: Sourced,
    tensorcores: Sourced,
    mxu_dim: Sourced,
    topology: _Topology,
    matmul_peaks: dict[str, MatmulPeak],
) -> ChipSpec:
    """One TPU generation's spec, each number given with its source (ChipSpec.sources keeps them, by field)."""
    numbers = {
        "peak_bf16_flops": peak_bf16_flops,
        "hbm_bytes": hbm_bytes,
        "compiler_hbm_bytes": compiler_hbm_bytes,
        "hbm_bw": hbm_bw,
        "ici_link_bw": ici_link_bw,
        "ici_links": ici_links,
        "dcn_bw": dcn_bw,
        "pcie_bw": pcie_bw,
        "mxu_efficiency": mxu_efficiency,
        "tensorcores": tensorcores,
        "mxu_dim": mxu_dim,
    }
    return ChipSpec(
        generation=generation,
        device_kind=device_kind,
        peak_bf16_flops=peak_bf16_flops[0],
        hbm_bytes=int(hbm_bytes[0]),
        compiler_hbm_bytes=compiler_hbm_bytes[0],
        hbm_bw=hbm_bw[0],
        ici_link_bw=ici_link_bw[0],
        ici_links=int(ici_links[0]),
        torus_rank=topology.torus_rank,
        name_counts=topology.name_counts,
        name_units_per_chip=topology.units_per_chip,
        devices_per_chip=topology.devices_per_chip,
        dcn_bw=dcn_bw[0],
        pcie_bw=pcie_bw[0],
        mxu_efficiency=mxu_efficiency[0],
        tensorcores=int(tensorcores[0]),
        mxu_dim=int(mxu_dim[0]),
        matmul_peaks=matmul_peaks,
        sources={**{k: src for k, (_, src) in numbers.items()}, "topology": topology.source},
    )


CHIPS: dict[str, ChipSpec] = {
    "v4": _tpu(
        "v4",
        "TPU v4",
        peak_bf16_flops=(275e12, "gcp-v4"),
        hbm_bytes=(32 * GiB, "gcp-v4"),
        compiler_hbm_bytes=(31.75 * GiB, "libtpu-hbm"),
        hbm_bw=(1200 * GB, "scaling-book"),
        ici_link_bw=(45e9, "scaling-book"),
        ici_links=(6, "gcp-v4"),
        dcn_bw=(6.25e9, "scaling-book"),
        pcie_bw=(1.6e10, "scaling-book"),
        mxu_efficiency=(0.80, "calibrated-mxu"),
        tensorcores=(2, "gcp-v4"),
        mxu_dim=(128, "scaling-book"),
        topology=_Topology(
            torus_rank=3, name_counts="cores", units_per_chip=2, devices_per_chip=1, source="maxtext-accel"
        ),
        matmul_peaks={
            "int8": MatmulPeak(275e12, True, "gcp-v4-int8"),
            "fp8": MatmulPeak(275e12, False, "no-fp8-mxu"),
            "int4": MatmulPeak(275e12, False, "no-int4-v4"),
        },
    ),
    "v5e": _tpu(
        "v5e",
        "TPU v5 lite",
        peak_bf16_flops=(197e12, "gcp-v5e"),
        hbm_bytes=(16 * GiB, "gib-hbm"),
        compiler_hbm_bytes=(15.75 * GiB, "libtpu-hbm"),
        hbm_bw=(819 * GB, "gcp-v5e"),
        ici_link_bw=(45e9, "scaling-book"),
        ici_links=(4, "scaling-book"),
        dcn_bw=(3.125e9, "scaling-book"),
        pcie_bw=(1.6e10, "scaling-book"),
        mxu_efficiency=(0.95, "calibrated-mxu"),
        tensorcores=(1, "gcp-v5e"),
        mxu_dim=(128, "scaling-book"),
        topology=_Topology(
            torus_rank=2, name_counts="chips", units_per_chip=1, devices_per_chip=1, source="maxtext-accel"
        ),
        matmul_peaks={
            "int8": MatmulPeak(394e12, True, "scaling-book-int8"),
            "fp8": MatmulPeak(197e12, False, "no-fp8-mxu"),
            "int4": MatmulPeak(788e12, True, "jax-tpu-info"),
        },
    ),
    "v5p": _tpu(
        "v5p",
        "TPU v5",
        peak_bf16_flops=(459e12, "gcp-v5p"),
        hbm_bytes=(95 * GiB, "gcp-v5p"),
        compiler_hbm_bytes=(95.74 * GiB, "libtpu-hbm"),
        hbm_bw=(2765 * GB, "gcp-v5p"),
        ici_link_bw=(90e9, "scaling-book"),
        ici_links=(6, "gcp-v5p"),
        dcn_bw=(6.25e9, "scaling-book"),
        pcie_bw=(1.6e10, "scaling-book"),
        mxu_efficiency=(0.85, "calibrated-mxu"),
        tensorcores=(2, "gcp-v5p"),
        mxu_dim=(128, "scaling-book"),
        topology=_Topology(
            torus_rank=3, name_counts="cores", units_per_chip=2, devices_per_chip=1, source="maxtext-accel"
        ),
        matmul_peaks={
            "int8": MatmulPeak(918e12, True, "scaling-book-int8"),
            "fp8": MatmulPeak(459e12, False, "gcp-fp8"),
            "int4": MatmulPeak(1836e12, True, "jax-tpu-info"),
        },
    ),
    "v6e": _tpu(
        "v6e",
        "TPU v6 lite",
        peak_bf16_flops=(918e12, "gcp-v6e"),
        hbm_bytes=(32 * GiB, "gib-hbm"),
        compiler_hbm_bytes=(31.25 * GiB, "libtpu-hbm"),
        hbm_bw=(1638 * GB, "gcp-v6e"),
        ici_link_bw=(100e9, "derived-ici"),  # 800 GB/s bidirectional per chip over 4 links
        ici_links=(4, "scaling-book"),
        dcn_bw=(12.5e9, "scaling-book"),
        pcie_bw=(3.2e10, "scaling-book"),
        mxu_efficiency=(0.70, "calibrated-mxu"),
        tensorcores=(1, "gcp-v6e"),
        mxu_dim=(256, "scaling-book"),
        topology=_Topology(
            torus_rank=2, name_counts="chips", units_per_chip=1, devices_per_chip=1, source="maxtext-accel"
        ),
        matmul_peaks={
            "int8": MatmulPeak(1836e12, True, "gcp-v6e"),
            "fp8": MatmulPeak(918e12, False, "gcp-fp8"),
            "int4": MatmulPeak(3672e12, True, "jax-tpu-info"),
        },
    ),
    "tpu7x": _tpu(
        "tpu7x",
        "TPU7x",
        peak_bf16_flops=(2307e12, "gcp-tpu7x"),
        hbm_bytes=(192 * GiB, "gcp-tpu7x"),
        compiler_hbm_bytes=(98956046499.84, "libtpu-hbm"),  # 92.16 GiB a device (libtpu 0.0.52)
        hbm_bw=(7380 * GB, "gcp-tpu7x"),
        ici_link_bw=(100e9, "derived-ici"),  # 1200 GB/s bidirectional per chip over 6 links
        ici_links=(6, "torus-3d"),
        dcn_bw=(12.5e9, "gcp-tpu7x"),
        pcie_bw=(3.2e10, "assumed-pcie"),
        mxu_efficiency=(0.80, "calibrated-mxu"),
        tensorcores=(2, "gcp-tpu7x"),
        mxu_dim=(256, "scaling-book"),
        topology=_Topology(
            torus_rank=3, name_counts="devices", units_per_chip=2, devices_per_chip=2, source="maxtext-accel"
        ),
        matmul_peaks={
            "int8": MatmulPeak(2307e12, False, "no-int8-tpu7x"),
            "fp8": MatmulPeak(4614e12, True, "gcp-fp8"),
            "int4": MatmulPeak(2307e12, False, "no-int8-tpu7x"),
        },
    ),
}

for _chip in CHIPS.values():
    _chip.sources.setdefault("hop_latency", "domain-hop")
    for _dtype, _peak in _chip.matmul_peaks.items():
        _chip.sources[f"{_dtype}_peak"] = _peak.source

# Generation aliases accepted in names (MaxText and gcloud spellings).
ALIASES: dict[str, str] = {"v5litepod": "v5e", "v5lite": "v5e", "ironwood": "tpu7x", "v7x": "tpu7x"}

# Chips -> topology of the 2D generations (v5e, v6e), from MaxText's accelerator map (v5e-N/v6e-N count chips).
TOPOLOGY_2D: dict[int, tuple[int, ...]] = {
    1: (1, 1),
    4: (2, 2),
    8: (2, 4),
    16: (4, 4),
    32: (4, 8),
    64: (8, 8),
    128: (8, 16),
    256: (16, 16),
}
# Chips -> topology of the 3D generations, from MaxText's accelerator map (names count cores or devices,
# two per chip, so v5p-512 is 256 chips, 4x8x8). v5p and tpu7x share their shapes; tpu7x adds a few.
TOPOLOGY_V4: dict[int, tuple[int, ...]] = {
    4: (2, 2, 1),
    8: (2, 2, 2),
    16: (2, 2, 4),
    32: (2, 4, 4),
    64: (4, 4, 4),
    128: (4, 4, 8),
    192: (4, 4, 12),
    256: (4, 8, 8),
    512: (8, 8, 8),
    768: (8, 8, 12),
    1024: (8, 8, 16),
    2048: (8, 16, 16),
}
TOPOLOGY_V5P: dict[int, tuple[int, ...]] = {
    4: (2, 2, 1),
    8: (2, 2, 2),
    16: (2, 2, 4),
    32: (2, 4, 4),
    64: (4, 4, 4),
    128: (4, 4, 8),
    192: (4, 4, 12),
    256: (4, 8, 8),
    320: (4, 4, 20),
    384: (4, 8, 12),
    448: (4, 4, 28),
    512: (8, 8, 8),
    576: (4, 12, 12),
    640: (4, 8, 20),
    704: (4, 4, 44),
    768: (8, 8, 12),
    832: (4, 4, 52),
    896: (4, 8, 28),
    960: (4, 12, 20),
    1024: (8, 8, 16),
    1088: (4, 4, 68),
    1152: (8, 12, 12),
    1216: (4, 4, 76),
    1280: (8, 8, 20),
    1344: (4, 12, 28),
    1408: (4, 8, 44),
    1472: (4, 4, 92),
    1536: (8, 12, 16),
    1600: (4, 20, 20),
    1664: (4, 8, 52),
    1728: (12, 12, 12),
    1792: (8, 8, 28),
    1856: (4, 4, 116),
    1920: (8, 12, 20),
    1984: (4, 4, 124),
    2048: (8, 16, 16),
    2112: (4, 12, 44),
    2176: (4, 8, 68),
    2240: (4, 20, 28),
    2304: (12, 12, 16),
    2368: (4, 4, 148),
    2432: (4, 8, 76),
    2496: (4, 12, 52),
    2560: (8, 16, 20),
    2624: (4, 4, 164),
    2688: (8, 12, 28),
    2752: (4, 4, 172),
    2816: (8, 8, 44),
    2880: (12, 12, 20),
    2944: (4, 8, 92),
    3008: (4, 4, 188),
    3072: (12, 16, 16),
    3136: (4, 28, 28),
    3200: (8, 20, 20),
    3264: (4, 12, 68),
    3328: (8, 8, 52),
    3392: (4, 4, 212),
    3456: (12, 12, 24),
    3520: (4, 20, 44),
    3584: (8, 16, 28),
    3648: (4, 12, 76),
    3712: (4, 8, 116),
    3776: (4, 4, 236),
    3840: (12, 16, 20),
    3904: (4, 4, 244),
    3968: (4, 8, 124),
    4032: (12, 12, 28),
    4096: (16, 16, 16),
    4160: (4, 20, 52),
    4224: (8, 12, 44),
    4352: (8, 8, 68),
    4416: (4, 12, 92),
    4480: (8, 20, 28),
    4608: (12, 16, 24),
    4736: (4, 8, 148),
    4800: (12, 20, 20),
    4864: (8, 8, 76),
    4928: (4, 28, 44),
    4992: (8, 12, 52),
    5120: (16, 16, 20),
    5184: (12, 12, 36),
    5248: (4, 8, 164),
    5376: (12, 16, 28),
    5440: (4, 20, 68),
    5504: (4, 8, 172),
    5568: (4, 12, 116),
    5632: (8, 16, 44),
    5760: (12, 20, 24),
    5824: (4, 28, 52),
    5888: (8, 8, 92),
    5952: (4, 12, 124),
    6016: (4, 8, 188),
    6080: (4, 20, 76),
    6144: (16, 16, 24),
    6912: (12, 24, 24),
    8960: (16, 20, 28),
}
TOPOLOGY_TPU7X: dict[int, tuple[int, ...]] = {
    1: (1, 1, 1),
    **TOPOLOGY_V5P,
    8192: (16, 16, 32),
    9216: (16, 24, 24),
}
TOPOLOGIES: dict[str, dict[int, tuple[int, ...]]] = {
    "v4": TOPOLOGY_V4,
    "v5e": TOPOLOGY_2D,
    "v5p": TOPOLOGY_V5P,
    "v6e": TOPOLOGY_2D,
    "tpu7x": TOPOLOGY_TPU7X,
}


class SliceError(ValueError):
    """A slice name ASAP cannot resolve; the message says which names are valid."""


@dataclass(frozen=True)
class Slice:
    name: str  # canonical, e.g. 'v5e-256'
    chip: ChipSpec
    topology: tuple[int, ...]  # chips per physical axis
    wrap: tuple[bool, ...]  # wraparound link per physical axis
    num_slices: int = 1

    @property
    def chips(self) -> int:
        return math.prod(self.topology)

    @property
    def total_chips(self) -> int:
        return self.chips * self.num_slices

    @property
    def devices_per_slice(self) -> int:
        return self.chips * self.chip.devices_per_chip

    @property
    def devices(self) -> int:
        return self.devices_per_slice * self.num_slices

    @property
    def topology_str(self) -> str:
        return "x".join(map(str, self.topology))

    def describe(self) -> str:
        s = f"{self.name} ({self.chips} chips, {self.topology_str}, {self.devices_per_slice} devices"
        return s + (f", x{self.num_slices} slices)" if self.num_slices > 1 else ")")


def _wrap(topology: tuple[int, ...], rank: int) -> tuple[bool, ...]:
    """Wraparound links per axis, as MaxText's accelerator map declares them.

    2D (v5e/v6e): an axis of 16 chips is a full ring (8x16 wraps on 16; 16x16 on both).
    3D (v4/v5p/tpu7x): slices of 64 chips (one 4x4x4 cube) and more wrap on every axis; smaller are open.
    """
    if rank == 2:
        return tuple(d == 16 for d in topology)
    return tuple(math.prod(topology) >= 64 for _ in topology)


# ASCII digits only, at most 9 of them: a count or a side Python's int() reads exactly, and no slice is larger.
_NAME = re.compile(
    r"^\s*(?P<gen>[a-z0-9]+?)(?:-(?P<n>[0-9]{1,9})|:(?P<topo>[0-9]{1,9}(?:x[0-9]{1,9}){1,2}))\s*$", re.I | re.ASCII
)
# The most slices a job may declare: far beyond any multislice job, and small enough that every device count and
# product the cost model forms from it stays an exact, finite number.
MAX_SLICES = 1_000_000


def name_generation(name: str) -> str | None:
    """The generation a slice name ('v5e-256', 'v5p:4x4x8', 'v5litepod-16') is of, aliases resolved, as
    parse_slice reads it; None when it is not a slice name. The generation need not be in the table."""
    m = _NAME.match(str(name))
    if not m:
        return None
    gen = m["gen"].lower()
    return ALIASES.get(gen, gen)


def name_chips(name: str) -> int | None:
    """How many chips a slice name stands for by parse_slice's rule ('<gen>-N': N over the generation's
    name_units_per_chip; '<gen>:AxB': the product), whether or not the slice is in the topology table;
    None when it is not a slice name of a known generation."""
    m = _NAME.match(str(name))
    gen = name_generation(name)
    if m is None or gen not in CHIPS:
        return None
    if m["topo"]:
        return math.prod(int(d) for d in m["topo"].split("x"))
    return int(m["n"]) // CHIPS[gen].name_units_per_chip


def known_names(gen: str) -> list[str]:
    chip = CHIPS[gen]
    return [f"{gen}-{c * chip.name_units_per_chip}" for c in sorted(TOPOLOGIES[gen])]


def parse_slice(name: str, num_slices: int = 1) -> Slice:
    """Resolve a `compile_topology` name ('v5e-256', 'v5p-512', 'tpu7x-8', or 'v5e:16x16')."""
    if not isinstance(num_slices, int) or isinstance(num_slices, bool) or not 1 <= num_slices <= MAX_SLICES:
        raise SliceError(f"number of slices must be a whole number from 1 to {MAX_SLICES}, got {num_slices!r}")
    m = _NAME.match(str(name))
    gen = name_generation(name)
    if m is None or gen is None:
        raise SliceError(f"'{name}' is not a TPU slice name; expected e.g. v5e-256, v5p-512, v6e-16, v4-128, tpu7x-8")
    if gen == CPU and gen not in CHIPS:
        raise SliceError(
            f"'{name}': the cpu slice exists only once its peaks were measured on this machine "
            "(server/lab/cpu_slice.py, run by bench/closed_loop.py); it has no published specs"
        )
    if gen not in CHIPS:
        raise SliceError(f"unknown TPU generation '{m['gen']}' in '{name}'; known: {', '.join(CHIPS)}")
    chip = CHIPS[gen]
    if m["topo"]:
        topology = tuple(int(d) for d in m["topo"].split("x"))
        if len(topology) != chip.torus_rank or min(topology) < 1:
            raise SliceError(f"'{name}': {gen} topologies have {chip.torus_rank} axes")
    else:
        n = int(m["n"])
        units = chip.name_units_per_chip
        if n % units:
            raise SliceError(
                f"'{name}': {gen}-N counts {chip.name_counts} ({units} per chip), so N must be a multiple "
                f"of {units}; valid names: {', '.join(known_names(gen))}"
            )
        chips = n // units
        table = TOPOLOGIES[gen]
        if chips not in table:
            raise SliceError(
                f"'{name}' is not a {gen} slice ({gen}-N counts {chip.name_counts}); "
                f"valid names: {', '.join(known_names(gen))}"
            )
        topology = table[chips]
    chips = math.prod(topology)
    canonical = f"{gen}-{chips * chip.name_units_per_chip}"
    return Slice(canonical, chip, topology, _wrap(topology, chip.torus_rank), num_slices)


# -- the measured CPU "slice" ------------------------------------------------------------------------------
CPU = "cpu"


@dataclass(frozen=True)
class CpuPeaks:
    """What a micro-benchmark measured for JAX's simulated CPU devices, all of them running at once (so each
    device's share of the machine): per-device rates, as the chip table holds them."""

    devices: int
    matmul_flops: float  # bf16 matmul FLOP/s per device, every device multiplying at once
    copy_bw: float  # bytes/s per device read + written by an elementwise kernel, every device at once
    collective_bw: float  # bytes/s per device, both directions: all-gather V(X-1)/X over its time
    hop_latency: float  # seconds per ring step: a tiny all-reduce's time / (ring steps x 2)
    memory_bytes: int  # host memory / devices
    measured_at: str  # ISO time
    by: str  # what measured it
    details: dict[str, float] = field(default_factory=dict)  # the raw timings behind each number


def cpu_topology(devices: int) -> tuple[int, ...]:
    """A 2-D shape for N simulated devices (2 x N/2 when N is even): only so that the mesh enumeration offers
    every degree 2, 4, ..., N; the devices are threads of one process with no physical links between them."""
    return (2, devices // 2) if devices % 2 == 0 and devices > 2 else (1, devices)


def register_cpu_slice(peaks: CpuPeaks) -> Slice:
    """Add (or replace) the `cpu` generation with the measured peaks; returns the `cpu-N` slice."""
    key = "measured-cpu"
    SOURCES[key] = (
        f"measured on this machine by {peaks.by} at {peaks.measured_at}: bf16 matmul, elementwise copy, "
        f"all-gather and tiny all-reduce on {peaks.devices} simulated CPU devices running at once"
    )
    SOURCES["cpu-model"] = (
        "not a hardware figure: the CPU devices share one process's memory, so there is no MXU (mxu_dim 1), no "
        "separate host link (pcie = copy bandwidth), no network between slices (dcn = collective bandwidth), and "
        "the measured matmul rate is already sustained (mxu_efficiency 1)"
    )
    SOURCES["host-memory"] = f"this machine's physical memory / {peaks.devices} devices (os.sysconf)"
    CHIPS[CPU] = ChipSpec(
        generation=CPU,
        device_kind="cpu",  # jax.devices()[0].device_kind on the CPU backend
        peak_bf16_flops=peaks.matmul_flops,
        hbm_bytes=peaks.memory_bytes,
        hbm_bw=peaks.copy_bw,
        ici_link_bw=peaks.collective_bw / 2,  # one direction: collectives price 2 x link on a ring
        ici_links=2,
        torus_rank=2,
        name_counts="devices",
        name_units_per_chip=1,
        devices_per_chip=1,
        dcn_bw=peaks.collective_bw,
        pcie_bw=peaks.copy_bw,
        mxu_efficiency=1.0,
        mxu_dim=1,
        hop_latency=peaks.hop_latency,
        sources={
            "peak_bf16_flops": key,
            "hbm_bytes": "host-memory",
            "hbm_bw": key,
            "ici_link_bw": key,
            "hop_latency": key,
            "ici_links": "cpu-model",
            "dcn_bw": "cpu-model",
            "pcie_bw": "cpu-model",
            "mxu_efficiency": "cpu-model",
            "mxu_dim": "cpu-model",
            "topology": "cpu-model",
        },
    )
    TOPOLOGIES[CPU] = {peaks.devices: cpu_topology(peaks.devices)}
    return parse_slice(f"{CPU}-{peaks.devices}")


def unregister_cpu_slice() -> None:
    """Remove the `cpu` generation (tests; a process that measured again registers anew)."""
    CHIPS.pop(CPU, None)
    TOPOLOGIES.pop(CPU, None)
