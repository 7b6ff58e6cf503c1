"""The knowledge store's content: notes (`kb/docs/*.md`, YAML front matter, chunked by `##` heading) and
optimization records (`kb/history/*.yaml`, a fixed schema checked by pydantic; an error names the file,
the line and the field).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from server.config.source import BoundedComposer, plain

AXES = (
    "data",
    "fsdp",
    "fsdp_transpose",
    "tensor",
    "tensor_sequence",
    "context",
    "expert",
    "pipeline",
    "dcn",
    "ici",
    "remat",
    "batch",
    "memory",
    "hbm",
    "general",
)
GENERATIONS = ("v4", "v5e", "v5p", "v6e", "tpu7x")
BOTTLENECKS = ("compute", "hbm", "communication", "memory", "input", "host")
MESH_KEY = re.compile(r"^(ici|dcn)_[a-z_]+_parallelism$")


class RecordError(ValueError):
    """A malformed note or record: `file:line: field: message`."""

    def __init__(self, file: Path, line: int | None, field_path: str, message: str):
        where = f"{file}:{line}" if line is not None else str(file)
        super().__init__(f"{where}: {field_path}: {message}" if field_path else f"{where}: {message}")
        self.file, self.line, self.field = file, line, field_path


# -- optimization records ------------------------------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelDims(_Strict):
    name: str
    params_b: Annotated[float, Field(gt=0)]
    emb: Annotated[int, Field(gt=0)]
    layers: Annotated[int, Field(gt=0)]
    q_heads: Annotated[int, Field(gt=0)]
    kv_heads: Annotated[int, Field(gt=0)]
    mlp: Annotated[int, Field(gt=0)]
    seq: Annotated[int, Field(gt=0)]
    experts: Annotated[int, Field(gt=0)] = 1


class SliceRef(_Strict):
    name: str
    num_slices: Annotated[int, Field(ge=1)] = 1

    @property
    def generation(self) -> str | None:
        gen = self.name.split("-")[0].split(":")[0].lower()
        return gen if gen in GENERATIONS else None


class Setup(_Strict):
    mesh: dict[str, int]
    per_device_batch_size: Annotated[float, Field(gt=0)]
    remat_policy: str

    @field_validator("mesh")
    @classmethod
    def _mesh_keys(cls, mesh: dict[str, int]) -> dict[str, int]:
        for k, v in mesh.items():
            if not MESH_KEY.match(k):
                raise ValueError(f"'{k}' is not a MaxText mesh key (ici_*_parallelism or dcn_*_parallelism)")
            if v == 0 or v < -1:
                raise ValueError(f"{k}: {v} is not a parallelism degree (>= 1, or -1)")
        return mesh


class Impact(_Strict):
    kind: Literal["published", "measured", "estimated"]
    metric: Literal["mfu", "step_time_s", "tokens_per_s", "fits"]
    before: float | bool | None
    after: float | bool | None
    note: str = ""


class Record(_Strict):
    id: str
    title: str
    model: ModelDims
    slice: SliceRef
    before: Setup
    after: Setup
    bottleneck: Literal["compute", "hbm", "communication", "memory", "input", "host"]
    change: Annotated[str, Field(min_length=10)]
    impact: Impact
    source: Annotated[str, Field(min_length=3)]
    tags: list[str] = []

    def text(self) -> str:
        """What search sees: the situation and the change in words."""
        b = ", ".join(f"{k}={v}" for k, v in self.before.mesh.items())
        a = ", ".join(f"{k}={v}" for k, v in self.after.mesh.items())
        imp = self.impact
        return (
            f"{self.title}. {self.model.name} ({self.model.params_b:g}B) on {self.slice.num_slices} x "
            f"{self.slice.name}, {self.bottleneck}-bound before. Before: {b}, per_device_batch_size "
            f"{self.before.per_device_batch_size:g}, remat {self.before.remat_policy}. After: {a}, "
            f"per_device_batch_size {self.after.per_device_batch_size:g}, remat {self.after.remat_policy}. "
            f"{self.change} Impact ({imp.kind} {imp.metric}): {imp.before} -> {imp.after}. {imp.note}"
        )


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.Composer = BoundedComposer  # records come from users (`asap kb add`) and the team's shared store
    y.allow_duplicate_keys = False
    return y


def _line_of(node: Any, loc: tuple[int | str, ...]) -> int | None:
    """1-based line of the deepest existing node along a pydantic error location."""
    line: int | None = None
    cur = node
    for part in loc:
        if isinstance(cur, CommentedMap) and isinstance(part, str) and part in cur:
            line = cur.lc.key(part)[0] + 1
            cur = cur[part]
        elif isinstance(cur, CommentedSeq) and isinstance(part, int) and part < len(cur):
            line = cur.lc.item(part)[0] + 1
            cur = cur[part]
        else:
            break
    return line


def load_record(path: Path, text: str | None = None) -> Record:
    """Parse and validate one record; RecordError names the file, line and field."""
    raw = path.read_text(encoding="utf-8") if text is None else text
    try:
        data = _yaml().load(StringIO(raw))
    except YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise RecordError(path, mark.line + 1 if mark else None, "", f"invalid YAML: {e}") from None
    if not isinstance(data, CommentedMap):
        raise RecordError(path, 1, "", "a record is a mapping of the fields id, title, model, slice, ...")
    try:
        rec = Record.model_validate(plain(data))
    except ValidationError as e:
        err = e.errors()[0]
        loc = tuple(err["loc"])
        line = _line_of(data, loc) or 1
        fieldname = ".".join(str(p) for p in loc)
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "missing (required)"
        elif err["type"] == "extra_forbidden":
            msg = "unknown field (not in the record schema)"
        raise RecordError(path, line, fieldname, msg) from None
    if rec.id != path.stem:
        raise RecordError(path, _line_of(data, ("id",)), "id", f"'{rec.id}' must equal the file name '{path.stem}'")
    return rec


# -- notes -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Chunk:
    heading: str
    text: str


@dataclass
class Note:
    id: str
    path: Path
    title: str
    axes: list[str] = field(default_factory=list)
    generations: list[str] = field(default_factory=list)
    families: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)


_FRONT = re.compile(r"\A---\s*\n(?P<yaml>.*?)\n---\s*\n", re.S)


def load_note(path: Path, text: str | None = None) -> Note:
    """A note: front matter (title, axes, generations, families, sources), `# Title`, `## ` sections."""
    raw = path.read_text(encoding="utf-8") if text is None else text
    m = _FRONT.match(raw)
    if not m:
        raise RecordError(path, 1, "", "a note starts with YAML front matter between '---' lines")
    try:
        meta = _yaml().load(StringIO(m["yaml"])) or {}
    except YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise RecordError(path, (mark.line + 2) if mark else 1, "", f"invalid front matter: {e}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("title"), str):
        raise RecordError(path, 2, "title", "missing (required)")

    def meta_line(key: str) -> int | None:  # the front matter starts on the file's second line
        n = _line_of(meta, (key,))
        return n + 1 if n is not None else None

    lists: dict[str, list[str]] = {}
    checks: list[tuple[str, tuple[str, ...] | None]] = [
        ("axes", AXES),
        ("generations", GENERATIONS),
        ("families", None),
        ("sources", None),
    ]
    for key, allowed in checks:
        v = meta.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise RecordError(path, meta_line(key), key, "must be a list of strings")
        bad = [x for x in v if allowed is not None and x not in allowed]
        if bad:
            raise RecordError(path, meta_line(key), key, f"unknown value(s) {bad}; allowed: {list(allowed or ())}")
        lists[key] = list(v)
    extra = set(meta) - {"title", "axes", "generations", "families", "sources"}
    if extra:
        raise RecordError(path, meta_line(sorted(extra)[0]), sorted(extra)[0], "unknown front-matter field")
    body = raw[m.end() :]
    chunks: list[Chunk] = []
    heading: str = str(meta["title"])
    buf: list[str] = []
    for line in body.splitlines():
        if line.startswith("## "):
            if "".join(buf).strip():
                chunks.append(Chunk(heading, "\n".join(buf).strip()))
            heading, buf = line[3:].strip(), []
        elif line.startswith("# "):
            continue
        else:
            buf.append(line)
    if "".join(buf).strip():
        chunks.append(Chunk(heading, "\n".join(buf).strip()))
    if not chunks:
        raise RecordError(path, None, "", "a note needs some text")
    return Note(path.stem, path, str(meta["title"]), chunks=chunks, **lists)
