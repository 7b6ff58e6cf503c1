"""Linked XProf profiles over stdio: a `# asap: profile=` comment converted in the background with
cancellable progress and summarised as ASAP200; the cache on reopen; missing (ASAP201) and corrupt
(ASAP203) profiles; the `asap.server.linkProfile` command and its links file; MaxText's
base_output_directory/run_name discovery.

Profiles are synthetic (tests/profiles/synth.py: "TPU v5 lite", 4 devices per host), so the configs
declare v5e-4 with fsdp 4 to match them. Each profile gets a seed of its own: the converted-profile
cache is keyed by content and shared by the whole test session, and a test that must see a
conversion cannot be served by another test's identical profile.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from profiles.synth import write_profile
from pygls.exceptions import JsonRpcException

from .conftest import ROOT, AsapClient, Doc, by_code, capabilities, has, lacks, position_of, utf16_len, wait_for_log

module_loop = pytest.mark.asyncio(loop_scope="module")  # tests on the module's `shared` server

SUMMARY = "ASAP200"  # information: what the profile says
MISSING = "ASAP201"  # warning: the linked path does not exist
MISMATCH = "ASAP202"  # warning: the profile ran on another chip or slice size
UNREADABLE = "ASAP203"  # warning: the profile could not be read (or its reading was cancelled)
OUTSIDE = "ASAP204"  # hint: MaxText's run directory is outside the workspace
NOTE = "ASAP205"  # information: a caveat of the profile's reading
LINK_COMMAND = "asap.server.linkProfile"
CONVERSION_S = 60.0  # a conversion takes about a second; a loaded machine may take much longer

REAL = ROOT / "tests" / "data" / "profiles" / "xprof-real-tpu-v5-training"  # exported tool JSON of a v5p-8 run
# Each synthetic profile's seed: drawn from a seeded Random (the same profiles every run), never twice in a session.
_SEEDS = random.Random(20260301)
_DRAWN: set[int] = set()


def profile_seed() -> int:
    """A seed no other profile of this session has (step_jitter makes each seed a different content)."""
    while (seed := _SEEDS.randrange(1 << 40)) in _DRAWN:
        pass
    _DRAWN.add(seed)
    return seed


MESH = """\
model_name: llama2-7b
compile_topology: v5e-4
per_device_batch_size: 1
ici_fsdp_parallelism: 4
"""


def profile_tokens(client: AsapClient) -> set[str]:
    """Progress tokens of profile conversions (the agents' background runs report progress of their own)."""
    return {str(t) for t in client.progress_reports if str(t).startswith("asap-profile-")}


def synth(run_dir: Path, scenario: str = "comm") -> Path:
    """A synthetic one-host profile in `run_dir`, with content no other test has."""
    write_profile(run_dir, scenario, step_jitter=0.02, seed=profile_seed())
    return run_dir


def listing(d: Path) -> list[tuple[str, int, int]]:
    """Every entry under `d` with its size and mtime: what the user's profile directory holds."""
    return sorted((str(p.relative_to(d)), p.lstat().st_size, p.lstat().st_mtime_ns) for p in d.rglob("*"))


def begins(client: AsapClient) -> dict[str, lsp.WorkDoneProgressBegin]:
    """Progress tokens whose first report is a begin, by token."""
    return {
        str(t): r[0] for t, r in client.progress_reports.items() if r and isinstance(r[0], lsp.WorkDoneProgressBegin)
    }


def progress_for(client: AsapClient, run_dir: Path) -> list[tuple[str, list[object]]]:
    """The progress tokens whose begin names `run_dir`, with their reports."""
    return [
        (t, client.progress_reports[t]) for t, b in begins(client).items() if b.message and str(run_dir) in b.message
    ]


def config_with_comment(path: Path, link: str) -> Path:
    path.write_text(f"# asap: profile={link}\n{MESH}", encoding="utf-8")
    return path


async def open_in_workspace(client: AsapClient, folder: Path) -> lsp.InitializeResult:
    """Initialize a `fresh` server with `folder` as its only workspace folder (and root)."""
    return await client.initialize_session(
        lsp.InitializeParams(
            capabilities=capabilities(),
            root_uri=folder.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)],
            initialization_options={"settings": {"showInformationDiagnostics": True}},
        )
    )


async def link(client: AsapClient, uri: str, profile: str | None) -> object:
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command=LINK_COMMAND, arguments=[uri, profile])
    )


# -- `# asap: profile=` on the shared server ---------------------------------------------------------


@pytest.fixture(scope="module")
def comm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One communication-bound profile for the module: converted by the first test that opens it."""
    return synth(tmp_path_factory.mktemp("comm-profile") / "run")


@module_loop
async def test_comment_link_converts_in_background_with_progress(shared: AsapClient, tmp_path: Path, comm_run: Path):
    before = listing(comm_run)
    cfg = config_with_comment(tmp_path / "linked.yml", str(comm_run))
    doc = Doc(shared, cfg).open()

    first = await doc.diagnostics(version=1)
    assert lacks(UNREADABLE)(first) and lacks(MISSING)(first), [d.code for d in first]
    # The summary comes with a later publish of the same version, once the background conversion is done.
    diags = await doc.diagnostics(version=1, where=has(SUMMARY), timeout=CONVERSION_S)
    summary = by_code(diags, SUMMARY)
    assert summary.severity == lsp.DiagnosticSeverity.Information
    col = len("# asap: profile=")
    assert summary.range == lsp.Range(lsp.Position(0, col), lsp.Position(0, col + len(str(comm_run)))), "at the path"
    assert summary.message.startswith("Profile: communication-bound (confidence"), summary.message
    assert lacks(MISMATCH)(diags), "v5e-4 with fsdp 4 is what the synthetic profile ran on"

    # One cancellable progress for this conversion, begun and ended (the end precedes the re-publish).
    runs = progress_for(shared, comm_run)
    assert len(runs) == 1, f"one conversion of {comm_run}: {runs}"
    _, reports = runs[0]
    begin = reports[0]
    assert isinstance(begin, lsp.WorkDoneProgressBegin)
    assert begin.cancellable is True
    assert "profile" in begin.title.lower(), begin.title
    assert isinstance(reports[-1], lsp.WorkDoneProgressEnd), reports
    assert sum(isinstance(r, lsp.WorkDoneProgressEnd) for r in reports) == 1

    # XProf writes its caches next to the files it converts: never into the user's profile directory.
    assert listing(comm_run) == before
    doc.close()


@module_loop
async def test_reopen_is_served_from_the_cache(shared: AsapClient, tmp_path: Path, comm_run: Path):
    cfg = config_with_comment(tmp_path / "reopened.yml", str(comm_run))
    doc = Doc(shared, cfg).open()
    await doc.diagnostics(version=1, where=has(SUMMARY), timeout=CONVERSION_S)  # converted here or before
    tokens = profile_tokens(shared)

    doc.close()
    await doc.diagnostics(version=None, where=lambda ds: ds == [])
    doc.open()
    diags = await doc.diagnostics(version=1)  # the first publish after reopening: no conversion to wait for
    assert "communication-bound" in by_code(diags, SUMMARY).message
    assert profile_tokens(shared) == tokens, "a cached profile starts no progress"
    doc.close()


@module_loop
async def test_configs_sharing_a_profile_share_one_conversion(shared: AsapClient, tmp_path: Path):
    run = synth(tmp_path / "run")
    docs = [Doc(shared, config_with_comment(tmp_path / f"c{i}.yml", str(run))).open() for i in range(2)]
    for doc in docs:
        diags = await doc.diagnostics(version=1, where=has(SUMMARY), timeout=CONVERSION_S)
        assert "communication-bound" in by_code(diags, SUMMARY).message
        doc.close()
    assert len(progress_for(shared, run)) == 1, "one conversion per profile, however many configs link it"


@module_loop
async def test_missing_profile_warns_at_the_path_in_the_comment(shared: AsapClient, tmp_path: Path):
    cfg = tmp_path / "missing.yml"
    cfg.write_text(f"{MESH}\n# a comment above the link\n  #  asap: profile=runs/gone   (never captured)\n")
    doc = Doc(shared, cfg).open()
    diags = await doc.diagnostics(version=1)
    missing = by_code(diags, MISSING)
    assert missing.severity == lsp.DiagnosticSeverity.Warning
    start = position_of(doc.text, "runs/gone")
    assert missing.range == lsp.Range(start, lsp.Position(start.line, start.character + utf16_len("runs/gone")))
    assert str(tmp_path / "runs" / "gone") in missing.message
    assert lacks(SUMMARY)(diags)
    doc.close()


@module_loop
@pytest.mark.parametrize("damage", ["random", "truncated", "empty"])
async def test_corrupt_profile_warns_and_server_keeps_answering(shared: AsapClient, tmp_path: Path, damage: str):
    run = tmp_path / "broken"
    (pb,) = write_profile(run, "compute", seed=profile_seed(), step_jitter=0.02)
    if damage == "random":
        pb.write_bytes(random.Random(7).randbytes(4096))
    elif damage == "truncated":
        pb.write_bytes(pb.read_bytes()[: pb.stat().st_size // 3])
    else:
        pb.write_bytes(b"")
    cfg = config_with_comment(tmp_path / "corrupt.yml", str(run))
    doc = Doc(shared, cfg).open()

    diags = await doc.diagnostics(version=1, where=has(UNREADABLE), timeout=CONVERSION_S)
    warn = by_code(diags, UNREADABLE)
    assert warn.severity == lsp.DiagnosticSeverity.Warning
    assert warn.range.start.line == 0, "at the link"
    assert "host0.xplane.pb" in warn.message, warn.message
    assert lacks(SUMMARY)(diags)

    hover = await doc.hover(position_of(doc.text, "ici_fsdp_parallelism").line, 2)
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent) and hover.contents.value
    doc.close()


@module_loop
async def test_cancelled_conversion_warns_and_reopening_retries(shared: AsapClient, tmp_path: Path):
    run = tmp_path / "run"
    write_profile(run, "comm", scale=50, seed=profile_seed(), step_jitter=0.02)  # larger: more time to cancel in
    cfg = config_with_comment(tmp_path / "cancelled.yml", str(run))
    logs = len(shared.log_messages)
    doc = Doc(shared, cfg).open()

    await wait_for_log(shared, f"reading profile {run}", start=logs)  # logged after the begin, before XProf runs
    ((token, _),) = progress_for(shared, run)
    shared.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    diags = await doc.diagnostics(version=1, where=has(UNREADABLE), timeout=CONVERSION_S)
    assert "cancelled" in by_code(diags, UNREADABLE).message
    end = shared.progress_reports[token][-1]
    assert isinstance(end, lsp.WorkDoneProgressEnd) and end.message == "cancelled"

    doc.close()
    doc.open()  # reopening retries
    diags = await doc.diagnostics(version=1, where=has(SUMMARY), timeout=CONVERSION_S)
    assert lacks(UNREADABLE)(diags)
    assert len(progress_for(shared, run)) == 2
    doc.close()


@module_loop
async def test_profile_without_steps_adds_a_note(shared: AsapClient, tmp_path: Path):
    cfg = config_with_comment(tmp_path / "no-steps.yml", str(synth(tmp_path / "run", "no_steps")))
    doc = Doc(shared, cfg).open()
    diags = await doc.diagnostics(version=1, where=has(SUMMARY), timeout=CONVERSION_S)
    note = by_code(diags, NOTE)
    assert note.severity == lsp.DiagnosticSeverity.Information and note.range.start.line == 0
    assert "no step markers" in note.message
    assert "median step" not in by_code(diags, SUMMARY).message
    doc.close()


@module_loop
async def test_exported_tool_json_is_read_at_once(shared: AsapClient, tmp_path: Path):
    """XProf's exported tool JSON needs no conversion: the first publish has the summary, no progress."""
    tokens = profile_tokens(shared)
    cfg = tmp_path / "real.yml"
    cfg.write_text(
        f"model_name: llama2-7b\ncompile_topology: v5p-8\nper_device_batch_size: 1\nici_fsdp_parallelism: -1\n"
        f"# asap: profile={REAL}\n"
    )
    doc = Doc(shared, cfg).open()
    diags = await doc.diagnostics(version=1)
    summary = by_code(diags, SUMMARY)
    assert summary.range.start.line == 4
    assert "than estimated (MFU" in summary.message, "a matching slice is compared with the estimate"
    assert lacks(MISMATCH)(diags)

    # Another generation and slice size: two located warnings on compile_topology, no comparison.
    v2 = doc.replace_all(doc.text.replace("v5p-8", "v5e-256"))
    diags = await doc.diagnostics(version=v2)
    mismatches = [d for d in diags if d.code == MISMATCH]
    assert len(mismatches) == 2, [d.message for d in mismatches]
    assert all(d.severity == lsp.DiagnosticSeverity.Warning and d.range.start.line == 1 for d in mismatches)
    assert "than estimated" not in by_code(diags, SUMMARY).message
    assert profile_tokens(shared) == tokens
    doc.close()


# -- workspace links and MaxText discovery: servers whose workspace is tmp_path ------------------------


async def test_link_command_writes_links_file_and_unlinks(fresh: AsapClient, tmp_path: Path):
    result = await open_in_workspace(fresh, tmp_path)
    commands = result.capabilities.execute_command_provider
    assert commands is not None and LINK_COMMAND in commands.commands, "announced, so the editor may call it"
    synth(tmp_path / "runs" / "comm")
    (tmp_path / "empty").mkdir()
    cfg = tmp_path / "configs" / "train.yml"
    cfg.parent.mkdir()
    cfg.write_text(MESH)
    links_file = tmp_path / ".asap" / "links.json"

    doc = Doc(fresh, cfg).open()
    assert lacks(SUMMARY)(await doc.diagnostics(version=1))

    # A directory without profiles: an error response, nothing written.
    with pytest.raises(JsonRpcException, match="no profiles"):
        await link(fresh, doc.uri, str(tmp_path / "empty"))
    assert not (tmp_path / ".asap").exists()

    doc.mark = len(fresh.publishes)
    await link(fresh, doc.uri, str(tmp_path / "runs" / "comm"))
    assert json.loads(links_file.read_text()) == {"version": 1, "links": {"configs/train.yml": "runs/comm"}}
    diags = await doc.diagnostics(version=1, where=has(SUMMARY), timeout=CONVERSION_S)
    summary = by_code(diags, SUMMARY)
    assert summary.range.start.line == 0 and "communication-bound" in summary.message

    stored = links_file.read_bytes()
    with pytest.raises(JsonRpcException):
        await link(fresh, doc.uri, str(tmp_path / "empty"))
    assert links_file.read_bytes() == stored, "a failed link leaves the stored ones as they were"

    doc.mark = len(fresh.publishes)
    await link(fresh, doc.uri, None)
    assert json.loads(links_file.read_text()) == {"version": 1, "links": {}}
    await doc.diagnostics(version=1, where=lacks(SUMMARY))


async def test_maxtext_output_directory_in_workspace_is_discovered(fresh: AsapClient, tmp_path: Path):
    await open_in_workspace(fresh, tmp_path)
    synth(tmp_path / "out" / "r1" / "tensorboard" / "plugins" / "profile" / "2026_01_02_03_04_05")
    cfg = tmp_path / "run.yml"
    cfg.write_text(f"{MESH}base_output_directory: {tmp_path / 'out'}\nrun_name: r1\n")
    doc = Doc(fresh, cfg).open()
    diags = await doc.diagnostics(version=1, where=has(SUMMARY), timeout=CONVERSION_S)
    summary = by_code(diags, SUMMARY)
    key = position_of(doc.text, "base_output_directory")
    assert summary.range.start == key, "at the base_output_directory key"
    assert "communication-bound" in summary.message


@module_loop
async def test_maxtext_output_directory_outside_workspace_is_only_hinted(shared: AsapClient, tmp_path: Path):
    """The shared server's workspace is the repository: a run under tmp_path is not read, only hinted."""
    synth(tmp_path / "out" / "r1" / "tensorboard" / "plugins" / "profile" / "2026_01_02_03_04_05")
    cfg = tmp_path / "run.yml"
    cfg.write_text(f"{MESH}base_output_directory: {tmp_path / 'out'}\nrun_name: r1\n")
    before = profile_tokens(shared)
    doc = Doc(shared, cfg).open()
    diags = await doc.diagnostics(version=1)
    hint = by_code(diags, OUTSIDE)
    assert hint.severity == lsp.DiagnosticSeverity.Hint
    assert hint.range.start == position_of(doc.text, "base_output_directory")
    assert lacks(SUMMARY)(diags) and profile_tokens(shared) == before
    doc.close()


def test_seeds_are_distinct_profiles(tmp_path: Path):
    """The premise of `synth`: two seeds give two contents (else the session cache would serve one for the other)."""
    a = synth(tmp_path / "a") / "host0.xplane.pb"
    b = synth(tmp_path / "b") / "host0.xplane.pb"
    assert a.read_bytes() != b.read_bytes()
    assert os.path.getsize(a) > 0
