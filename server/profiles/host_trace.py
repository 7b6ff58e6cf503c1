"""What a CPU-only profile shows: per-op time from the host trace, as an hlo_stats-shaped table.

A profile captured without accelerators (JAX on CPU, e.g. simulated devices) has no `/device:*`
plane, so XProf's device tools are empty. Its host trace still holds every XLA op execution:
events on `/host:CPU` lines with stats `hlo_op`, `program_id`, `run_id` and `device_ordinal`,
and `/host:metadata` holds each program's HLO (with the collectives' replica groups). This
module turns those into the columns of XProf's hlo_stats (category, hlo_op_name,
hlo_op_expression, tf_op_name, occurrences, total_self_time in microseconds), so the same
analysis runs on them; there are no FLOP or byte counts, hence no roofline `bound_by`.

Op events never contain other op events on CPU, so an op's self time is its duration; the
`end: <op>` marker events carry no `hlo_op` and are skipped.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from server.profiles.xplane import hlo_modules, read_xspace

NOTE = (
    "ASAP read the per-op times from the host trace. There are no FLOP or byte counts, so no roofline, and on CPU "
    "a collective's time is mostly threads waiting for one another: the shapes and replica groups carry over "
    "to TPU, the times do not"
)
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<rest>.*)$")
_OPCODE = re.compile(r"(?:\)|\]|\})\s*(?P<op>[a-z][\w\-]*)\(")
_OP_NAME = re.compile(r'op_name="([^"]*)"')


def _stats(names: dict[int, str], container: Any) -> dict[str, Any]:
    """An event's stats by name (`names`: the plane's stat metadata id -> name, built once per plane: a
    profile has hundreds of thousands of events)."""
    out: dict[str, Any] = {}
    for st in container:
        which = st.WhichOneof("value")
        v: Any = getattr(st, which) if which else None
        if which == "ref_value":
            v = names.get(v)
        out[names.get(st.metadata_id, str(st.metadata_id))] = v
    return out


def _instructions(module_bytes: bytes) -> dict[str, tuple[str, str, str]]:
    """instruction name -> (opcode, expression line, framework op path) from the program's HLO text."""
    from jax._src.lib import xla_client  # jaxlib prints HloModuleProto as text; only needed here

    text = xla_client.XlaComputation(module_bytes).as_hlo_text()
    out: dict[str, tuple[str, str, str]] = {}
    for line in text.splitlines():
        m = _INSTR.match(line)
        if not m:
            continue
        rest = m["rest"]
        op = _OPCODE.search(rest)
        fw = _OP_NAME.search(rest)
        out[m["name"]] = (op["op"] if op else "", line.strip(), fw.group(1) if fw else "")
    return out


def summarize(paths: list[str]) -> dict[str, Any]:
    """Per-op occurrences and self time over all hosts' files, as an hlo_stats-shaped gviz table."""
    ops: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0, 0.0])  # (program, op) -> [count, us]
    programs: dict[int, bytes] = {}
    devices: set[int] = set()
    runs: set[int] = set()
    for path in paths:
        space = read_xspace(path)
        for name, module in hlo_modules(space).items():
            m = re.search(r"\((\d+)\)$", name)
            if m:
                programs[int(m.group(1))] = module
        for plane in space.planes:
            if not plane.name.startswith("/host:CPU"):
                continue
            md = plane.event_metadata
            names = {k: m.name for k, m in plane.stat_metadata.items()}
            for line in plane.lines:
                for ev in line.events:
                    st = _stats(names, ev.stats)
                    if "hlo_op" not in st:
                        continue
                    op = str(st.get("hlo_op") or md[ev.metadata_id].name)
                    prog = int(st.get("program_id") or 0)
                    rec = ops[(prog, op)]
                    rec[0] += 1
                    rec[1] += ev.duration_ps / 1e6
                    if st.get("device_ordinal") is not None:
                        devices.add(int(st["device_ordinal"]))
                    if st.get("run_id") is not None:
                        runs.add(int(st["run_id"]))
    texts: dict[int, dict[str, tuple[str, str, str]]] = {}
    for prog in {p for p, _ in ops}:
        if prog in programs:
            try:
                texts[prog] = _instructions(programs[prog])
            except Exception:  # a program jaxlib cannot print: the op keeps its name only
                texts[prog] = {}
    cols = ["category", "hlo_op_name", "hlo_op_expression", "tf_op_name", "occurrences", "total_self_time"]
    rows = []
    for (prog, op), (count, us) in sorted(ops.items(), key=lambda kv: -kv[1][1]):
        opcode, expr, fw = texts.get(prog, {}).get(op, ("", "", ""))
        values = [opcode or op.split(".")[0], op, expr, fw, count, us]
        rows.append({"c": [{"v": v} for v in values]})
    return {
        "note": NOTE,
        "devices": len(devices),
        "runs": len(runs),
        "hlo_stats": {"cols": [{"id": c} for c in cols], "rows": rows, "p": {}},
    }
