"""How much of each collective the compiled schedule hides, read from a committed table measured on the TPU
compiler (issue 26): `server/perf/data/overlap.json`, written by `bench/overlap_table.py` from MaxText's own train
step compiled ahead of time with libtpu, with the MaxText, jax and libtpu versions it was measured with.

A row is keyed by the TPU generation, the mesh-axis group the collective runs over (`fsdp`, `tensor`, `context`,
`expert`, `data`, `pipeline`), the collective kind (`all-gather`, `reduce-scatter`, `all-reduce`, `all-to-all`,
`collective-permute`) and the XLA flag groups it needs (server/config/xla_flags.py names them): `on` lists groups the
run must turn on (their key flag true), `off` groups it must turn off; a row with neither is libtpu's defaults. Its
`hidden` is the share of the collective's time the compiled schedule issues asynchronously with compute between its
start and its done (0 to 1), `behind` which compute that is, one of WINDOWS; the step-time model lets that share hide
behind at most that window's seconds (server/perf/steptime.py), so the figure carries to other sizes. Rows also
have `collectives` (how many collectives of the compiled modules the row summarises), `configs` (which compiles) and,
where the table states it, `seconds` (those collectives' time per step as ASAP prices them, summed over the compiles:
the weight that mixes the rows of the kinds one modelled collective compiles to, server/perf/steptime.py).

`lookup` picks the most specific row whose flag requirements the run's flags meet; with no row for the generation it
takes the same axis and kind on another generation (said in the source), and with none at all the caller's
assumption, said to be one. Every answer says where it came from (`Overlap.source`): `assumptions` in the estimate's
JSON lists them.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from server.config.xla_flags import XlaFlags, parse_xla_flags

# What compute a collective's asynchronous share is scheduled behind:
# - "none": nothing (synchronous, or start and done adjacent);
# - "matmul": the matmul its data feeds or comes from (collective matmul: XLA's windowed einsum loops);
# - "layer": the compute of the layer it belongs to (the scan's prefetch of the next layer's weights);
# - "forward" / "backward": the rest of the forward or backward pass (e.g. the data-parallel all-reduce opt).
WINDOWS = ("none", "matmul", "layer", "forward", "backward")

TABLE = Path(str(resources.files("server.perf") / "data" / "overlap.json"))  # package data


@dataclass(frozen=True)
class Overlap:
    """The share of a collective's time hidden behind compute, what hides it, and where the figure comes from."""

    hidden: float
    behind: str
    source: str
    measured: bool
    seconds: float = 0.0  # the row's `seconds` (0: not stated, or an assumption)

    def to_json(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "behind": self.behind, "source": self.source, "measured": self.measured}


@dataclass(frozen=True)
class Row:
    generation: str
    axis: str
    kind: str
    on: tuple[str, ...]
    off: tuple[str, ...]
    hidden: float
    behind: str
    collectives: int
    configs: tuple[str, ...]
    seconds: float = 0.0  # per step, summed over the compiles (0: the table does not state it)

    def applies(self, flags: XlaFlags) -> bool:
        """Whether the run's flags meet this row's requirements (groups turned on, groups turned off)."""
        enabled = flags.enabled()
        return all(enabled.get(g) is True for g in self.on) and all(enabled.get(g) is False for g in self.off)


@dataclass(frozen=True)
class Table:
    versions: dict[str, str | None]
    rows: tuple[Row, ...]
    path: str

    def label(self) -> str:
        v = self.versions
        return f"maxtext {v.get('maxtext')}, jax {v.get('jax')}, libtpu {v.get('libtpu')}"


def _row(d: dict[str, Any]) -> Row:
    return Row(
        str(d["generation"]),
        str(d["axis"]),
        str(d["kind"]),
        tuple(d.get("on", ())),
        tuple(d.get("off", ())),
        min(1.0, max(0.0, float(d["hidden"]))),
        str(d.get("behind", "")),
        int(d.get("collectives", 0)),
        tuple(d.get("configs", ())),
        max(0.0, float(d.get("seconds", 0.0))),
    )


@functools.cache
def table(path: str = str(TABLE)) -> Table:
    """The committed overlap table (an empty one when the file is missing: every lookup is then an assumption)."""
    p = Path(path)
    if not p.is_file():
        return Table({}, (), path)
    data = json.loads(p.read_text(encoding="utf-8"))
    return Table(dict(data.get("versions", {})), tuple(_row(r) for r in data.get("rows", ())), path)


DEFAULT_FLAGS = parse_xla_flags(None)


def lookup(
    generation: str,
    axis: str,
    kind: str,
    flags: XlaFlags | None = None,
    assumed: tuple[float, str] = (0.0, "nothing: exposed"),
    tab: Table | None = None,
) -> Overlap:
    """The measured overlap of `kind` collectives over `axis` on `generation` under `flags` (libtpu's defaults when
    None); `assumed` (hidden share, behind what) when the table has no row for this axis and kind."""
    tab = tab or table()
    flags = flags or DEFAULT_FLAGS
    rows = [r for r in tab.rows if r.axis == axis and r.kind == kind and r.applies(flags)]
    if not rows:
        hidden, behind = assumed
        return Overlap(hidden, behind, f"assumed: no compiled measurement of {kind} over {axis}", False)
    same = [r for r in rows if r.generation == generation]
    pool = same or rows
    best = max(pool, key=lambda r: (len(r.on) + len(r.off), r.collectives))
    flags_label = "+".join(best.on) or "libtpu defaults"
    if best.off:
        flags_label += " without " + "+".join(best.off)
    where = "" if same else f" (measured on {best.generation}: no {generation} row)"
    source = (
        f"measured: {Path(tab.path).name} {best.generation}/{axis}/{kind} under {flags_label}{where}, "
        f"{best.collectives} collectives in {', '.join(best.configs) or 'the compiled modules'} ({tab.label()})"
    )
    return Overlap(best.hidden, best.behind, source, True, best.seconds)
