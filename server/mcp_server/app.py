"""The MCP server: ASAP's tools, the knowledge notes as resources, and the "tune this config" prompt.

Every tool but `apply_proposal` is a CLI command: the tool builds the command line (`asap check NAME --run 2`),
parses it with the CLI's own parser (so every default is the CLI's), and runs the command through
`json_document` in a worker thread; its result is the document `asap ... --json` prints, unchanged, as the
structured content, validated against the output schema (server/cli/documents.py). A command that could not do
its work (`{"errors": [...]}`: a missing file, bytes that are not UTF-8, an unknown model, a mesh that does not
parse), an estimate refused for the asked mesh (its errors, located), or a bug in ASAP is a tool error (`isError`,
ASAP's message) and the server goes on.

A config is given as `path` (a file, relative to the server's working directory) or as `text`, read as if it were
the file `filename` (default `config.yml`) in the server's working directory: that name locates `base_config`
and the messages; nothing is read from it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resources import FileResource
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from server.cli import documents

log = logging.getLogger("asap")

TEXT_NAME = "config.yml"  # the name a config given as `text` goes by when the call gives no `filename`
CANCEL_WAIT_S = 30.0  # after a cancel, how long the tool waits for the compile child to be killed and the work to end

PathArg = Annotated[str | None, Field(description="a MaxText config (.yml) or launch file, relative to the cwd")]
TextArg = Annotated[str | None, Field(description="the config's text, instead of `path`")]
FilenameArg = Annotated[
    str | None,
    Field(
        description="with `text`: the file name it is read as (default config.yml, in the server's working "
        "directory), which locates base_config and the messages; nothing is read from it"
    ),
]
RunArg = Annotated[int | None, Field(description="a launch file's run N (1-based, in file order), as --run N")]
SliceArg = Annotated[str | None, Field(description="the slice to assume when the config declares none (v5e-256)")]
MeshArg = Annotated[
    dict[str, int] | str | None,
    Field(description='keys over the config, as --mesh: {"ici_fsdp_parallelism": 8} or "ici_fsdp_parallelism=8,..."'),
]

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class ApplyResult(BaseModel):
    """The config with one proposal (or the given mesh) written in, as the editor's quick fix writes it: the
    minimal edits, comments and other keys kept, re-validated to launch as proposed."""

    file: str = Field(description="the config the edit is for")
    proposal: int | None = Field(description="the proposal applied (1-based), or null for a given mesh")
    title: str = Field(description="the quick fix's title")
    text: str = Field(description="the whole edited text")
    written: bool = Field(description="whether `text` was written to `path` (only with write: true)")


# -- calling a CLI command ---------------------------------------------------------------------------------------


def _source(path: str | None, text: str | None, filename: str | None) -> tuple[str, tuple[str, str] | None]:
    """The name the command is given, and the text to read as that file when the call gave `text`."""
    if (path is None) == (text is None):
        raise ToolError("give either `path` (a config or launch file) or `text` (a config's text), not both")
    if text is not None:
        name = filename or TEXT_NAME
        return name, (name, text)
    assert path is not None
    return path, None


def _mesh_text(mesh: dict[str, int] | str | None) -> str | None:
    if mesh is None or isinstance(mesh, str):
        return mesh or None
    return ",".join(f"{k}={v}" for k, v in mesh.items())


def _flag(argv: list[str], option: str, value: object) -> None:
    if value is not None and value is not False:
        argv += [option] if value is True else [option, str(value)]


def _parse(argv: list[str]) -> argparse.Namespace:
    from server.cli.main import UsageError, build_parser

    try:
        return build_parser().parse_args(argv)
    except UsageError as e:
        raise ToolError(f"{e.parser.prog}: {e.message}") from None


def _error_text(doc: dict[str, Any]) -> str:
    """A command's `{"errors": [...]}` as one message per line (ASAP's own words, with the file when it has one)."""
    lines = []
    for e in doc.get("errors", []):
        file = e.get("file")
        msg = e.get("message", "")
        lines.append(msg if not file or file in msg else f"{file}: {msg}")
    return "\n".join(lines) or "no result"


def _finding_line(f: dict[str, Any]) -> str:
    """A finding as the CLI's stderr line: located at the asked `mesh` when it is about it, else at file:line:col."""
    where = f"mesh {f['override']}" if f.get("override") else f"{f.get('file') or ''}:{f.get('line')}:{f.get('column')}"
    key = f" {f['key']}:" if f.get("key") else ""
    return f"{where}: {f.get('severity')} {f.get('code')}:{key} {f.get('message')}"


def _run_command(
    argv: list[str], given: tuple[str, str] | None, hooks: dict[str, Any] | None = None
) -> tuple[int, Any]:
    """The command's exit status and `--json` document (in a worker thread: the commands block)."""
    from server.cli import commands

    args = _parse(argv)
    for k, v in (hooks or {}).items():
        setattr(args, k, v)
    try:
        return commands.json_document(args.func, args, given)
    except ToolError:
        raise
    except Exception as e:  # a bug in ASAP: one line, never a traceback to the client (the log has it)
        log.exception("asap %s failed", argv[0])
        raise ToolError(commands.internal_error(e, False).message) from None


def _answer(doc: Any) -> CallToolResult:
    """A document as the tool's result: the structured content, and the same JSON as text for clients that read
    only text."""
    if not isinstance(doc, dict):
        raise ToolError("ASAP printed no document (a bug in ASAP)")
    if "errors" in doc:
        raise ToolError(_error_text(doc))
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(doc))], structured_content=doc)


async def _call(argv: list[str], given: tuple[str, str] | None) -> Any:
    _, doc = await anyio.to_thread.run_sync(_run_command, argv, given)
    return doc


# -- the tools -----------------------------------------------------------------------------------------------------


async def check(
    path: PathArg = None, text: TextArg = None, filename: FilenameArg = None, run: RunArg = None, slice: SliceArg = None
) -> Annotated[CallToolResult, documents.CheckDocument]:
    """Validate a MaxText config's sharding mesh for its TPU slice, before the job gets the slice: every finding
    (ASAP's code, severity, message, file, line, column, key, fix titles) and the estimate. A launch file (shell
    script, Makefile, Markdown, Kubernetes manifest): one entry per MaxText run. Same as `asap check --json`."""
    name, given = _source(path, text, filename)
    argv = ["check", name]
    _flag(argv, "--run", run)
    _flag(argv, "--slice", slice)
    return _answer(await _call(argv, given))


async def estimate(
    path: PathArg = None,
    text: TextArg = None,
    filename: FilenameArg = None,
    run: RunArg = None,
    mesh: MeshArg = None,
    top: Annotated[int, Field(description="also rank the N fastest valid meshes of the slice", ge=0)] = 0,
    slice: SliceArg = None,
) -> Annotated[CallToolResult, documents.EstimateResult]:
    """What a config costs on its slice: memory per chip (does it launch), step time, MFU, collectives, the
    bottleneck; with `mesh`, the same for that mesh (a what-if, the file unchanged); with `top`, the fastest valid
    meshes. A mesh with errors (does not divide the slice, does not fit) is a tool error with ASAP's located
    findings. Same as `asap estimate --json`."""
    name, given = _source(path, text, filename)
    argv = ["estimate", name]
    _flag(argv, "--mesh", _mesh_text(mesh))
    _flag(argv, "--top", top or None)
    _flag(argv, "--run", run)
    _flag(argv, "--slice", slice)
    doc = await _call(argv, given)
    if isinstance(doc, dict) and "findings" in doc and "runs" not in doc and doc.get("estimate") is None:
        errors = [f for f in doc["findings"] if f.get("severity") == "error"]
        raise ToolError("no estimate:\n" + "\n".join(_finding_line(f) for f in errors))
    return _answer(doc)


async def models(
    name: Annotated[str, Field(description="only the models whose name contains this (exact name first)")] = "",
    path: Annotated[str | None, Field(description="the model a config resolves to (as --config)")] = None,
) -> Annotated[CallToolResult, documents.ModelsDocument]:
    """MaxText's models as ASAP prices them (block structure, parameters, active parameters), or one model's.
    `asap models --json` prints the list; here it is `models`."""
    argv = ["models"] + ([name] if name else [])
    _flag(argv, "--config", path)
    doc = await _call(argv, None)
    if isinstance(doc, dict):
        return _answer(doc)
    if not doc:
        raise ToolError(f"no model named like {name!r} (asap models lists them)")
    return _answer({"models": doc})


async def analyze(
    path: PathArg = None,
    text: TextArg = None,
    filename: FilenameArg = None,
    run: RunArg = None,
    profile: Annotated[str | None, Field(description="an XProf profile instead of the config's linked one")] = None,
    slice: SliceArg = None,
) -> Annotated[CallToolResult, documents.AnalyzeResult]:
    """Diagnose a config (and its linked or given profile): the bottleneck with its evidence and confidence, and up
    to three better meshes, each re-validated and priced, with the TPU compiler's cached verdicts. The offline
    engine only: you are the reasoner. Same as `asap analyze --json` (schema/analyze.schema.json)."""
    name, given = _source(path, text, filename)
    argv = ["analyze", name, "--llm", "off"]
    _flag(argv, "--run", run)
    _flag(argv, "--profile", profile)
    _flag(argv, "--slice", slice)
    return _answer(await _call(argv, given))


async def verify(
    ctx: Context,
    path: PathArg = None,
    text: TextArg = None,
    filename: FilenameArg = None,
    run: RunArg = None,
    mesh: MeshArg = None,
    proposals: Annotated[bool, Field(description="also compile the analysis' proposals (not with mesh)")] = False,
    slice: SliceArg = None,
    max_layers: Annotated[int, Field(description="compile at most N layers, extrapolate", ge=1)] = 4,
    timeout: Annotated[float, Field(description="stop a compile after S seconds", gt=0)] = 900.0,
    maxtext_python: Annotated[
        str | None, Field(description="a MaxText environment's python: compile MaxText's own train step")
    ] = None,
) -> Annotated[CallToolResult, documents.VerifyDocument]:
    """The TPU compiler's verdict on the config's mesh (or `mesh`): does it compile, fit in HBM and place, with the
    compiler's memory figures; compiled ahead of time for the slice on this machine (libtpu, or MaxText's
    train_compile with `maxtext_python` or $ASAP_MAXTEXT_PYTHON). Long: minutes; progress is notified, and
    cancelling the call kills the compile. Same as `asap verify --json`."""
    from server.common.progress import CancelToken

    name, given = _source(path, text, filename)
    argv = ["verify", name, "--max-layers", str(max_layers), "--timeout", str(timeout)]
    _flag(argv, "--mesh", _mesh_text(mesh))
    _flag(argv, "--proposals", proposals)
    _flag(argv, "--run", run)
    _flag(argv, "--slice", slice)
    _flag(argv, "--maxtext-python", maxtext_python)
    cancel = CancelToken()
    loop = asyncio.get_running_loop()
    notes: asyncio.Queue[tuple[str, float | None]] = asyncio.Queue()

    def hook(message: str, frac: float | None) -> None:  # in the worker thread
        loop.call_soon_threadsafe(notes.put_nowait, (message, frac))

    done = threading.Event()

    def work() -> tuple[int, Any] | ToolError:
        try:  # the tool's error is returned, not raised: a task group would wrap it in an ExceptionGroup
            return _run_command(argv, given, {"progress_hook": hook, "cancel": cancel})
        except ToolError as e:
            return e
        finally:
            done.set()

    async def relay() -> None:
        while True:
            message, frac = await notes.get()
            pct = 0.0 if frac is None or not math.isfinite(frac) else round(100 * frac, 1)
            await ctx.report_progress(pct, 100.0, message)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            got = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
            tg.cancel_scope.cancel()
    except anyio.get_cancelled_exc_class():
        cancel.cancel()  # kills the compile child (server/common/childproc.py), as the editor's Cancel does
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(done.wait, CANCEL_WAIT_S)
        log.info("verify %s cancelled by the client", name)
        raise
    if isinstance(got, ToolError):
        raise got
    return _answer(got[1])


async def profile(
    profile: Annotated[
        str | None, Field(description="a .xplane.pb, a run directory, a gs:// URL, or exported tool JSON")
    ] = None,
    path: PathArg = None,
    text: TextArg = None,
    filename: FilenameArg = None,
) -> Annotated[CallToolResult, documents.ProfileDocument]:
    """A profile's KPIs, top ops, collectives and bottleneck verdict, compared with the config when one is given:
    the given `profile`, or the config's linked one (a `# asap: profile=` comment, the workspace link, or
    base_output_directory/run_name). Same as `asap profile --json`."""
    given: tuple[str, str] | None = None
    name: str | None = None
    if path is not None or text is not None:
        name, given = _source(path, text, filename)
    if profile is None:
        if name is None:
            raise ToolError("give `profile`, or a config (`path` or `text`) that links one")
        profile = await anyio.to_thread.run_sync(_linked_profile, name, given)
    argv = ["profile", profile]
    _flag(argv, "--config", name)
    return _answer(await _call(argv, given))


def _linked_profile(name: str, given: tuple[str, str] | None) -> str:
    from server.config.resolve import load
    from server.config.source import read_text
    from server.profiles import profile_link

    p = Path(name)
    try:
        text = given[1] if given is not None else read_text(p)
    except OSError as e:
        raise ToolError(f"cannot read {name}: {e.strerror or e}") from None
    link, findings = profile_link.resolve(load(p, text), Path.cwd())
    if link is None:
        why = "; ".join(f.message for f in findings) or "no `# asap: profile=` comment, workspace link or run_name"
        raise ToolError(f"{name} links no profile ({why}): give `profile`")
    return link.url or str(link.path)


async def kb_search(
    query: Annotated[str, Field(description="what to look for, in words (e.g. 'fsdp out of memory v5e')")],
    k: Annotated[int, Field(description="how many passages", ge=1, le=50)] = 5,
    generation: Annotated[str | None, Field(description="v4, v5e, v5p, v6e or tpu7x")] = None,
    family: Annotated[str | None, Field(description="model family, e.g. llama, mixtral")] = None,
    axis: Annotated[str | None, Field(description="parallelism axis, e.g. fsdp, tensor, expert")] = None,
) -> Annotated[CallToolResult, documents.KbSearchDocument]:
    """Search ASAP's knowledge store (notes on sharding, memory, collectives, and past optimizations): hybrid
    BM25 and vector search. Same as `asap kb search --json`."""
    argv = ["kb", "search", query, "--k", str(k)]
    _flag(argv, "--generation", generation)
    _flag(argv, "--family", family)
    _flag(argv, "--axis", axis)
    return _answer(await _call(argv, None))


async def record_outcome(
    profile: Annotated[str, Field(description="a profile of the run with the applied proposal")],
    path: PathArg = None,
    text: TextArg = None,
    filename: FilenameArg = None,
    experiment: Annotated[str | None, Field(description="the analysis whose proposal was applied")] = None,
    proposal: Annotated[int | None, Field(description="which proposal was applied (with experiment)")] = None,
    slice: SliceArg = None,
) -> Annotated[CallToolResult, documents.Outcome]:
    """Record what an applied proposal did: the measured step time and MFU from the profile against the
    prediction, kept in the experiment log and the knowledge store. Same as `asap outcome --json`."""
    name, given = _source(path, text, filename)
    argv = ["outcome", name, "--profile", profile]
    _flag(argv, "--experiment", experiment)
    _flag(argv, "--proposal", proposal)
    _flag(argv, "--slice", slice)
    return _answer(await _call(argv, given))


async def apply_proposal(
    path: PathArg = None,
    text: TextArg = None,
    filename: FilenameArg = None,
    proposal: Annotated[int | None, Field(description="the analysis' proposal N (1-based)", ge=1)] = None,
    mesh: MeshArg = None,
    run: RunArg = None,
    slice: SliceArg = None,
    write: Annotated[bool, Field(description="write the edited text to `path` (atomically)")] = False,
) -> ApplyResult:
    """The config with proposal N of `analyze` (or the given `mesh`) written in, as the editor's quick fix does:
    the minimal edits (comments, key order and other keys kept), re-validated to launch exactly as proposed; a
    proposal the TPU compiler rejected is refused. Returned, never written unless `write` is true."""
    if (proposal is None) == (mesh is None):
        raise ToolError("give either `proposal` (N, from analyze) or `mesh`")
    if write and path is None:
        raise ToolError("`write` writes to `path`: give the config as `path`")
    name, given = _source(path, text, filename)
    return await anyio.to_thread.run_sync(_apply, name, given, proposal, _mesh_text(mesh), run, slice, write)


def _apply(
    name: str,
    given: tuple[str, str] | None,
    proposal: int | None,
    mesh: str | None,
    run: int | None,
    slice_name: str | None,
    write: bool,
) -> ApplyResult:
    from server.mcp_server import edits

    try:
        title, text, edited = edits.apply(name, given, proposal, mesh, run, slice_name)
    except edits.Refused as e:
        raise ToolError(str(e)) from None
    except Exception as e:
        from server.cli import commands

        log.exception("apply_proposal failed")
        raise ToolError(commands.internal_error(e, False, name).message) from None
    if write and edited != text:
        _write_atomically(Path(name), edited)
    return ApplyResult(file=name, proposal=proposal, title=title, text=edited, written=write and edited != text)


def _write_atomically(path: Path, text: str) -> None:
    """`text` as the file's whole content, through a temporary file in its directory and a rename: a reader sees
    the old file or the new one, never half of it; the file's mode is kept."""
    mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


TOOLS: list[tuple[Callable[..., Any], ToolAnnotations | None]] = [
    (check, READ_ONLY),
    (estimate, READ_ONLY),
    (models, READ_ONLY),
    (analyze, None),  # records the analysis in the experiment log
    (apply_proposal, ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False)),
    (verify, ToolAnnotations(read_only_hint=False, open_world_hint=False)),  # caches the compiler's verdict
    (profile, READ_ONLY),
    (kb_search, READ_ONLY),
    (record_outcome, ToolAnnotations(destructive_hint=False, open_world_hint=False)),
]


# -- resources and the prompt --------------------------------------------------------------------------------------


def kb_notes() -> list[Path]:
    """The knowledge notes shipped with ASAP (kb/docs/*.md), found through the package data as the knowledge store
    finds them (server/kb/store.py)."""
    root = Path(str(resources.files("server.kb") / "content")).resolve() / "docs"
    return sorted(root.glob("*.md")) if root.is_dir() else []


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


TUNE_PROMPT = """Tune the MaxText config {path} for its TPU slice with ASAP's tools, in this order:

1. `check` with path={path!r}: read every finding. Errors (a mesh that does not divide the slice, a config that does
   not fit in HBM) must be fixed first; each finding says its file, line and key.
2. `analyze` with path={path!r}: the bottleneck (with its confidence and evidence) and up to three proposals, each
   with its expected step time, MFU and memory. Prefer the highest-ranked proposal whose confidence you accept.
3. `verify` with path={path!r} and proposals=true: the TPU compiler's verdict on the current mesh and on the
   proposals (this takes minutes; a proposal the compiler rejects is withdrawn and the next candidate takes its
   place). Do not apply a proposal the compiler rejected.
4. `apply_proposal` with path={path!r} and proposal=N for the proposal you chose: read the returned text (the
   minimal edit, comments kept) and show it; write it (write=true) only when the user agrees.

Say what you changed and the figures it rests on (step time, MFU, memory per chip, the compiler's verdict)."""


def tune_config(path: str) -> str:
    """Tune this config for its slice: check it, analyze it, verify the proposals with the TPU compiler, and apply
    the chosen one."""
    return TUNE_PROMPT.format(path=path)


def build() -> MCPServer[Any]:
    from server import __version__

    app: MCPServer[Any] = MCPServer(
        "asap",
        version=__version__,
        instructions="ASAP knows, before a MaxText job gets its TPU slice, whether its mesh launches, what it "
        "costs, which mesh is faster and what the TPU compiler says. Start with `check`, then `analyze`.",
        log_level="WARNING",
    )
    for fn, hints in TOOLS:
        app.add_tool(fn, annotations=hints)
    for note in kb_notes():
        app.add_resource(
            FileResource(
                uri=f"asap://kb/{note.stem}",
                name=note.stem,
                title=_title(note),
                description=f"ASAP's knowledge note {note.name}",
                mime_type="text/markdown",
                path=note,
            )
        )
    app.prompt(name="tune_config", title="Tune this config for its slice")(tune_config)
    return app


def serve() -> None:
    """Serve over stdio: the protocol's own copies of stdin and stdout, the process's stdout pointed at stderr
    (server/common/stdio.py, as the language server does), so that nothing but the protocol reaches the client."""
    from io import TextIOWrapper

    from mcp.server.stdio import stdio_server

    from server.common.stdio import reserve_stdio

    for h in list(log.handlers):  # `asap mcp`: the CLI's own warning lines would say each warning twice
        log.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("asap mcp: %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    sys.setswitchinterval(0.0005)  # as the language server: the loop answers while a command runs in a thread
    proto_in, proto_out = reserve_stdio()
    app = build()

    async def run() -> None:
        stdin = anyio.wrap_file(TextIOWrapper(proto_in, encoding="utf-8", errors="replace"))
        stdout = anyio.wrap_file(TextIOWrapper(proto_out, encoding="utf-8"))
        async with stdio_server(stdin, stdout) as (read, write):
            low = app._lowlevel_server  # MCPServer.run_stdio_async, with our streams
            await low.run(read, write, low.create_initialization_options())

    anyio.run(run)
