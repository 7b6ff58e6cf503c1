"""`asap mcp` end to end: the real server (`python -m server mcp`, a subprocess) driven by the MCP SDK's own client
over stdio. Each tool's structured result equals what the CLI prints with --json for the same command (the CLI run
in this process through server.cli.main.main); bad inputs are tool errors with ASAP's message and the server goes
on; apply_proposal keeps comments and writes only when asked; a verify cancelled mid-compile kills the compile
(the MaxText stand-in, tests/support/fake_maxtext.py, holds it until then); the knowledge notes are resources and
the tuning prompt names the tools in order."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult
from profiles.synth import write_profile
from support import fake_maxtext
from support.configs import LOOP_CONFIG
from support.ray_cluster import alive, until_async

from server.agents.coordinator import run_report
from server.agents.types import Experiment
from server.cli.main import main as cli_main
from server.config.apply import apply_text, proposal_edits
from server.services import experiments
from server.services.analysis import analyze

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
LAUNCH = EXAMPLES / "launch" / "xpk_llama3_8b_v6e_16.sh"
PROFILE = ROOT / "tests" / "data" / "profiles" / "cpu" / "fsdp8"
TOOLS = {
    "check",
    "estimate",
    "models",
    "analyze",
    "apply_proposal",
    "verify",
    "profile",
    "kb_search",
    "record_outcome",
}


@contextlib.asynccontextmanager
async def session(cwd: Path = ROOT, **env: str) -> AsyncIterator[ClientSession]:
    """A client session with a fresh `python -m server mcp` in `cwd` (with this test session's environment: its
    ASAP_CACHE_DIR, and `env` over it); the server stops when the session closes its stdin, as any MCP client stops
    it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "server", "mcp"],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


def cli_json(*argv: str | Path) -> Any:
    """What `asap ARGV --json` prints, parsed (run in this process: the same code as the console script)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli_main([*map(str, argv), "--json"])
    return json.loads(out.getvalue())


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    # the text block carries the same document, for clients that read only text
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


def error(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    text: str = result.content[0].text  # type: ignore[union-attr]
    assert "Traceback" not in text
    return text


async def test_mcp_tools_answer_with_the_cli_json(tmp_path: Path) -> None:
    async with session() as s:
        listed = {t.name: t for t in (await s.list_tools()).tools}
        assert set(listed) == TOOLS
        for t in listed.values():  # every tool says what it takes and what it answers
            assert t.input_schema["type"] == "object" and t.input_schema.get("properties"), t.name
            assert t.output_schema is not None and t.output_schema["type"] == "object", t.name
            assert t.description, t.name

        for name in ("llama3-8b-v6e-16.yml", "bad-mesh-v5e-256.yml"):
            path = f"examples/{name}"
            assert ok(await s.call_tool("check", {"path": path})) == cli_json("check", path)
        assert ok(await s.call_tool("check", {"path": str(LAUNCH), "run": 1})) == cli_json(
            "check", LAUNCH, "--run", "1"
        )
        # a config given as text reads as the file `filename` (base_config resolved from the server's cwd)
        text = (EXAMPLES / "llama3-8b-v6e-16.yml").read_text()
        as_text = ok(await s.call_tool("check", {"text": text, "filename": "examples/llama3-8b-v6e-16.yml"}))
        assert as_text == cli_json("check", "examples/llama3-8b-v6e-16.yml")

        good = "examples/llama3-8b-v6e-16.yml"
        assert ok(await s.call_tool("estimate", {"path": good, "top": 2})) == cli_json("estimate", good, "--top", "2")
        mesh = {"ici_fsdp_parallelism": 16, "ici_tensor_parallelism": 1}
        what_if = ok(await s.call_tool("estimate", {"path": good, "mesh": mesh}))
        assert what_if == cli_json("estimate", good, "--mesh", "ici_fsdp_parallelism=16,ici_tensor_parallelism=1")
        assert what_if["mesh"]["ici"] != ok(await s.call_tool("estimate", {"path": good}))["mesh"]["ici"]
        assert ok(await s.call_tool("estimate", {"path": str(LAUNCH)})) == cli_json("estimate", LAUNCH)

        assert ok(await s.call_tool("models", {"name": "llama2-7b"})) == {"models": cli_json("models", "llama2-7b")}
        assert ok(await s.call_tool("analyze", {"path": good})) == cli_json("analyze", good)
        assert ok(await s.call_tool("analyze", {"path": str(LAUNCH), "run": 1})) == cli_json(
            "analyze", LAUNCH, "--run", "1"
        )
        assert ok(await s.call_tool("kb_search", {"query": "fsdp out of memory", "k": 3})) == cli_json(
            "kb", "search", "fsdp out of memory", "--k", "3"
        )
        assert ok(await s.call_tool("profile", {"profile": str(PROFILE), "path": good})) == cli_json(
            "profile", PROFILE, "--config", good
        )
        # the config's linked profile (its `# asap: profile=` comment) when none is given
        linked = tmp_path / "linked.yml"
        linked.write_text(f"# asap: profile={PROFILE}\n" + text)
        assert (
            ok(await s.call_tool("profile", {"path": str(linked)}))["source"] == cli_json("profile", PROFILE)["source"]
        )

        # record_outcome: a profile that is not there is the CLI's own refusal, as a tool error
        missing = tmp_path / "runs" / "missing"
        said = error(await s.call_tool("record_outcome", {"path": good, "profile": str(missing)}))
        assert str(missing) in said or "missing" in said


async def test_mcp_record_outcome_is_the_cli_outcome(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An outcome recorded through the tool is the one `asap outcome --json` records for the same inputs. Each
    recording adds an outcome (and, with --experiment/--proposal, an application) to the store, so the tool
    records in one store and the CLI in a copy of it taken before either: the documents are equal but for what
    each recording generates (its id, its creation time, its knowledge record's path, which is named by the id
    and lies in that store's cache directory, and with --experiment/--proposal the application's id)."""
    mcp_cache, cli_cache = tmp_path / "mcp-cache", tmp_path / "cli-cache"
    monkeypatch.setenv("ASAP_CACHE_DIR", str(mcp_cache))
    # the loop of tests/test_experiments.py: a communication-bound run analysed, proposal 1 applied to the file
    cfg = tmp_path / "c.yml"
    cfg.write_text(LOOP_CONFIG)
    write_profile(tmp_path / "runs" / "before", "comm")
    doc, _ = run_report(Experiment(cfg, workspace=tmp_path))
    exp = doc.experiment
    assert exp is not None
    p1 = doc.proposals[0]
    an = analyze(cfg)
    cfg.write_text(apply_text(LOOP_CONFIG, proposal_edits(an.config, p1.ici, p1.dcn, p1.other_changes)))
    applied = experiments.record_applied(exp, 1, cfg)
    after = tmp_path / "runs" / "after"
    write_profile(after, "compute")
    shutil.copytree(mcp_cache, cli_cache)

    def same(via_mcp: dict[str, Any], via_cli: dict[str, Any], generated: set[str]) -> None:
        for d, cache in ((via_mcp, mcp_cache), (via_cli, cli_cache)):
            record = Path(d["record"])
            assert record.parent == cache / "outcomes" and record.stem == f"outcome-{d['id']}", record
            assert record.is_file()
        assert via_mcp["id"] != via_cli["id"]
        assert {k: v for k, v in via_mcp.items() if k not in generated} == {
            k: v for k, v in via_cli.items() if k not in generated
        }

    async with session(ASAP_CACHE_DIR=str(mcp_cache)) as s:
        via_mcp = ok(await s.call_tool("record_outcome", {"path": str(cfg), "profile": str(after)}))
        monkeypatch.setenv("ASAP_CACHE_DIR", str(cli_cache))
        via_cli = cli_json("outcome", cfg, "--profile", after)
        assert via_mcp["application_id"] == via_cli["application_id"] == applied["id"]
        assert (via_mcp["rank"], via_mcp["experiment_id"]) == (1, exp)
        assert via_mcp["bottleneck_after"] == "compute"
        same(via_mcp, via_cli, {"id", "created", "record"})

        # naming the analysis and its proposal: the application is logged anew, in each store its own
        named = {"path": str(cfg), "profile": str(after), "experiment": exp, "proposal": 1}
        via_mcp = ok(await s.call_tool("record_outcome", named))
        via_cli = cli_json("outcome", cfg, "--profile", after, "--experiment", exp, "--proposal", "1")
        assert via_mcp["application_id"] not in (via_cli["application_id"], applied["id"])
        same(via_mcp, via_cli, {"id", "created", "record", "application_id"})
        # both recordings are in the tool's store
        monkeypatch.setenv("ASAP_CACHE_DIR", str(mcp_cache))
        assert experiments.track_record()["outcomes"] == 2

        # and the server still answers
        assert ok(await s.call_tool("check", {"path": str(cfg)})) == cli_json("check", cfg)


async def test_mcp_bad_inputs_are_tool_errors_and_the_server_goes_on(tmp_path: Path) -> None:
    binary = tmp_path / "binary.yml"
    binary.write_bytes(b"ici_fsdp_parallelism: 4\n\xff\xfe\x00\x01")
    async with session() as s:
        said = error(await s.call_tool("check", {"path": str(tmp_path / "missing.yml")}))
        assert "cannot read" in said and "missing.yml" in said
        said = error(await s.call_tool("check", {"path": str(binary)}))
        assert "binary.yml" in said and "UTF-8" in said and "line 2" in said
        said = error(await s.call_tool("models", {"name": "no-such-model"}))
        assert "no-such-model" in said
        # a mesh that does not divide the slice: the estimate is refused with the located finding
        said = error(
            await s.call_tool("estimate", {"path": "examples/llama3-8b-v6e-16.yml", "mesh": "ici_fsdp_parallelism=3"})
        )
        assert "ASAP101" in said and "ici_fsdp=3" in said and "llama3-8b-v6e-16.yml:12:1" in said
        said = error(await s.call_tool("check", {"path": str(LAUNCH), "run": 9}))
        assert "--run 9" in said and "1 run" in said
        said = error(await s.call_tool("check", {"path": "examples/llama3-8b-v6e-16.yml", "run": 1}))
        assert "launch file" in said
        said = error(await s.call_tool("estimate", {"path": "examples/llama3-8b-v6e-16.yml", "mesh": "nonsense"}))
        assert "--mesh" in said
        error(await s.call_tool("check", {}))  # neither path nor text
        said = error(await s.call_tool("verify", {"path": str(tmp_path / "missing.yml")}))
        assert "cannot read" in said and "missing.yml" in said
        # alive, and still right
        assert ok(await s.call_tool("check", {"path": "examples/llama3-8b-v6e-16.yml"}))["findings"] is not None


async def test_mcp_damaged_stores_heal_instead_of_failing_a_tool(tmp_path: Path) -> None:
    """A knowledge index and an experiment log that are not databases: moved aside and rebuilt by the tools that
    use them (as in the editor and the CLI), and the tools answer as usual."""
    cache = tmp_path / "cache"
    cache.mkdir()
    garbage = bytes(range(256)) * 40
    (cache / "asap.sqlite").write_bytes(garbage)
    (tmp_path / "kb.sqlite").write_bytes(garbage)
    async with session(ASAP_CACHE_DIR=str(cache), ASAP_KB_PATH=str(tmp_path / "kb.sqlite")) as s:
        found = ok(await s.call_tool("kb_search", {"query": "fsdp out of memory", "k": 3}))
        assert found["results"]
        report = ok(await s.call_tool("analyze", {"path": "examples/llama3-8b-v6e-16.yml"}))
        assert report["proposals"] and report["experiment"]
    assert list(cache.glob("asap.sqlite.corrupt-*")) and list(tmp_path.glob("kb.sqlite.corrupt-*"))


async def test_mcp_apply_proposal_keeps_comments_and_writes_only_when_asked(tmp_path: Path) -> None:
    config = tmp_path / "llama.yml"
    original = (EXAMPLES / "llama3-8b-v6e-16.yml").read_text()
    config.write_text(original)
    comments = [line for line in original.splitlines() if line.lstrip().startswith("#")]
    assert comments  # the example has comments to keep
    async with session(tmp_path) as s:
        got = ok(await s.call_tool("apply_proposal", {"path": "llama.yml", "proposal": 1}))
        assert got["written"] is False and got["proposal"] == 1 and got["text"] != original
        assert config.read_text() == original  # nothing written
        assert all(c in got["text"].splitlines() for c in comments)
        # the edited config launches as proposed: its check has no error
        checked = ok(await s.call_tool("check", {"text": got["text"], "filename": "llama.yml"}))
        assert not [f for f in checked["findings"] if f["severity"] == "error"]

        asked = {"path": "llama.yml", "mesh": "ici_fsdp_parallelism=16,ici_tensor_parallelism=1"}
        mesh = ok(await s.call_tool("apply_proposal", asked))
        assert "ici_fsdp_parallelism: 16" in mesh["text"] and all(c in mesh["text"].splitlines() for c in comments)
        said = error(await s.call_tool("apply_proposal", {"path": "llama.yml", "mesh": "ici_fsdp_parallelism=3"}))
        assert "ASAP101" in said
        error(await s.call_tool("apply_proposal", {"path": "llama.yml", "proposal": 9}))

        # a launch file's run: the proposal written into the command's arguments, nothing else of the script changed
        shutil.copy(LAUNCH, tmp_path / LAUNCH.name)
        launch = ok(await s.call_tool("apply_proposal", {"path": LAUNCH.name, "run": 1, "proposal": 1}))
        before, after = LAUNCH.read_text().splitlines(), launch["text"].splitlines()
        changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
        assert changed and all("_parallelism=" in a and "_parallelism=" in b for a, b in changed)

        written = ok(await s.call_tool("apply_proposal", {"path": "llama.yml", "proposal": 1, "write": True}))
        assert written["written"] is True and config.read_text() == got["text"]
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".llama.yml")]  # no temporary file left


async def test_mcp_verify_reports_progress_and_a_cancel_kills_the_compile(tmp_path: Path) -> None:
    exe = fake_maxtext.write(tmp_path / "maxtext-env")
    hold = exe.parent / "hold"
    hold.touch()  # every compile waits until the file is gone: this one until it is cancelled
    config = tmp_path / "llama.yml"
    shutil.copy(EXAMPLES / "llama3-8b-v6e-16.yml", config)
    pids = exe.parent / "pids"
    progress: list[tuple[float, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    async with session(tmp_path) as s:
        with anyio.CancelScope() as scope:

            async def call() -> None:
                await s.call_tool(
                    "verify", {"path": "llama.yml", "maxtext_python": str(exe)}, progress_callback=on_progress
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await until_async(lambda: pids.exists() and pids.read_text().strip(), "the compile to start")
                await until_async(lambda: progress, "a progress notification")
                scope.cancel()  # the client's cancel: notifications/cancelled for the call
        running = [int(p) for p in pids.read_text().split()]
        await until_async(lambda: not any(alive(p) for p in running), "the cancelled compile to stop")
        assert ok(await s.call_tool("check", {"path": "llama.yml"}))["file"] == "llama.yml"  # the server goes on
        hold.unlink()
        done = ok(await s.call_tool("verify", {"path": "llama.yml", "maxtext_python": str(exe)}))
        again = cli_json("verify", config, "--maxtext-python", exe)  # the CLI's answer: the same verdict, cached
        assert (done["cached"], again["cached"]) == (False, True)
        assert {**done, "cached": True} == again
        assert len(pids.read_text().split()) == len(running) + 1  # compiled again after the cancel, once


async def test_mcp_resources_are_the_knowledge_notes_and_the_prompt_names_the_tools() -> None:
    notes = sorted((ROOT / "kb" / "docs").glob("*.md"))
    async with session() as s:
        listed = {str(r.uri): r for r in (await s.list_resources()).resources}
        assert set(listed) == {f"asap://kb/{p.stem}" for p in notes}
        assert all(r.mime_type == "text/markdown" for r in listed.values())
        read = await s.read_resource(f"asap://kb/{notes[0].stem}")
        assert read.contents[0].text == notes[0].read_text()  # type: ignore[union-attr]
        prompts = {p.name: p for p in (await s.list_prompts()).prompts}
        assert [a.name for a in prompts["tune_config"].arguments or []] == ["path"]
        got = await s.get_prompt("tune_config", {"path": "examples/llama3-8b-v6e-16.yml"})
        said = got.messages[0].content.text  # type: ignore[union-attr]
        order = [said.index(f"`{tool}`") for tool in ("check", "analyze", "verify", "apply_proposal")]
        assert order == sorted(order) and "examples/llama3-8b-v6e-16.yml" in said
