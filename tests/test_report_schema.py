"""The `asap analyze --json` document and its published schema (schema/analyze.schema.json): the committed schema
is the one the typed models (server/agents/report.py) generate; what the CLI really prints for every bundled
example, a profile-linked config and a quantized one validates against it, parses into the models and dumps back
to the same JSON; a document with a renamed or missing key is rejected by both."""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pydantic
import pytest
from profiles.synth import write_profile

from server.agents.report import AnalysisReport, json_schema
from server.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "schema" / "analyze.schema.json"
EXAMPLES = sorted((ROOT / "examples").glob("*.yml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def analyze_json(config: Path, *extra: str) -> dict[str, Any]:
    """The CLI's real `asap analyze --json` document (a fresh copy: callers may change it)."""
    return copy.deepcopy(_analyze_json(config, *extra))


@functools.cache
def _analyze_json(config: Path, *extra: str) -> dict[str, Any]:
    r = subprocess.run(
        [sys.executable, "-m", "server.cli.main", "analyze", str(config), "--json", *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode in (0, 1), r.stderr  # 1: the config has errors, still a document
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def check(doc: dict[str, Any], validator: jsonschema.protocols.Validator) -> AnalysisReport:
    validator.validate(doc)
    report = AnalysisReport.from_json(doc)
    assert json.dumps(report.to_json(), indent=2) == json.dumps(doc, indent=2)  # same keys, order and numbers
    return report


def test_committed_schema_is_the_generated_one() -> None:
    assert json.loads(SCHEMA.read_text(encoding="utf-8")) == json_schema()
    r = subprocess.run(
        [sys.executable, "tools/write_generated.py", "--check"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert r.returncode == 0, r.stdout + r.stderr + " (run tools/write_generated.py)"


@pytest.mark.parametrize("config", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_cli_output_of_each_example_matches_the_schema(config: Path, validator: jsonschema.protocols.Validator) -> None:
    report = check(analyze_json(config), validator)
    assert report.config == str(config)


def test_profile_linked_and_quantized_documents_match_the_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], validator: jsonschema.protocols.Validator
) -> None:
    write_profile(tmp_path / "run", "comm", seed=3)
    linked = tmp_path / "linked.yml"
    linked.write_text(
        "# asap: profile=run\ncompile_topology: v5e-4\nmodel_name: llama2-7b\nper_device_batch_size: 1\n"
        "ici_fsdp_parallelism: 4\n"
    )
    main(["analyze", str(linked), "--json"])
    report = check(json.loads(capsys.readouterr().out), validator)
    assert report.profile is not None and report.profile.comparison is not None
    assert report.diagnosis is not None and report.diagnosis.gap is not None

    quantized = tmp_path / "int8.yml"
    quantized.write_text((ROOT / "examples" / "llama3-8b-v6e-16.yml").read_text() + "quantization: int8\n")
    main(["analyze", str(quantized), "--json"])
    report = check(json.loads(capsys.readouterr().out), validator)
    assert report.estimate is not None and any(p.dtype for p in report.estimate.roofline.points)


def _renamed(d: dict[str, Any], old: str, new: str) -> None:
    d[new] = d.pop(old)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.pop("backend"),
        lambda d: _renamed(d, "proposals", "proposal"),
        lambda d: _renamed(d["proposals"][0]["expected"], "step_s", "step_time_s"),
        lambda d: d["proposals"][0].pop("keep_current"),
        lambda d: _renamed(d["estimate"]["time"], "step_s", "step"),
        lambda d: d["diagnosis"].pop("summary"),
        lambda d: d["slice"].update(chips="256"),
    ],
    ids=[
        "missing backend",
        "renamed proposals",
        "renamed expected.step_s",
        "missing keep_current",
        "renamed estimate.time.step_s",
        "missing diagnosis.summary",
        "chips as a string",
    ],
)
def test_a_changed_document_is_rejected(change: Any, validator: jsonschema.protocols.Validator) -> None:
    doc = analyze_json(ROOT / "examples" / "llama3-8b-v6e-16.yml")
    check(doc, validator)
    bad = copy.deepcopy(doc)
    change(bad)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)
    with pytest.raises(pydantic.ValidationError):
        AnalysisReport.from_json(bad)
