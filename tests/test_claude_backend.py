"""The Claude backend against the real anthropic SDK, pointed at a scripted local Messages API server
(tests/support/scripted_anthropic.py): tool use, forced submission, strict output validation with one repair
round, re-validation of every proposal, SDK failures as ClaudeUnavailable, and the API key kept secret."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from server.agents import claude
from server.agents.claude import ClaudeUnavailable
from server.agents.prompts import SUBMIT_TOOL
from server.agents.tools import Context
from server.services.analysis import analyze

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "support" / "scripted_anthropic.py"
CONFIG = ROOT / "examples" / "llama3-8b-v6e-16.yml"  # v6e-16 (4x4): ici fsdp 4 x tensor 4
KEY = "sk-ant-test-SECRET123"
FORCED = {"type": "tool", "name": SUBMIT_TOOL}

BRIEF = {
    "slice": {"name": "v6e-16", "chips": 16},
    "current_mesh": {"ici": {"fsdp": 4, "tensor": 4}, "dcn": {}},
    "diagnosis": {"bottleneck": "communication", "summary": "tensor all-reduces exposed"},
    "candidates": [{"ici": {"fsdp": 16}, "speedup": 1.47}],
}


# -- scripted replies ------------------------------------------------------------------------------------
def reply(*blocks: dict[str, Any], stop: str = "tool_use") -> dict[str, Any]:
    return {
        "status": 200,
        "body": {
            "id": "msg_scripted",
            "type": "message",
            "role": "assistant",
            "model": "claude-scripted",
            "content": list(blocks),
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        },
    }


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def use(id_: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": args}


def proposal(ici: dict[str, int], **kw: Any) -> dict[str, Any]:
    p: dict[str, Any] = {
        "ici": ici,
        "dcn": {},
        "other_changes": {},
        "rationale": "estimate_mesh: step 2.56 s vs 3.76 s, speedup 1.47",
        "references": ["kb: v6e ICI bandwidth"],
        "confidence": 0.7,
    }
    p.update(kw)
    return p


def submission(*proposals: dict[str, Any], keep_current: bool = False) -> dict[str, Any]:
    return {
        "diagnosis": {
            "bottleneck": "communication",
            "summary": "Tensor-parallel all-reduces over 4 chips are exposed.",
            "evidence": ["estimate_mesh: exposed tensor comm 0.9 s of 3.76 s step"],
        },
        "proposals": list(proposals),
        "keep_current": keep_current,
    }


def submit(id_: str, args: dict[str, Any]) -> dict[str, Any]:
    return reply(use(id_, SUBMIT_TOOL, args))


GOOD = submission(proposal({"fsdp": 16}))


# -- fixtures --------------------------------------------------------------------------------------------
@dataclass
class Scripted:
    url: str
    log: Path

    def requests(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]

    def bodies(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests()]


@pytest.fixture
def scripted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[list[dict[str, Any]]], Scripted]]:
    """Start the scripted server (127.0.0.1, port read from its first stdout line); killed by PID at the end."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    procs: list[subprocess.Popen[str]] = []

    def start(script: list[dict[str, Any]]) -> Scripted:
        n = len(procs)
        script_path = tmp_path / f"script{n}.json"
        script_path.write_text(json.dumps(script), encoding="utf-8")
        log = tmp_path / f"requests{n}.jsonl"
        proc = subprocess.Popen(
            [sys.executable, str(SERVER), str(script_path), str(log)], stdout=subprocess.PIPE, text=True
        )
        procs.append(proc)
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        return Scripted(f"http://127.0.0.1:{port}", log)

    yield start
    for proc in procs:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(scope="module")
def ctx() -> Context:
    analysis = analyze(CONFIG)
    assert analysis.estimate is not None
    return Context(analysis)


def client(server: Scripted, timeout_s: float = 5.0, max_retries: int = 0) -> Any:
    return claude.make_client(KEY, base_url=server.url, timeout_s=timeout_s, max_retries=max_retries)


def tool_use_ids(message: dict[str, Any]) -> list[str]:
    return [b["id"] for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]


def tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def assert_every_tool_use_answered(bodies: list[dict[str, Any]]) -> None:
    """Each request after a tool_use reply answers every tool_use id of that reply, in its next user message."""
    for body in bodies:
        msgs = body["messages"]
        for i, m in enumerate(msgs):
            if m["role"] == "assistant" and tool_use_ids(m):
                assert i + 1 < len(msgs), "a tool_use was left unanswered"
                nxt = msgs[i + 1]
                assert nxt["role"] == "user"
                assert [r["tool_use_id"] for r in tool_results(nxt)] == tool_use_ids(m)


# -- tests -----------------------------------------------------------------------------------------------
def test_claude_tool_use_then_submit_keeps_only_verified(ctx: Context, scripted: Any, caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="asap")
    server = scripted(
        [
            reply(text("Let me list the candidates."), use("tu_enum", "enumerate_meshes", {"top": 3})),
            reply(
                use("tu_est", "estimate_mesh", {"ici": {"fsdp": 16}, "dcn": {}}),
                use("tu_bad", "no_such_tool", {}),
                use("tu_args", "validate_mesh", {"ici": {"fsdp": "lots"}}),
            ),
            submit(
                "tu_submit",
                submission(
                    proposal({"fsdp": 16}),
                    proposal({"fsdp": 3}),  # ICI product 3 on a 16-chip slice
                    proposal({"data": 4, "tensor": 4}),  # replicated weights: over HBM
                ),
            ),
        ]
    )
    answer = claude.run(ctx, BRIEF, client(server), model="claude-scripted")

    assert answer.turns == 3 and answer.model == "claude-scripted" and not answer.keep_current
    assert answer.diagnosis["bottleneck"] == "communication"
    assert len(answer.proposals) == 1
    ev, raw = answer.proposals[0]
    assert ev.valid and ev.fits and ev.ici == {"fsdp": 16}
    assert raw["confidence"] == 0.7 and raw["references"] == ["kb: v6e ICI bandwidth"]
    assert [d[0]["ici"] for d in answer.dropped] == [{"fsdp": 3}, {"data": 4, "tensor": 4}]
    assert "ASAP101" in answer.dropped[0][1] and "product" in answer.dropped[0][1]
    assert "does not fit in HBM" in answer.dropped[1][1]
    assert sum(" dropped (ici=" in r.getMessage() for r in caplog.records if r.name == "asap") == 2

    bodies = server.bodies()
    assert len(bodies) == 3
    assert_every_tool_use_answered(bodies)
    assert [b["tool_choice"] for b in bodies] == [{"type": "auto"}] * 3
    assert {t["name"] for t in bodies[0]["tools"]} >= {"estimate_mesh", "enumerate_meshes", SUBMIT_TOOL}
    assert "ASAP" in bodies[0]["system"]
    # the full history travels: user, assistant, user(results), assistant, user(results)
    last = bodies[2]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
    assert json.loads(last[0]["content"].split("```json\n")[1].split("\n```")[0]) == BRIEF
    enum = tool_results(last[2])[0]
    assert "is_error" not in enum and json.loads(enum["content"])["candidates"]
    est, unknown, badargs = tool_results(last[4])
    assert json.loads(est["content"])["valid"] is True and "is_error" not in est
    assert unknown["is_error"] is True and "unknown tool" in unknown["content"]
    assert badargs["is_error"] is True and "positive integer" in badargs["content"]


def test_claude_malformed_submit_repaired_once(ctx: Context, scripted: Any) -> None:
    bad = submission(proposal({"fsdp": 16}))
    bad["diagnosis"]["bottleneck"] = "gpu"
    bad["proposals"] = "fsdp 16"
    server = scripted([submit("tu_1", bad), submit("tu_2", GOOD)])
    answer = claude.run(ctx, BRIEF, client(server))
    assert answer.turns == 2 and len(answer.proposals) == 1 and not answer.dropped

    second = server.bodies()[1]
    assert second["tool_choice"] == FORCED
    (fix,) = tool_results(second["messages"][-1])
    assert fix["tool_use_id"] == "tu_1" and fix["is_error"] is True
    assert "diagnosis.bottleneck" in fix["content"] and "proposals" in fix["content"]


def test_claude_malformed_twice_unavailable(ctx: Context, scripted: Any) -> None:
    bad = submission(proposal({"fsdp": 16}, confidence=1.5))
    server = scripted([submit("tu_1", bad), submit("tu_2", bad)])
    with pytest.raises(ClaudeUnavailable) as exc:
        claude.run(ctx, BRIEF, client(server))
    assert exc.value.reason.startswith("malformed output") and "proposals.0.confidence" in exc.value.reason
    assert len(server.requests()) == 2


def test_claude_malformed_on_last_turn_still_gets_its_repair(ctx: Context, scripted: Any) -> None:
    server = scripted([submit("tu_1", {"diagnosis": {}}), submit("tu_2", GOOD)])
    answer = claude.run(ctx, BRIEF, client(server), max_turns=1)
    assert answer.turns == 2
    assert [b["tool_choice"] for b in server.bodies()] == [FORCED, FORCED]


def test_claude_rate_limited_then_retried(ctx: Context, scripted: Any) -> None:
    server = scripted(
        [
            {"status": 429, "headers": {"retry-after": "0", "retry-after-ms": "1"}},
            submit("tu_1", GOOD),
        ]
    )
    answer = claude.run(ctx, BRIEF, client(server, max_retries=2))
    assert len(answer.proposals) == 1
    reqs = server.requests()
    assert len(reqs) == 2 and reqs[0]["body"] == reqs[1]["body"]


def test_claude_rate_limited_out_of_retries(ctx: Context, scripted: Any) -> None:
    server = scripted([{"status": 429, "headers": {"retry-after-ms": "1"}}] * 2)
    with pytest.raises(ClaudeUnavailable) as exc:
        claude.run(ctx, BRIEF, client(server, max_retries=1))
    assert exc.value.reason == "HTTP 429 rate limited after 1 retries"


def test_claude_timeout(ctx: Context, scripted: Any) -> None:
    server = scripted([{**submit("tu_1", GOOD), "delay_s": 3.0}])
    with pytest.raises(ClaudeUnavailable) as exc:
        claude.run(ctx, BRIEF, client(server, timeout_s=0.5, max_retries=0))
    assert exc.value.reason == "timeout after 0.5 s"


def test_claude_deadline(ctx: Context, scripted: Any) -> None:
    server = scripted([{**submit("tu_1", GOOD), "delay_s": 3.0}])
    with pytest.raises(ClaudeUnavailable) as exc:
        claude.run(ctx, BRIEF, client(server, timeout_s=30, max_retries=0), deadline_s=0.5)
    assert exc.value.reason.startswith("deadline exceeded")


def test_claude_server_error(ctx: Context, scripted: Any) -> None:
    server = scripted([{"status": 500}])
    with pytest.raises(ClaudeUnavailable) as exc:
        claude.run(ctx, BRIEF, client(server, max_retries=0))
    assert exc.value.reason.startswith("HTTP 500")


def test_claude_end_turn_without_submit_forces_it(ctx: Context, scripted: Any) -> None:
    server = scripted([reply(text("The current mesh looks fine."), stop="end_turn"), submit("tu_1", GOOD)])
    answer = claude.run(ctx, BRIEF, client(server))
    assert answer.turns == 2
    first, second = server.bodies()
    assert first["tool_choice"] == {"type": "auto"} and second["tool_choice"] == FORCED
    assert second["messages"][1] == {"role": "assistant", "content": [text("The current mesh looks fine.")]}
    assert SUBMIT_TOOL in second["messages"][2]["content"][-1]["text"]


def test_claude_turn_cap_forces_submit_on_last_turn(ctx: Context, scripted: Any) -> None:
    server = scripted(
        [
            reply(use("tu_1", "validate_mesh", {"ici": {"fsdp": 16}})),
            reply(use("tu_2", "estimate_mesh", {"ici": {"fsdp": 16}})),
            submit("tu_3", submission(keep_current=True)),
        ]
    )
    answer = claude.run(ctx, BRIEF, client(server), max_turns=3)
    assert answer.turns == 3 and answer.keep_current and answer.proposals == [] and answer.dropped == []
    bodies = server.bodies()
    assert [b["tool_choice"] for b in bodies] == [{"type": "auto"}, {"type": "auto"}, FORCED]
    assert_every_tool_use_answered(bodies)
    assert "last turn" in bodies[2]["messages"][-1]["content"][-1]["text"]


def test_claude_turn_cap_without_answer(ctx: Context, scripted: Any) -> None:
    server = scripted([reply(use("tu_1", "validate_mesh", {"ici": {"fsdp": 16}})), reply(text("hmm"))])
    with pytest.raises(ClaudeUnavailable) as exc:
        claude.run(ctx, BRIEF, client(server), max_turns=2)
    assert exc.value.reason == "turn limit reached without an answer"


def _chain(e: BaseException | None) -> Iterator[BaseException]:
    while e is not None:
        yield e
        e = e.__cause__ or e.__context__


def test_claude_api_key_never_leaks(ctx: Context, scripted: Any, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)  # the root: asap, anthropic, httpx2, httpcore2 and the rest
    for name in ("asap", "anthropic", "httpx", "httpx2", "httpcore", "httpcore2"):
        caplog.set_level(logging.DEBUG, logger=name)
    server = scripted(
        [
            {"status": 429, "headers": {"retry-after-ms": "1"}},
            reply(use("tu_1", "estimate_mesh", {"ici": {"fsdp": 3}})),
            submit("tu_2", submission(proposal({"fsdp": 16}), proposal({"fsdp": 3}))),
            {"status": 401},
        ]
    )
    c = client(server, max_retries=1)
    answer = claude.run(ctx, BRIEF, c)
    assert len(answer.proposals) == 1 and len(answer.dropped) == 1
    with pytest.raises(ClaudeUnavailable) as exc:
        claude.run(ctx, BRIEF, c)
    assert exc.value.reason.startswith("HTTP 401")
    for e in _chain(exc.value):
        assert KEY not in str(e) and KEY not in repr(e)
        assert e.__class__.__module__.split(".")[0] != "anthropic"  # no SDK error (its request holds the key)

    assert caplog.records, "expected the SDK's debug logging to be captured"
    assert KEY not in caplog.text
    for r in caplog.records:
        assert KEY not in r.getMessage()

    reqs = server.requests()
    assert len(reqs) == 4
    for r in reqs:
        assert KEY not in json.dumps(r["body"])
        carrying = {k.lower(): v for k, v in r["headers"].items() if KEY in v}
        # anthropic 2.14.0 sends a plain api_key as `Authorization: Bearer`; older SDKs used `x-api-key`
        assert len(carrying) == 1 and set(carrying) <= {"x-api-key", "authorization"}
        assert next(iter(carrying.values())) in (KEY, f"Bearer {KEY}")


def test_claude_api_key_and_client_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert claude.api_key() is None
    monkeypatch.setenv("ANTHROPIC_API_KEY", f" {KEY}\n")
    assert claude.api_key() == KEY
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    c = claude.make_client(KEY, timeout_s=7.0, max_retries=1)
    assert str(c.base_url).startswith("http://127.0.0.1:9") and c.timeout == 7.0 and c.max_retries == 1
    with pytest.raises(ClaudeUnavailable, match="no API key"):
        claude.make_client("")


# -- through the Coordinator ----------------------------------------------------------------------------
def test_coordinator_uses_claudes_verified_proposals(scripted: Any) -> None:
    from server.agents.coordinator import run
    from server.agents.types import Experiment

    server = scripted([submit("s1", submission(proposal({"fsdp": 16}, rationale="FSDP everywhere")))])
    res = run(Experiment(CONFIG), llm="auto", client=client(server), use_kb=False)
    assert res.backend.name == "claude" and res.backend.fallback_reason is None
    (p,) = res.proposals
    assert p.ici == {"fsdp": 16} and p.rationale == "FSDP everywhere"
    assert p.speedup > 1.2  # re-priced by the deterministic engine, not taken from the model
    assert "re-validated" in p.confidence_basis


def test_coordinator_falls_back_to_offline_and_says_why(scripted: Any) -> None:
    from server.agents.coordinator import run
    from server.agents.types import Experiment

    server = scripted([{"status": 500, "body": {"type": "error", "error": {"type": "api_error", "message": "x"}}}])
    res = run(Experiment(CONFIG), llm="auto", client=client(server), use_kb=False)
    offline = run(Experiment(CONFIG), llm="off", use_kb=False)
    assert res.backend.name == "offline" and "Claude unavailable" in (res.backend.fallback_reason or "")
    assert [p.ici for p in res.proposals] == [p.ici for p in offline.proposals]


def test_coordinator_without_a_key_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from server.agents.coordinator import run
    from server.agents.types import Experiment

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    res = run(Experiment(CONFIG), llm="auto", use_kb=False)
    assert res.backend.name == "offline" and "no Anthropic API key" in (res.backend.fallback_reason or "")


def test_coordinator_falls_back_on_a_reply_that_is_not_a_message(scripted: Any) -> None:
    from server.agents.coordinator import run
    from server.agents.types import Experiment

    server = scripted([{"status": 200, "body": {"unexpected": True}}])
    res = run(Experiment(CONFIG), llm="auto", client=client(server), use_kb=False)
    assert res.backend.name == "offline" and (res.backend.fallback_reason or "").startswith("Claude unavailable")
    assert res.proposals  # the offline ones
