"""The Claude reasoning backend: a bounded tool-use loop over one analysed config.

Claude reads the coordinator's brief, calls the deterministic tools of `server.agents.tools` on the config,
and answers through the forced tool `submit_analysis`. The loop is bounded (turn cap, overall deadline,
explicit SDK timeout and retries), answers every tool_use block, keeps the full history, validates the
answer's structure strictly (one repair round), and re-checks every proposed mesh with `Context.evaluate`:
only valid meshes that fit in HBM come back. Every failure becomes `ClaudeUnavailable` with a short reason,
so the coordinator can fall back to the offline engine. The API key never appears in a log line or a reason.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, cast

import anthropic
from anthropic.types import TextBlock, ToolUseBlock
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from server.agents import prompts
from server.agents.prompts import DEFAULT_MODEL, MAX_PROPOSALS, SUBMIT_TOOL
from server.agents.tools import Context, Evaluation
from server.perf import wording

__all__ = [
    "DEFAULT_MODEL",
    "ClaudeAnswer",
    "ClaudeUnavailable",
    "api_key",
    "make_client",
    "run",
]

_LOG = logging.getLogger("asap")


class ClaudeUnavailable(Exception):
    """Claude gave no usable answer; `reason` says why in a few words (shown to the user, logged)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class ClaudeAnswer:
    diagnosis: dict[str, Any]
    proposals: list[tuple[Evaluation, dict[str, Any]]]  # verified, with the model's raw proposal
    dropped: list[tuple[dict[str, Any], str]]  # the model's proposals that failed the checker, and why
    keep_current: bool
    model: str
    turns: int


def api_key() -> str | None:
    """The Anthropic API key, from ANTHROPIC_API_KEY only (the editor passes its stored key that way)."""
    key = os.environ.get("ANTHROPIC_API_KEY", "").strip()
    return key or None


def make_client(
    api_key: str, base_url: str | None = None, timeout_s: float = 30.0, max_retries: int = 2
) -> anthropic.Anthropic:
    """A client with an explicit timeout and retry budget; `base_url` (or ANTHROPIC_BASE_URL) points it
    elsewhere, e.g. at a test server."""
    if not api_key:
        raise ClaudeUnavailable("no API key")
    base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
    return anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=max_retries)


# -- the answer's schema, checked strictly --------------------------------------------------------------
Degree = Annotated[int, Field(ge=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Diagnosis(_Strict):
    bottleneck: prompts.Bottleneck
    summary: str
    evidence: list[str]


class _OtherChanges(_Strict):
    per_device_batch_size: float | None = Field(default=None, gt=0)
    remat_policy: str | None = None
    gradient_accumulation_steps: int | None = Field(default=None, ge=1)
    allow_split_physical_axes: bool | None = None


class _Proposal(_Strict):
    ici: dict[str, Degree]
    dcn: dict[str, Degree] = Field(default_factory=dict)
    other_changes: _OtherChanges = Field(default_factory=_OtherChanges)
    rationale: str
    references: list[str] = Field(default_factory=list)
    confidence: float = Field(ge=0.0, le=1.0)


class _Submission(_Strict):
    diagnosis: _Diagnosis
    proposals: list[_Proposal] = Field(max_length=MAX_PROPOSALS)
    keep_current: bool


def _validation_text(err: ValidationError, limit: int = 6) -> str:
    lines = []
    for e in err.errors()[:limit]:
        loc = ".".join(str(p) for p in e["loc"]) or "(input)"
        lines.append(f"{loc}: {e['msg']}")
    more = err.error_count() - limit
    if more > 0:
        lines.append(f"... and {more} more")
    return "; ".join(lines)


# -- the tools, dispatched by name -----------------------------------------------------------------------
def _degrees(value: Any, name: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be an object mapping mesh axis names to integer degrees")
    out: dict[str, int] = {}
    for axis, degree in value.items():
        if isinstance(degree, bool) or not isinstance(degree, int | float) or int(degree) != degree or degree < 1:
            raise ValueError(f"{name}.{axis} must be a positive integer, got {degree!r}")
        out[str(axis)] = int(degree)
    return out


def _other(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("other_changes must be an object")
    return {k: v for k, v in value.items() if v is not None}


def _check_args(args: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unexpected = [k for k in args if k not in allowed]
    if unexpected:
        raise ValueError(f"unexpected argument(s) {', '.join(unexpected)}; expected {', '.join(allowed) or 'none'}")


def _tool_table(ctx: Context) -> dict[str, tuple[tuple[str, ...], Callable[[dict[str, Any]], dict[str, Any]]]]:
    return {
        "profile_kpis": ((), lambda a: ctx.tool_profile_kpis()),
        "top_ops": (("n",), lambda a: ctx.tool_top_ops(int(a.get("n", 5)))),
        "collectives": ((), lambda a: ctx.tool_collectives()),
        "estimate_mesh": (
            ("ici", "dcn", "other_changes"),
            lambda a: ctx.tool_estimate_mesh(
                _degrees(a.get("ici"), "ici"), _degrees(a.get("dcn"), "dcn"), _other(a.get("other_changes"))
            ),
        ),
        "validate_mesh": (
            ("ici", "dcn"),
            lambda a: ctx.tool_validate_mesh(_degrees(a.get("ici"), "ici"), _degrees(a.get("dcn"), "dcn")),
        ),
        "enumerate_meshes": (
            ("top", "other_changes"),
            lambda a: ctx.tool_enumerate_meshes(int(a.get("top", 10)), _other(a.get("other_changes"))),
        ),
        "kb_search": (
            ("query", "generation", "axis"),
            lambda a: ctx.tool_kb_search(str(a["query"]), a.get("generation"), a.get("axis")),
        ),
    }


def _tool_result(tool_use_id: str, content: str, is_error: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        out["is_error"] = True
    return out


def _answer_tool(ctx: Context, block: ToolUseBlock, log: logging.Logger) -> dict[str, Any]:
    """Run one tool call; any failure is answered as an error result, never raised into the loop."""
    table = _tool_table(ctx)
    args = dict(block.input)
    log.debug("claude calls %s(%s)", block.name, json.dumps(args, default=str)[:500])
    try:
        if block.name not in table:
            raise ValueError(f"unknown tool {block.name!r}; tools: {', '.join(prompts.TOOL_NAMES)}")
        allowed, fn = table[block.name]
        _check_args(args, allowed)
        result = fn(args)
        return _tool_result(block.id, json.dumps(result, default=str))
    except Exception as e:  # the model gets the error as data and may try again
        log.debug("tool %s failed: %s: %s", block.name, type(e).__name__, e)
        return _tool_result(block.id, f"{type(e).__name__}: {e}", is_error=True)


def _assistant_content(content: list[Any]) -> list[dict[str, Any]]:
    """The reply's blocks as request params, for the history."""
    out: list[dict[str, Any]] = []
    for b in content:
        if isinstance(b, TextBlock):
            if b.text:
                out.append({"type": "text", "text": b.text})
        elif isinstance(b, ToolUseBlock):
            out.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
        else:  # thinking and other blocks go back as they came
            out.append(b.model_dump(mode="json", exclude_none=True))
    return out


# -- SDK failures as short reasons -----------------------------------------------------------------------
def _seconds(t: Any) -> float | None:
    if isinstance(t, int | float):
        return float(t)
    read = getattr(t, "read", None)
    return float(read) if isinstance(read, int | float) else None


def _reason(e: Exception, max_retries: int) -> str:
    after = f" after {max_retries} retries" if max_retries > 0 else ""
    if isinstance(e, anthropic.RateLimitError):
        return f"HTTP 429 rate limited{after}"
    if isinstance(e, anthropic.AuthenticationError):
        return "HTTP 401 authentication failed (check the API key)"
    if isinstance(e, anthropic.APIStatusError):
        kind = f" ({e.type})" if isinstance(e.type, str) and e.type else ""
        retried = after if e.status_code >= 500 or e.status_code in (408, 409) else ""
        return f"HTTP {e.status_code}{kind}{retried}"
    if isinstance(e, anthropic.APIConnectionError):
        cause = type(e.__cause__).__name__ if e.__cause__ is not None else "unknown"
        return f"connection failed ({cause}){after}"
    return f"SDK error ({type(e).__name__})"


def _scrub(text: str, secrets: list[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "[redacted]")
    return text


# -- the loop --------------------------------------------------------------------------------------------
def run(
    ctx: Context,
    brief: dict[str, Any],
    client: anthropic.Anthropic,
    model: str = DEFAULT_MODEL,
    max_turns: int = 8,
    deadline_s: float = 90.0,
    log: logging.Logger | None = None,
) -> ClaudeAnswer:
    """Ask Claude for a diagnosis and verified mesh proposals. Raises ClaudeUnavailable on any failure."""
    log = log or _LOG
    secrets = [s for s in (client.api_key, client.auth_token) if s]
    try:
        return _run(ctx, brief, client, model, max(1, max_turns), deadline_s, log)
    except ClaudeUnavailable as e:
        reason = _scrub(e.reason, secrets)
    log.warning("Claude unavailable: %s", reason)
    # raised outside the handler so no exception chain leads back to an SDK error (its request holds the key)
    raise ClaudeUnavailable(reason)


def _run(
    ctx: Context,
    brief: dict[str, Any],
    client: anthropic.Anthropic,
    model: str,
    max_turns: int,
    deadline_s: float,
    log: logging.Logger,
) -> ClaudeAnswer:
    if not (client.api_key or client.auth_token or getattr(client, "credentials", None)):
        raise ClaudeUnavailable("no API key")
    deadline = time.monotonic() + deadline_s
    client_timeout = _seconds(client.timeout)
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompts.first_message(brief)}]
    cap = max_turns  # the one repair round of a malformed answer may go one past the cap
    repairs_left = 1
    force = max_turns == 1
    turn = 0
    while turn < cap:
        turn += 1
        if turn == cap:
            force = True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ClaudeUnavailable(f"deadline exceeded ({deadline_s:g} s)")
        timeout_s = min(client_timeout, remaining) if client_timeout is not None else remaining
        tool_choice = {"type": "tool", "name": SUBMIT_TOOL} if force else {"type": "auto"}
        log.debug("claude turn %d/%d (%s), %d messages", turn, cap, tool_choice["type"], len(messages))
        failure: str | None = None
        try:
            reply = client.messages.create(
                model=model,
                max_tokens=prompts.MAX_TOKENS,
                system=prompts.SYSTEM_PROMPT,
                tools=cast(Any, prompts.TOOLS),
                tool_choice=cast(Any, tool_choice),
                messages=cast(Any, messages),
                timeout=timeout_s,
            )
        except anthropic.APITimeoutError:
            retried = f" ({client.max_retries} retries)" if client.max_retries > 0 else ""
            failure = (
                f"deadline exceeded ({deadline_s:g} s)"
                if time.monotonic() >= deadline
                else f"timeout after {timeout_s:g} s{retried}"
            )
        except anthropic.AnthropicError as e:
            failure = _reason(e, client.max_retries)
        if failure is not None:  # raised outside the handler: see run()
            raise ClaudeUnavailable(failure)

        usage = getattr(reply, "usage", None)
        log.debug(
            "claude turn %d: stop_reason=%s, blocks=%s, tokens in/out=%s/%s",
            turn,
            reply.stop_reason,
            [getattr(b, "name", b.type) for b in reply.content],
            getattr(usage, "input_tokens", None),
            getattr(usage, "output_tokens", None),
        )
        if reply.stop_reason == "refusal":
            raise ClaudeUnavailable("the model refused")
        content = _assistant_content(list(reply.content))
        if content:
            messages.append({"role": "assistant", "content": content})
        tool_uses = [b for b in reply.content if isinstance(b, ToolUseBlock)]
        submits = [b for b in tool_uses if b.name == SUBMIT_TOOL]
        results = [_answer_tool(ctx, b, log) for b in tool_uses if b.name != SUBMIT_TOOL]

        if submits:
            try:
                submission = _Submission.model_validate(submits[0].input)
            except ValidationError as e:
                err = _validation_text(e)
                log.info("claude's %s input is malformed: %s", SUBMIT_TOOL, err)
                if repairs_left == 0:
                    raise ClaudeUnavailable(f"malformed output: {err}") from None
                repairs_left -= 1
                if turn == cap:
                    cap += 1
                results.extend(_tool_result(b.id, prompts.fix_request(err), is_error=True) for b in submits)
                messages.append({"role": "user", "content": results})
                force = True
                continue
            return _verify(ctx, submission, model, turn, log)

        if force:  # a forced reply without the answer: nothing more to ask for
            if turn >= cap:
                raise ClaudeUnavailable("turn limit reached without an answer")
            raise ClaudeUnavailable(f"no answer even when {SUBMIT_TOOL} was forced")
        user: list[dict[str, Any]] = list(results)
        if not tool_uses:  # the model ended its turn without answering: insist
            user.append({"type": "text", "text": prompts.NUDGE_SUBMIT})
            force = True
        elif turn + 1 == cap:
            user.append({"type": "text", "text": prompts.LAST_TURN})
        messages.append({"role": "user", "content": user})
    raise ClaudeUnavailable("turn limit reached without an answer")


def _verify(ctx: Context, sub: _Submission, model: str, turns: int, log: logging.Logger) -> ClaudeAnswer:
    """Re-check every proposal with the deterministic engine; keep the valid ones that fit in HBM."""
    kept: list[tuple[Evaluation, dict[str, Any]]] = []
    dropped: list[tuple[dict[str, Any], str]] = []
    seen: set[str] = set()
    for i, p in enumerate(sub.proposals, 1):
        other = p.other_changes.model_dump(exclude_none=True)
        raw: dict[str, Any] = {
            "ici": dict(p.ici),
            "dcn": dict(p.dcn),
            "other_changes": other,
            "rationale": p.rationale,
            "references": list(p.references),
            "confidence": p.confidence,
        }
        ev = ctx.evaluate(dict(p.ici), dict(p.dcn), other)
        why: str | None = None
        if not ev.valid:
            why = "invalid mesh: " + "; ".join(ev.errors)
        elif not ev.fits:
            mem = ev.estimate.memory if ev.estimate is not None else None
            why = (
                "does not fit in HBM"
                if mem is None
                else f"does not fit in HBM: {mem.total / 2**30:.1f} GiB needed, {wording.gib(mem.usable)} GiB usable"
            )
        else:
            key = json.dumps([ev.ici, ev.dcn, ev.other_changes], sort_keys=True)
            if key in seen:
                why = "duplicate of an earlier proposal"
            seen.add(key)
        if why is not None:
            log.info("claude proposal %d dropped (ici=%s dcn=%s): %s", i, raw["ici"], raw["dcn"], why)
            dropped.append((raw, why))
        else:
            kept.append((ev, raw))
    log.info(
        "claude answered in %d turn(s): %s-bound, %d proposal(s) verified, %d dropped%s",
        turns,
        sub.diagnosis.bottleneck,
        len(kept),
        len(dropped),
        ", keep current" if sub.keep_current else "",
    )
    return ClaudeAnswer(
        diagnosis=sub.diagnosis.model_dump(),
        proposals=kept,
        dropped=dropped,
        keep_current=sub.keep_current,
        model=model,
        turns=turns,
    )
