"""Roofline: each component of a step as a point (operational intensity, attainable FLOP/s)
against the chip's peaks, and the time it takes at its bound.

A component doing F FLOPs while moving B bytes through HBM takes
max(F / (peak x efficiency), B / (HBM bandwidth x efficiency)); its operational intensity is
F / B, and it is compute-bound when that is above the ridge point peak / HBM bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

from server.config.slices import ChipSpec


@dataclass(frozen=True)
class Point:
    name: str
    flops: float  # per device, per step
    bytes: float  # HBM bytes per device, per step
    seconds: float
    bound: str  # 'compute' or 'hbm'

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")

    def to_json(self, chip: ChipSpec) -> dict[str, object]:
        peak = chip.peak_bf16_flops / chip.devices_per_chip
        bw = chip.hbm_bw / chip.devices_per_chip
        oi = self.intensity
        attainable = peak if oi == float("inf") else min(peak, oi * bw)
        return {
            "name": self.name,
            "flops": self.flops,
            "hbm_bytes": self.bytes,
            "operational_intensity": None if oi == float("inf") else oi,
            "attainable_flops_per_s": attainable,
            "peak_flops_per_s": peak,
            "seconds": self.seconds,
            "bound": self.bound,
        }


# Share of the shorter of (compute, memory) time that a kernel hides under the longer one. A perfect
# roofline hides all of it (1.0); TPU kernels stream operands through VMEM in tiles and stall at tile
# boundaries, so near the ridge point they run slower than the roofline's corner. 0.5 is the middle
# of the two extremes, which puts a matmul at 2x the ridge intensity at 83% of peak.
OVERLAP = 0.5


def point(name: str, flops: float, nbytes: float, chip: ChipSpec, flop_eff: float, hbm_eff: float) -> Point:
    peak = chip.peak_bf16_flops / chip.devices_per_chip
    bw = chip.hbm_bw / chip.devices_per_chip
    tc = flops / (peak * flop_eff) if flops else 0.0
    tm = nbytes / (bw * hbm_eff) if nbytes else 0.0
    seconds = max(tc, tm) + (1 - OVERLAP) * min(tc, tm)
    return Point(name, flops, nbytes, seconds, "compute" if tc >= tm else "hbm")


def ridge_points(chip: ChipSpec) -> dict[str, float]:
    """FLOPs per byte where HBM and one ICI axis stop limiting (DOMAIN.md §3)."""
    peak = chip.peak_bf16_flops
    return {"hbm": peak / chip.hbm_bw, "ici_axis": peak / (2 * chip.ici_link_bw), "dcn": peak / chip.dcn_bw}
