"""Everything the Claude backend says to the model: the system prompt, the first user message built from the
coordinator's brief, the follow-up nudges, and the tool definitions (JSON schemas) for the deterministic tools
of `server.agents.tools` and for the forced output tool `submit_analysis`. No prompt text lives elsewhere.
"""

from __future__ import annotations

import json
from typing import Any, Literal, get_args

from server.config.axes import AXES

# A current model id of the installed SDK's model list (its older Sonnet ids are marked deprecated there).
DEFAULT_MODEL = "claude-sonnet-4-6"
MAX_TOKENS = 4096
MAX_PROPOSALS = 3

SUBMIT_TOOL = "submit_analysis"
Bottleneck = Literal["compute", "hbm", "communication", "input", "host", "memory"]
BOTTLENECKS: tuple[str, ...] = get_args(Bottleneck)
AXIS_NAMES = tuple(a.name for a in AXES)

SYSTEM_PROMPT = f"""\
You are ASAP, a performance advisor for MaxText training runs on Google Cloud TPU slices. You are given one \
MaxText config that has already been analysed: its TPU slice, its current device mesh, the offline engine's \
diagnosis and candidate meshes. Your job is to say what limits its step time and to propose up to \
{MAX_PROPOSALS} better sharding meshes, or to say that the current mesh should be kept.

Facts you must respect:
- A proposal is a FULL mesh assignment: `ici` maps MaxText mesh axes to their ICI (within-slice) degree and \
`dcn` maps axes to their DCN (across-slices) degree. Axes you leave out are 1. The axes are: \
{", ".join(AXIS_NAMES)} (the config keys are ici_<axis>_parallelism and dcn_<axis>_parallelism; \
`pipeline` is the `stage` mesh axis).
- The product of the ICI degrees must equal the devices per slice, and the product of the DCN degrees the \
number of slices. The tools know the slice's topology; do not guess it.
- Only meshes that the tools report as valid AND fitting in HBM count. Check every mesh you propose with \
estimate_mesh (or pick it from enumerate_meshes) before you submit it. Every proposal is re-checked by the \
same deterministic engine after you submit; invalid or over-HBM ones are dropped.
- You may also change per_device_batch_size, remat_policy or gradient_accumulation_steps in `other_changes` \
when the evidence supports it; say so in the rationale. A mesh that enumerate_meshes marks \
needs_allow_split_physical_axes needs `allow_split_physical_axes: true` in `other_changes`.
- Keeping the current mesh is a legitimate answer: set keep_current when no candidate is clearly better \
(for instance when the estimated speedup is within the model's error, a few percent).

How to work:
- Ground every claim in numbers from tool results (step time, MFU, speedup, HBM bytes, exposed \
communication per axis, profile KPIs) and cite them in `evidence` and `rationale`. Cite knowledge-base \
sources (their titles or ids from kb_search) in `references` when you rely on them. Never invent numbers.
- Use profile_kpis, top_ops and collectives when a profile is linked; they say what the run actually spent \
its time on. The estimate is a model; a profile is a measurement.
- Be brief. Call tools only when they add evidence, then call {SUBMIT_TOOL} exactly once with your answer.
"""


def first_message(brief: dict[str, Any]) -> str:
    """The first user message: the coordinator's brief as JSON, with the task restated."""
    return (
        "Here is the analysed config (JSON, prepared by ASAP's deterministic engine):\n\n"
        f"```json\n{json.dumps(brief, indent=1, sort_keys=True, default=str)}\n```\n\n"
        "Diagnose the bottleneck and propose up to "
        f"{MAX_PROPOSALS} better meshes (or keep the current one). Verify each mesh with the tools, then call "
        f"{SUBMIT_TOOL}."
    )


NUDGE_SUBMIT = f"Please call {SUBMIT_TOOL} now with your diagnosis and verified proposals."
LAST_TURN = f"This is your last turn: call {SUBMIT_TOOL} now with what you have verified so far."


def fix_request(error: str) -> str:
    """The tool_result text asking the model to correct a malformed submit_analysis call."""
    return (
        f"Your {SUBMIT_TOOL} input does not match its schema:\n{error}\n"
        f"Call {SUBMIT_TOOL} again with corrected input (same content, valid structure)."
    )


# -- tool definitions ---------------------------------------------------------------------------------------
_DEGREES: dict[str, Any] = {
    "type": "object",
    "description": f"Mesh axis name ({', '.join(AXIS_NAMES)}) -> parallelism degree; axes left out are 1.",
    "additionalProperties": {"type": "integer", "minimum": 1},
}

_OTHER_CHANGES: dict[str, Any] = {
    "type": "object",
    "description": "Optional non-mesh key changes applied together with the mesh.",
    "properties": {
        "per_device_batch_size": {"type": "number", "exclusiveMinimum": 0},
        "remat_policy": {"type": "string"},
        "gradient_accumulation_steps": {"type": "integer", "minimum": 1},
        "allow_split_physical_axes": {
            "type": "boolean",
            "description": "true when the mesh splits a physical torus axis (enumerate_meshes marks such meshes)",
        },
    },
    "additionalProperties": False,
}

_NO_INPUT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "profile_kpis",
        "description": "Measured KPIs of the profile linked to this config (step time, MFU, busy fractions, "
        "idle/host/input time) and the profile's verdict. Use first when a profile is linked; "
        "returns available=false when none is.",
        "input_schema": _NO_INPUT,
    },
    {
        "name": "top_ops",
        "description": "The profile's most expensive XLA ops and op categories, with ops whose measured rates "
        "are physically implausible flagged. Use to see where measured time goes.",
        "input_schema": {
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5}},
            "additionalProperties": False,
        },
    },
    {
        "name": "collectives",
        "description": "The profile's collectives per mesh axis: time, bytes, achieved bandwidth against the "
        "ICI/DCN bandwidth the slice gives that axis. Use when communication may be the bottleneck.",
        "input_schema": _NO_INPUT,
    },
    {
        "name": "estimate_mesh",
        "description": "Price one candidate mesh with the performance model: validity (with the errors), step "
        "time, tokens/s, MFU, bottleneck, HBM bytes against usable HBM, exposed communication per axis and "
        "the speedup over the current config. Use on every mesh before proposing it.",
        "input_schema": {
            "type": "object",
            "properties": {"ici": _DEGREES, "dcn": _DEGREES, "other_changes": _OTHER_CHANGES},
            "required": ["ici"],
            "additionalProperties": False,
        },
    },
    {
        "name": "validate_mesh",
        "description": "Cheap check of one mesh: valid for the slice (with the errors) and whether it fits in "
        "HBM. Use to rule out a mesh quickly; estimate_mesh gives the numbers.",
        "input_schema": {
            "type": "object",
            "properties": {"ici": _DEGREES, "dcn": _DEGREES},
            "required": ["ici"],
            "additionalProperties": False,
        },
    },
    {
        "name": "enumerate_meshes",
        "description": "Every valid mesh of the slice that fits in HBM, ranked by estimated step time (best "
        "first), with the counts of valid-and-fitting and over-HBM meshes. Use to find candidates.",
        "input_schema": {
            "type": "object",
            "properties": {
                "top": {"type": "integer", "minimum": 1, "maximum": 30, "default": 10},
                "other_changes": _OTHER_CHANGES,
            },
            "additionalProperties": False,
        },
    },
    {
        "name": "kb_search",
        "description": "Search ASAP's knowledge base (TPU and MaxText notes, past optimization records) for "
        "guidance; results carry their sources for `references`. Filter by TPU generation (e.g. v5e, v6e) "
        "or mesh axis when relevant.",
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "generation": {"type": "string"},
                "axis": {"type": "string", "enum": list(AXIS_NAMES)},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
    {
        "name": SUBMIT_TOOL,
        "description": "Submit the final answer: the diagnosis and up to "
        f"{MAX_PROPOSALS} verified mesh proposals (or keep_current). Call exactly once, at the end.",
        "input_schema": {
            "type": "object",
            "properties": {
                "diagnosis": {
                    "type": "object",
                    "properties": {
                        "bottleneck": {"type": "string", "enum": list(BOTTLENECKS)},
                        "summary": {"type": "string"},
                        "evidence": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "Numbers from tool results, each with where it came from.",
                        },
                    },
                    "required": ["bottleneck", "summary", "evidence"],
                    "additionalProperties": False,
                },
                "proposals": {
                    "type": "array",
                    "maxItems": MAX_PROPOSALS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "ici": _DEGREES,
                            "dcn": _DEGREES,
                            "other_changes": _OTHER_CHANGES,
                            "rationale": {"type": "string"},
                            "references": {"type": "array", "items": {"type": "string"}},
                            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                        },
                        "required": ["ici", "dcn", "other_changes", "rationale", "references", "confidence"],
                        "additionalProperties": False,
                    },
                },
                "keep_current": {"type": "boolean"},
            },
            "required": ["diagnosis", "proposals", "keep_current"],
            "additionalProperties": False,
        },
    },
]

TOOL_NAMES = tuple(t["name"] for t in TOOLS)
