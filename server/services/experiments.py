"""Closing the loop (issue 9): ASAP's experiment log, the outcomes of applied proposals, and its track record.

- Every analysis the Coordinator computes is an *experiment* in ASAP's store: the config (path and hash),
  slice, mesh, the linked profile's measured step, the diagnosis and each proposal with its predictions
  (step time, MFU, speedup, per-chip HBM, stated confidence). Its id travels in the analysis JSON.
- Applying a proposal (the editor's quick fix, or `asap outcome --experiment ID --proposal N`) records an
  *application*.
- An *outcome* matches a new profile of the changed config to the application whose mesh the config now has,
  measures step time, MFU and the bottleneck again, and records predicted vs measured. It is also written as a
  knowledge record (the kb/history schema, kind "measured") to ASAP's outcomes directory, which the knowledge
  store indexes with kb/history, so the Proposal agent retrieves it next time.
- `track_record()` is ASAP's own track record (`asap stats`): step-time and memory prediction errors per
  generation, and a reliability table of stated confidence against the fraction of proposals that delivered
  at least the predicted direction of improvement. Once MIN_OUTCOMES outcomes with a measured baseline exist,
  `Calibrator` maps stated confidence through it (the rule is in its docstring).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils
from pydantic import BaseModel, ConfigDict

from server.common import pg_store, store
from server.services.analysis import Analysis

MIN_OUTCOMES = 20  # outcomes with a measured baseline before stated confidence is recalibrated
PRIOR_WEIGHT = 5.0  # pseudo-outcomes at the stated confidence, per reliability bin
BINS = ((0.0, 0.5), (0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.01))
log = logging.getLogger("asap")


class OutcomeError(ValueError):
    """Why a profile cannot be recorded as the outcome of a proposal (the message says what to do)."""


def outcomes_dir() -> Path:
    return store.outcomes_dir()


def _db(db: sqlite_utils.Database | None = None) -> sqlite_utils.Database:
    """The store, with the log's tables created with their column types (a first row with a NULL must not
    make a number column TEXT). A store whose log tables are of another shape, or damaged, is moved aside and
    recreated (server/common/store.py); `db` is then closed and the new connection returned."""
    d = db if db is not None else store.connect()
    why = _schema_problem(d)
    if why is not None:
        d = store.recreate(d, f"the experiment log: {why}", _schema_problem)
    for name, columns in _TABLES.items():
        if name not in d.table_names():
            d.table(name).create(columns, pk="id", if_not_exists=True)
    return d


def _schema_problem(d: sqlite_utils.Database) -> str | None:
    """What of the log's tables is not a shape this module can read (a column it reads missing, a view in a
    table's place, a damaged file); None when every one present is. A table that lacks only columns nothing
    reads gets them on its next insert (`alter=True`)."""
    try:
        views = set(d.view_names())
        tables = set(d.table_names())
        for name, columns in _READ.items():
            if name in views:
                return f"{name} is a view"
            if name in tables:
                have = {c.name for c in d[name].columns}
                missing = [c for c in columns if c not in have]
                if missing:
                    more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
                    return f"table {name} has no column {', '.join(missing[:3])}{more}"
    except store.sqlite3.DatabaseError as e:
        if store.is_damaged(e):
            return str(e)
        raise
    return None


_TABLES: dict[str, dict[str, type]] = {
    "experiments": {
        "id": str,
        "created": float,
        "config_path": str,
        "config_hash": str,
        "slice": str,
        "generation": str,
        "mesh": str,
        "profile": str,
        "measured_step_s": float,
        "measured_mfu": float,
        "estimate": str,
        "diagnosis": str,
        "proposals": str,
        "backend": str,
    },
    "applications": {
        "id": str,
        "experiment_id": str,
        "rank": int,
        "config_path": str,
        "applied_at": float,
        "ici": str,
        "dcn": str,
        "other_changes": str,
    },
    "outcomes": {
        "id": str,
        "experiment_id": str,
        "application_id": str,
        "rank": int,
        "created": float,
        "generation": str,
        "slice": str,
        "profile": str,
        "predicted_step_s": float,
        "measured_step_s": float,
        "step_error": float,
        "predicted_mfu": float,
        "measured_mfu": float,
        "predicted_hbm_bytes": float,
        "measured_hbm_bytes": float,
        "memory_error": float,
        "baseline_step_s": float,
        "predicted_speedup": float,
        "measured_speedup": float,
        "delivered": int,
        "stated_confidence": float,
        "bottleneck_before": str,
        "bottleneck_after": str,
        "bottleneck_moved": int,
    },
}


# The columns each table's readers use: a table without one of them is of another shape (moved aside).
_READ: dict[str, tuple[str, ...]] = {
    "experiments": ("id", "generation", "slice", "mesh", "measured_step_s", "estimate", "diagnosis", "proposals"),
    "applications": ("id", "experiment_id", "rank", "config_path", "applied_at", "ici", "dcn", "other_changes"),
    "outcomes": (
        "id",
        "created",
        "generation",
        "stated_confidence",
        "delivered",
        "step_error",
        "memory_error",
        "bottleneck_moved",
    ),
}


def _mesh_of(an: Analysis) -> dict[str, dict[str, int]]:
    return {
        "ici": an.check.degrees("ici", drop_ones=True),
        "dcn": an.check.degrees("dcn", drop_ones=True),
    }


def config_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -- experiments ----------------------------------------------------------------------------------------
def record_analysis(
    an: Analysis,
    config: Path,
    text: str,
    *,
    diagnosis: dict[str, Any] | None,
    proposals: list[dict[str, Any]],
    backend: str,
    profile: str | None = None,
    measured_step_s: float | None = None,
    measured_mfu: float | None = None,
    db: sqlite_utils.Database | None = None,
) -> str:
    """Log one analysis of the config `an`; its id. The Coordinator passes the parts of its typed result
    (server/agents/report.py) this log keeps: the diagnosis and the proposals as their JSON, the backend's
    name, and the linked profile (its source) with what it measured for this mesh."""
    est = an.estimate
    sl = an.check.slice
    cfg = an.config
    row = {
        "id": uuid.uuid4().hex[:12],
        "created": time.time(),
        "config_path": str(config.resolve()),
        "config_hash": config_hash(text),
        "slice": sl.name if sl else None,
        "generation": sl.chip.generation if sl else None,
        "mesh": json.dumps(_mesh_of(an)),
        "profile": profile,
        "measured_step_s": measured_step_s,
        "measured_mfu": measured_mfu,
        "estimate": json.dumps(
            {
                "step_s": est.time.step_s,
                "mfu": est.mfu,
                "hbm_bytes": est.memory.total,
                "bottleneck": est.time.bottleneck()[0],
                "model": {
                    "name": est.shape.name,
                    "params_b": est.params.total(est.shape.layers) / 1e9,
                    "emb": est.shape.emb,
                    "layers": est.shape.layers,
                    "q_heads": est.shape.q_heads,
                    "kv_heads": est.shape.kv_heads,
                    "mlp": est.shape.mlp,
                    "experts": est.shape.experts,
                    "seq": est.seq,
                },
                "per_device_batch_size": est.pdbs,  # the value the estimate priced (checked, ASAP112)
                "remat_policy": str(cfg.get("remat_policy", "full")),
            }
        )
        if est
        else None,
        "diagnosis": json.dumps(diagnosis),
        "proposals": json.dumps(proposals),
        "backend": backend,
    }
    _keep(_db(db), "experiments", row)
    return str(row["id"])


def _keep(d: sqlite_utils.Database, table: str, row: dict[str, Any]) -> None:
    """Insert `row` into the local log and, when `ASAP_STORE` names a shared log, into it too (or its outbox)."""
    d.table(table).insert(row, pk="id", alter=True)
    shared = pg_store.shared()
    if shared is not None:
        shared.write(table, {k: v for k, v in row.items() if k != "record"})


def experiment(exp_id: str, db: sqlite_utils.Database | None = None) -> dict[str, Any]:
    row: dict[str, Any] | None
    try:
        row = dict(_db(db).table("experiments").get(exp_id))
    except sqlite_utils.db.NotFoundError:
        row = _shared_experiment(exp_id)
    if row is None:
        raise OutcomeError(f"no experiment {exp_id} in ASAP's log ({store.cache_dir()})") from None
    for k in ("mesh", "estimate", "diagnosis", "proposals"):
        row[k] = json.loads(row[k]) if row[k] else None
    return row


def _shared_experiment(exp_id: str) -> dict[str, Any] | None:
    """A teammate's experiment from the shared log (None without one, when unreachable, or when it has none)."""
    shared = pg_store.shared()
    if shared is None or not shared.available():
        return None
    try:
        rows = shared.query("SELECT * FROM experiments WHERE id = %s", [exp_id])
    except Exception as e:  # unreachable: the local log answered already
        log.warning("shared store %s: %s", shared.shown, pg_store.redact(str(e), shared.url))
        return None
    if not rows:
        return None
    row = rows[0]
    row.pop("user_name", None)
    return row


def record_applied(
    exp_id: str, rank: int, config: Path, db: sqlite_utils.Database | None = None, when: float | None = None
) -> dict[str, Any]:
    """Log that proposal `rank` of experiment `exp_id` was applied to `config`."""
    d = _db(db)
    ex = experiment(exp_id, d)
    prop = next((p for p in ex["proposals"] if p["rank"] == rank and not p["keep_current"]), None)
    if prop is None:
        raise OutcomeError(f"experiment {exp_id} has no proposal {rank}")
    row = {
        "id": uuid.uuid4().hex[:12],
        "experiment_id": exp_id,
        "rank": rank,
        "config_path": str(config.resolve()),
        "applied_at": time.time() if when is None else when,
        "ici": json.dumps(prop["ici"]),
        "dcn": json.dumps(prop["dcn"]),
        "other_changes": json.dumps(prop["other_changes"]),
    }
    _keep(d, "applications", row)
    return row


def _same_changes(an: Analysis, other: dict[str, Any]) -> bool:
    return all(str(an.config.get(k)) == str(v) for k, v in other.items())


def find_application(an: Analysis, config: Path, db: sqlite_utils.Database | None = None) -> dict[str, Any]:
    """The newest application to this config whose mesh (and batch/remat changes) the config has now."""
    d = _db(db)
    if "applications" not in d.table_names():
        raise OutcomeError("no proposal was applied yet (apply one with its quick fix, or pass --experiment)")
    rows = list(
        d.query("select * from applications where config_path = ? order by applied_at desc", [str(config.resolve())])
    )
    if not rows:
        raise OutcomeError(f"no proposal was applied to {config} (apply one with its quick fix)")
    mesh = _mesh_of(an)
    for r in rows:
        same_mesh = json.loads(r["ici"]) == mesh["ici"] and json.loads(r["dcn"]) == mesh["dcn"]
        if same_mesh and _same_changes(an, json.loads(r["other_changes"])):
            return dict(r)
    applied = ", ".join(f"proposal {r['rank']} ({json.loads(r['ici'])})" for r in rows[:3])
    raise OutcomeError(
        f"the config's mesh {mesh['ici']} is none of the applied proposals ({applied}): it was edited since, so "
        "ASAP cannot say which prediction this run tests"
    )


# -- outcomes -------------------------------------------------------------------------------------------
@dataclass
class Measured:
    """What a profile of the changed config shows (server/profile_analysis.compare)."""

    step_s: float
    mfu: float | None
    bottleneck: str
    source: str
    captured_at: float  # the profile files' newest mtime
    mismatch: list[str] = field(default_factory=list)
    memory_bytes: float | None = None  # per chip, when the TPU compiler verified the applied mesh


Number = int | float  # kept as written: an int stays an int in the JSON


class Outcome(BaseModel):
    """An applied proposal's outcome: predicted against measured. A row of the `outcomes` table, plus the path of
    the knowledge record written for it; the editor's Record Outcome reply and `asap outcome --json`."""

    model_config = ConfigDict(extra="forbid")

    id: str
    experiment_id: str
    application_id: str
    rank: int
    created: Number
    generation: str | None
    slice: str | None
    profile: str
    predicted_step_s: Number
    measured_step_s: Number
    step_error: Number
    predicted_mfu: Number | None
    measured_mfu: Number | None
    predicted_hbm_bytes: Number | None
    measured_hbm_bytes: Number | None
    memory_error: Number | None
    baseline_step_s: Number | None
    predicted_speedup: Number | None
    measured_speedup: Number | None
    delivered: bool | None
    stated_confidence: Number
    bottleneck_before: str | None
    bottleneck_after: str
    bottleneck_moved: bool
    record: str  # the knowledge record (kb/history schema) written for it


def record_outcome(
    an: Analysis,
    config: Path,
    measured: Measured,
    exp_id: str | None = None,
    rank: int | None = None,
    db: sqlite_utils.Database | None = None,
) -> Outcome:
    """Match the profile to the applied proposal, record predicted vs measured; the outcome."""
    d = _db(db)
    if measured.mismatch:
        raise OutcomeError("the profile is of another run: " + "; ".join(measured.mismatch))
    if exp_id is not None and rank is not None:
        app = record_applied(exp_id, rank, config, d, when=measured.captured_at - 1e-3)
    else:
        app = find_application(an, config, d)
        if measured.captured_at < app["applied_at"]:
            raise OutcomeError(
                f"the profile ({time.strftime('%Y-%m-%d %H:%M', time.localtime(measured.captured_at))}) predates "
                f"applying proposal {app['rank']} "
                f"({time.strftime('%Y-%m-%d %H:%M', time.localtime(app['applied_at']))}): it is not a run of it"
            )
    ex = experiment(app["experiment_id"], d)
    prop = next(p for p in ex["proposals"] if p["rank"] == app["rank"])
    predicted_step = float(prop["expected"]["step_s"])
    predicted_speedup = prop["expected"]["speedup"]
    baseline = ex["measured_step_s"]
    measured_speedup = baseline / measured.step_s if baseline else None
    before_bottleneck = (ex["diagnosis"] or {}).get("bottleneck")
    delivered = None
    if measured_speedup is not None and predicted_speedup is not None:
        # the predicted direction: faster when a speedup above 1 was promised, not slower otherwise
        delivered = measured_speedup > 1.0 if predicted_speedup > 1.0 else measured_speedup >= 0.97
    row = {
        "id": uuid.uuid4().hex[:12],
        "experiment_id": ex["id"],
        "application_id": app["id"],
        "rank": app["rank"],
        "created": time.time(),
        "generation": ex["generation"],
        "slice": ex["slice"],
        "profile": measured.source,
        "predicted_step_s": predicted_step,
        "measured_step_s": measured.step_s,
        "step_error": (predicted_step - measured.step_s) / measured.step_s,
        "predicted_mfu": prop["expected"]["mfu"],
        "measured_mfu": measured.mfu,
        "predicted_hbm_bytes": prop["memory"]["hbm_bytes"],
        "measured_hbm_bytes": measured.memory_bytes,
        "memory_error": (prop["memory"]["hbm_bytes"] - measured.memory_bytes) / measured.memory_bytes
        if measured.memory_bytes
        else None,
        "baseline_step_s": baseline,
        "predicted_speedup": predicted_speedup,
        "measured_speedup": measured_speedup,
        "delivered": delivered,
        "stated_confidence": prop["confidence"],
        "bottleneck_before": before_bottleneck,
        "bottleneck_after": measured.bottleneck,
        "bottleneck_moved": before_bottleneck is not None and before_bottleneck != measured.bottleneck,
    }
    _keep(d, "outcomes", row)
    try:
        row["record"] = str(write_record(row, ex, prop))
        shared = pg_store.shared()
        if shared is not None:  # teammates' Proposal agents retrieve it too (server/kb/store.py pull_shared)
            path = Path(row["record"])
            shared.write("kb_records", pg_store.record_row(path.stem, path.read_text(encoding="utf-8")))
    except OSError as e:  # an unwritable outcomes directory: the outcome is logged, its record not kept
        log.warning("the outcome's knowledge record could not be written to %s: %s", outcomes_dir(), e)
        row["record"] = ""
    return Outcome.model_validate(row)


def write_record(outcome: dict[str, Any], ex: dict[str, Any], prop: dict[str, Any]) -> Path:
    """The outcome as a knowledge record (kb/history schema) in outcomes_dir(), validated before it is kept."""
    from ruamel.yaml import YAML

    from server.kb.records import load_record

    est = ex["estimate"] or {}
    model = est.get("model") or {}

    def setup(mesh: dict[str, dict[str, int]], other: dict[str, Any]) -> dict[str, Any]:
        keys = {f"ici_{a}_parallelism": v for a, v in mesh.get("ici", {}).items()}
        keys |= {f"dcn_{a}_parallelism": v for a, v in mesh.get("dcn", {}).items()}
        return {
            "mesh": keys or {"ici_data_parallelism": 1},
            "per_device_batch_size": float(other.get("per_device_batch_size", est.get("per_device_batch_size", 1))),
            "remat_policy": str(other.get("remat_policy", est.get("remat_policy", "full"))),
        }

    before_bn = outcome["bottleneck_before"]
    bottleneck = before_bn if before_bn in ("compute", "hbm", "communication", "memory", "input", "host") else "compute"
    after = {"ici": prop["ici"], "dcn": prop["dcn"]}
    rid = f"outcome-{outcome['id']}"
    speed = outcome["measured_speedup"]
    data = {
        "id": rid,
        "title": f"ASAP proposal {outcome['rank']} applied on {ex['slice']}: measured outcome",
        "model": {
            "name": model.get("name", "unknown"),
            "params_b": max(float(model.get("params_b", 0.001)), 1e-6),
            "emb": int(model.get("emb", 1)),
            "layers": int(model.get("layers", 1)),
            "q_heads": max(int(model.get("q_heads", 1)), 1),
            "kv_heads": max(int(model.get("kv_heads", 1)), 1),
            "mlp": int(model.get("mlp", 1)),
            "seq": int(model.get("seq", 1)),
            "experts": max(int(model.get("experts", 1)), 1),
        },
        "slice": {"name": ex["slice"], "num_slices": 1},
        "before": setup(ex["mesh"], {}),
        "after": setup(after, prop["other_changes"]),
        "bottleneck": bottleneck,
        "change": (
            f"ASAP's proposal {outcome['rank']} ({prop['rationale'][:300]}) was applied and run again. Predicted "
            f"step {outcome['predicted_step_s']:.4g} s, measured {outcome['measured_step_s']:.4g} s "
            f"({outcome['step_error']:+.0%}); the bottleneck went from {before_bn} to {outcome['bottleneck_after']}."
        ),
        "impact": {
            "kind": "measured",
            "metric": "step_time_s",
            "before": outcome["baseline_step_s"],
            "after": outcome["measured_step_s"],
            "note": (
                f"measured speedup x{speed:.2f} against the predicted x{outcome['predicted_speedup']:.2f}"
                if speed is not None and outcome["predicted_speedup"] is not None
                else "no measured baseline: the analysis had no profile of the mesh before"
            ),
        },
        "source": f"ASAP experiment {ex['id']}, outcome {outcome['id']}; profile {outcome['profile']}",
        "tags": ["outcome", "measured"],
    }
    d = outcomes_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{rid}.yaml"
    tmp = path.with_suffix(".tmp")
    y = YAML()
    y.default_flow_style = None
    with tmp.open("w", encoding="utf-8") as f:
        y.dump(data, f)
    load_record(tmp.with_name(f"{rid}.yaml"), tmp.read_text(encoding="utf-8"))  # the schema, before it is kept
    tmp.replace(path)
    return path


# -- the track record ------------------------------------------------------------------------------------
def _outcomes(db: sqlite_utils.Database | None = None) -> list[dict[str, Any]]:
    """The outcomes: the team's from the shared log when `ASAP_STORE` names one (and it answers), else the
    local log's."""
    team = _shared_outcomes() if db is None else None
    return team if team is not None else _local_outcomes(db)


def _local_outcomes(db: sqlite_utils.Database | None = None) -> list[dict[str, Any]]:
    d = _db(db)
    try:
        return [dict(r) for r in d.query("select * from outcomes order by created")]
    except store.sqlite3.DatabaseError as e:  # damaged past its schema: moved aside like a file that never opens
        if not store.is_damaged(e):
            raise
        store.recreate(d, f"the experiment log: {e}", store.integrity_problem)
        return []


def _shared_outcomes() -> list[dict[str, Any]] | None:
    shared = pg_store.shared()
    if shared is None or not shared.available():
        return None
    try:
        return shared.query("SELECT * FROM outcomes ORDER BY created")
    except Exception as e:  # unreachable, or a server error: the local log answers, with a notice
        text = str(e).strip()
        why = pg_store.redact(text.splitlines()[0] if text else type(e).__name__, shared.url)
        log.warning("shared store %s unavailable (%s): the track record is this machine's", shared.shown, why)
        return None


def _errors(values: list[float]) -> dict[str, Any]:
    a = sorted(abs(v) for v in values)
    if not a:
        return {"n": 0, "median_abs": None, "p90_abs": None, "mean_signed": None}
    p90 = a[min(len(a) - 1, round(0.9 * (len(a) - 1)))]
    return {"n": len(a), "median_abs": statistics.median(a), "p90_abs": p90, "mean_signed": statistics.fmean(values)}


def _rate(outs: list[dict[str, Any]]) -> float | None:
    """The fraction of outcomes with a measured baseline that delivered the predicted direction."""
    known = [o for o in outs if o["delivered"] is not None]
    return statistics.fmean(1.0 if o["delivered"] else 0.0 for o in known) if known else None


def reliability(outcomes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stated confidence bins against the fraction of proposals that delivered the predicted direction."""
    rows = []
    for lo, hi in BINS:
        inside = [o for o in outcomes if o["delivered"] is not None and lo <= o["stated_confidence"] < hi]
        rows.append(
            {
                "stated": f"{lo:.0%}-{min(hi, 1.0):.0%}",
                "lo": lo,
                "hi": min(hi, 1.0),
                "n": len(inside),
                "mean_stated": statistics.fmean(o["stated_confidence"] for o in inside) if inside else None,
                "delivered": statistics.fmean(1.0 if o["delivered"] else 0.0 for o in inside) if inside else None,
            }
        )
    return rows


CALIBRATION_RULE = (
    f"calibrated = (delivered in the stated confidence's bin + {PRIOR_WEIGHT:g} x stated) / "
    f"(outcomes in the bin + {PRIOR_WEIGHT:g}), once {MIN_OUTCOMES} outcomes with a measured baseline exist; "
    "before that, confidence is shown as stated"
)


@dataclass
class Calibrator:
    """Maps a stated confidence to the delivered rate of its reliability bin, shrunk towards the stated value
    (CALIBRATION_RULE)."""

    table: list[dict[str, Any]]
    n: int

    @property
    def active(self) -> bool:
        return self.n >= MIN_OUTCOMES

    def __call__(self, stated: float) -> float:
        if not self.active:
            return stated
        for b in self.table:
            if b["lo"] <= stated < b["hi"] or (stated >= 1.0 and b["hi"] >= 1.0):
                delivered = (b["delivered"] or 0.0) * b["n"]
                return (delivered + PRIOR_WEIGHT * stated) / (b["n"] + PRIOR_WEIGHT)
        return stated

    @property
    def note(self) -> str:
        if not self.active:
            return f"as stated (calibration starts at {MIN_OUTCOMES} measured outcomes; {self.n} so far)"
        return f"calibrated on {self.n} measured outcomes of ASAP's own proposals (asap stats)"

    def key(self) -> str:
        return hashlib.sha256(json.dumps([self.n, self.table], default=str).encode()).hexdigest()[:16]


def calibrator(db: sqlite_utils.Database | None = None) -> Calibrator:
    with contextlib.suppress(Exception):
        outs = [o for o in _outcomes(db) if o["delivered"] is not None]
        return Calibrator(reliability(outs), len(outs))
    return Calibrator(reliability([]), 0)


def track_record(db: sqlite_utils.Database | None = None) -> dict[str, Any]:
    """`asap stats`: prediction errors per generation, the reliability table and the calibration rule."""
    team_outs = _shared_outcomes() if db is None else None
    outs = team_outs if team_outs is not None else _local_outcomes(db)
    gens = sorted({o["generation"] or "unknown" for o in outs})
    per_gen = {
        g: {
            "outcomes": sum(1 for o in outs if (o["generation"] or "unknown") == g),
            "step_time_error": _errors([o["step_error"] for o in outs if (o["generation"] or "unknown") == g]),
            "memory_error": _errors(
                [
                    o["memory_error"]
                    for o in outs
                    if (o["generation"] or "unknown") == g and o["memory_error"] is not None
                ]
            ),
            "bottleneck_moved": sum(1 for o in outs if (o["generation"] or "unknown") == g and o["bottleneck_moved"]),
            "delivered": _rate([o for o in outs if (o["generation"] or "unknown") == g]),
        }
        for g in gens
    }
    cal = calibrator(db)
    shared = pg_store.shared() if db is None else None
    team: dict[str, Any] = {}
    if shared is not None:
        me = pg_store.user()  # rows of the local log (the shared store did not answer) are this user's
        users = sorted({o.get("user_name") or me for o in outs})
        team = {
            "shared": {
                "store": shared.shown,
                "source": "shared" if team_outs is not None else "local (the shared store did not answer)",
                "pending_sync": shared.pending(),
            },
            "per_user": {
                u: {
                    "outcomes": sum(1 for o in outs if (o.get("user_name") or me) == u),
                    "step_time_error": _errors([o["step_error"] for o in outs if (o.get("user_name") or me) == u]),
                    "delivered": _rate([o for o in outs if (o.get("user_name") or me) == u]),
                }
                for u in users
            },
        }
    return {
        **team,
        "outcomes": len(outs),
        "with_baseline": cal.n,
        "per_generation": per_gen,
        "reliability": cal.table,
        "calibration": {
            "active": cal.active,
            "min_outcomes": MIN_OUTCOMES,
            "rule": CALIBRATION_RULE,
            "note": cal.note,
        },
        "definitions": {
            "step_error": "(predicted - measured) / measured step time, per outcome",
            "memory_error": "(predicted - compiled) / compiled per-chip HBM, when the TPU compiler verified the mesh",
            "delivered": "measured speedup against the analysed run's profile > 1 when a speedup was predicted",
        },
    }


def measure(an: Analysis, profile: Path) -> Measured:
    """Read a profile of the config `an` (XProf, through ASAP's cached conversion) as an outcome measurement."""
    from server.profiles import profile_convert
    from server.services.profile_analysis import analyze_tools

    pf = profile_convert.find_profile(profile)
    tools, _ = profile_convert.load_tools(pf)
    report, findings = analyze_tools(tools, an, pf.describe())
    m = measured_from(report, pf, findings)
    m.memory_bytes = compiled_memory(an)
    return m


def compiled_memory(an: Analysis, maxtext_python: str | None = None) -> float | None:
    """Per-chip HBM of the config's mesh as the TPU compiler allocated it, when `asap verify` (or the editor's
    Verify) compiled it already: the memory side of an outcome (XProf's tools ASAP reads have no per-chip
    peak). Never compiles."""
    from server.compile import verify

    with contextlib.suppress(Exception):
        r = verify.verify(an.config, cached_only=True, maxtext_python=maxtext_python)
        if r.compiled is not None:
            return float(r.compiled.memory_per_chip_bytes)
    return None


def measured_from(report: Any, pf: Any, findings: list[Any]) -> Measured:
    """An outcome measurement from a profile report (server/perf/profile.Report) of files `pf`."""
    from server.services.profile_analysis import MISMATCH

    mismatch = [f.message for f in findings if f.code == MISMATCH]
    comparison = report.comparison or {}
    steps = report.kpis.steps
    if steps is None:
        raise OutcomeError(
            f"the profile {pf.describe()} has no training steps (annotate them with StepTraceAnnotation)"
        )
    return Measured(
        step_s=float(comparison.get("measured_step_s") or steps.median_ms / 1e3),
        mfu=comparison.get("measured_mfu"),
        bottleneck=report.verdict.bottleneck,
        source=pf.describe(),
        captured_at=max(f.stat().st_mtime for f in pf.files),
        mismatch=mismatch,
    )


def pending(an: Analysis, config: Path, measured: Measured, db: sqlite_utils.Database | None = None) -> bool:
    """Whether this profile is a new run of a proposal applied to this config (and not recorded yet): the
    editor records such outcomes by itself when the profile is linked or discovered."""
    d = _db(db)
    if "applications" not in d.table_names() or measured.mismatch:
        return False
    try:
        app = find_application(an, config, d)
    except OutcomeError:
        return False
    if measured.captured_at < app["applied_at"]:
        return False
    if "outcomes" in d.table_names() and {"application_id", "profile"} <= {c.name for c in d["outcomes"].columns}:
        seen = d.query("select 1 from outcomes where application_id = ? and profile = ?", [app["id"], measured.source])
        if next(iter(seen), None) is not None:
            return False
    return True


def record_if_pending(
    an: Analysis, config: Path, report: Any, pf: Any, findings: list[Any], maxtext_python: str | None = None
) -> Outcome | None:
    """The outcome of an applied proposal from a profile that arrived after it was applied (the editor's linked or
    discovered profile), recorded; None when the profile is not such a run or is already recorded. Raises
    OutcomeError when the profile has no training steps."""
    measured = measured_from(report, pf, findings)
    if not pending(an, config, measured):
        return None
    measured.memory_bytes = compiled_memory(an, maxtext_python)
    return record_outcome(an, config, measured)


def describe(outcome: Outcome) -> str:
    """One line for a notification: what proposal N did, against what ASAP predicted."""
    sp, psp = outcome.measured_speedup, outcome.predicted_speedup
    speed = (
        f"measured x{sp:.2f} against the predicted x{psp:.2f}"
        if sp is not None and psp is not None
        else f"step {outcome.measured_step_s * 1e3:.1f} ms against the predicted "
        f"{outcome.predicted_step_s * 1e3:.1f} ms"
    )
    return (
        f"outcome of proposal {outcome.rank} recorded: {speed}; bottleneck {outcome.bottleneck_before} -> "
        f"{outcome.bottleneck_after}"
    )
