"""How the cost model's figures and sources are said to people, in one place for every surface (Problems, hovers,
the code lens, the CLI, the report JSON): the usable-HBM figure at one precision, and where a piece of evidence comes
from as a reader names it ("ASAP's step-time model", "XProf op profile"), never a module path."""

from __future__ import annotations

import re

from server.config.slices import SOURCES

GIB = 2**30


def gib(n_bytes: float) -> str:
    """A usable-HBM figure in GiB as every surface prints it: two decimals unless whole ('31.25', '15.75', '16')."""
    x = round(n_bytes / GIB, 2)
    return f"{x:.0f}" if x == int(x) else f"{x:.2f}"


def seconds(x: float | None) -> str:
    """A step time as every surface prints it: milliseconds below a second ('812.4 ms'), else seconds ('3.71 s')."""
    if x is None:
        return "-"
    return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.2f} s"


# Where evidence was computed, as people name it. The producers below the presentation write these names; the
# hovers map what older producers (and a report read back from JSON) wrote.
STEP_TIME_MODEL = "ASAP's step-time model"
MEMORY_MODEL = "ASAP's memory model"
COLLECTIVE_MODEL = "ASAP's collective-cost model"
FLOP_COUNT = "ASAP's FLOP count"
XPROF_OPS = "XProf op profile"
XPROF_STEPS = "XProf step table"
XPROF = "XProf profile"

SOURCE_NAMES = (
    ("steptime", STEP_TIME_MODEL),
    ("step-time model", STEP_TIME_MODEL),
    ("memory.py", MEMORY_MODEL),
    ("memory model", MEMORY_MODEL),
    ("collectives.py", COLLECTIVE_MODEL),
    ("collective-cost", COLLECTIVE_MODEL),
    ("arith.py", FLOP_COUNT),
    ("flop count", FLOP_COUNT),
    ("hlo_stats", XPROF_OPS),
    ("op profile", XPROF_OPS),
    ("overview", XPROF_STEPS),
    ("step table", XPROF_STEPS),
    ("xprof", XPROF),
    ("base.yml", "MaxText base.yml"),
)


def spec(generation: str, field: str, cited: str) -> str:
    """A chip spec as a source: 'TPU v6e spec (Google Cloud TPU docs)'; `cited`: the slice table's citation key."""
    name = SOURCES.get(cited, "")
    return f"TPU {generation} spec" + (f" ({name.split(',')[0]})" if name else "")


def readable_source(source: str) -> str:
    """A piece of evidence's source as a reader names it: 'ASAP's step-time model', 'XProf op profile',
    'TPU v6e spec (Google Cloud TPU docs)', never a module path. Several sources (';', '+' or 'vs') are each
    named, once. A source already in these words comes back as it is."""
    names: list[str] = []
    for part in re.split(r";|\s\+\s|\svs\.?\s", source):
        part = part.strip()
        low = part.lower()
        if low.startswith("tpu ") and " spec" in low:
            names.append(part)
            continue
        if low.startswith("spec:"):
            m = re.match(r"spec:\s*(\S+)\s+(\S+)\s*\(([^)]*)\)", part)
            names.append(spec(m.group(1), m.group(2), m.group(3)) if m else "TPU spec")
            continue
        name = next((n for k, n in SOURCE_NAMES if k in low), None)
        if name is None:
            if low.startswith("estimate") or "server/" in low:
                name = "ASAP's estimate"
            elif low.startswith("profile"):
                name = XPROF
            else:
                name = re.sub(r"\S*/\S*\.py\S*", "ASAP", part)  # no module paths, whatever the producer wrote
        names.append(name)
    return " + ".join(dict.fromkeys(names))
