"""A TPU compiler verdict the tests of withdrawn proposals share: libtpu's out-of-memory for fsdp=16 of the demo
(llama3-8b on v6e-16), as MaxText's train_compile reports it and tests/support/fake_maxtext.py stands in for."""

from __future__ import annotations

from server.compile.verify import VerifyResult, VerifyStatus

GiB = 2**30

OOM = VerifyResult(
    VerifyStatus.DOES_NOT_FIT,
    "does not fit: needs 39.80 GiB of 31.25 GiB per chip on v6e-16 (total, as the TPU compiler reports it)",
    "v6e-16",
    estimate={"memory_per_chip_bytes": round(19.6 * GiB)},
    needs_bytes=39.8 * GiB,
    available_bytes=31.25 * GiB,
    program="maxtext",
)
