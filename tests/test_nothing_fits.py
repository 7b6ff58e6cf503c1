"""`nothing_fits` (server/services/nothing_fits.py): when no mesh of the slice fits, `asap analyze` says by how much
the least-memory mesh is over and what would fit, each option priced. Every option is checked by pricing the config
with its changes again, the smallest slice by checking that the slice below it does not fit, and a config with a
mesh that fits gets `nothing_fits: null`."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from server.agents.report import AnalysisReport
from server.config.axes import AXES
from server.config.resolve import load
from server.config.slices import known_names, parse_slice
from server.perf.enumeration import enumerate_meshes
from server.perf.estimate import inputs
from server.presentation.agent_findings import diagnosis_findings, lens_title
from server.services.analysis import analyze

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "schema" / "analyze.schema.json"

# llama2-13b on v5e-16 at per_device_batch_size 8: every mesh needs 23 GiB or more of the 15.75 usable per chip.
TOO_BIG = {
    "model_name": "llama2-13b",
    "compile_topology": "v5e-16",
    "per_device_batch_size": 8,
    "max_target_length": 2048,
    "remat_policy": "full",
    "ici_fsdp_parallelism": 16,
}
# llama3.1-70b on v5e-16, pdbs 2 at 8k: no batch, remat, offload or larger slice at this batch fits on its own; a larger
# slice at the same global batch does.
FAR_TOO_BIG = {
    "model_name": "llama3.1-70b",
    "compile_topology": "v5e-16",
    "per_device_batch_size": 2,
    "max_target_length": 8192,
    "ici_fsdp_parallelism": 16,
}
# llama2-7b on v5e-8 at pdbs 2 with remat minimal: a smaller batch, a policy keeping less, offloading the kept
# matmul outputs and a larger slice each fit.
MINIMAL = {
    "model_name": "llama2-7b",
    "compile_topology": "v5e-8",
    "per_device_batch_size": 2,
    "remat_policy": "minimal",
    "ici_fsdp_parallelism": 8,
}
# gemma2-9b on v5e-16 at pdbs 1 with remat minimal: no mesh on whole physical axes fits, fsdp 8 x tensor 2 does.
SPLIT = {
    "model_name": "gemma2-9b",
    "compile_topology": "v5e-16",
    "per_device_batch_size": 1,
    "remat_policy": "minimal",
    "ici_fsdp_parallelism": 16,
}
# The config's own mesh (data 16) does not fit, but others of the slice do: the proposals' business, not this one's.
OTHERS_FIT = {
    "model_name": "llama2-13b",
    "compile_topology": "v5e-16",
    "per_device_batch_size": 1,
    "max_target_length": 2048,
    "ici_fsdp_parallelism": 1,
    "ici_data_parallelism": 16,
}


CONFIGS = {
    "too_big": TOO_BIG,
    "far_too_big": FAR_TOO_BIG,
    "minimal": MINIMAL,
    "split": SPLIT,
    "others_fit": OTHERS_FIT,
}


def yaml_text(values: dict[str, Any]) -> str:
    def scalar(v: Any) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)

    return "".join(f"{k}: {scalar(v)}\n" for k, v in values.items())


def run_cli(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli.main", "analyze", str(config), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


@functools.cache
def _analyzed(name: str) -> tuple[Path, dict[str, Any], str]:
    import tempfile

    values = CONFIGS[name]
    d = Path(tempfile.mkdtemp(prefix="asap-nothing-fits-"))
    path = d / f"{name}.yml"
    path.write_text(yaml_text(values), encoding="utf-8")
    r = run_cli(path, "--json")
    assert r.returncode in (0, 1), r.stderr
    return path, json.loads(r.stdout), r.stdout


def analyzed(name: str) -> tuple[Path, dict[str, Any]]:
    path, _, out = _analyzed(name)
    return path, json.loads(out)  # a fresh copy


def with_option(values: dict[str, Any], option: dict[str, Any]) -> dict[str, Any]:
    """The config with the option's changes and its mesh, every axis written (1 where the option has none)."""
    out = {k: v for k, v in values.items() if not (k.startswith("ici_") or k.startswith("dcn_"))}
    out.update(option["changes"])
    for a in AXES:
        out[a.ici_key] = option["ici"].get(a.name, 1)
        out[a.dcn_key] = option["dcn"].get(a.name, 1)
    return out


def test_nothing_fits_json_has_the_least_mesh_and_priced_options() -> None:
    _, doc = analyzed("too_big")
    nf = doc["nothing_fits"]
    assert nf is not None and doc["proposals"] == []
    assert nf["summary"].startswith("No mesh of v5e-16 fits llama2-13b at per_device_batch_size 8")
    assert (nf["slice"], nf["chips"], nf["per_device_batch_size"], nf["remat_policy"]) == ("v5e-16", 16, 8, "full")
    least = nf["least"]
    assert (
        least["hbm_bytes"] > least["usable_bytes"] and least["over_bytes"] == least["hbm_bytes"] - least["usable_bytes"]
    )
    assert 0 < least["state_bytes"] < least["hbm_bytes"]
    kinds = [o["kind"] for o in nf["options"]]
    assert {"per_device_batch_size", "slice"} <= set(kinds)
    assert any("remat_policy full" in t for t in nf["tried"])  # full already keeps the least: no remat option
    # offloading the layer inputs leaves the state and a layer's backward, still over (the MINIMAL config's offload
    # fits: test_a_policy_keeping_less_and_offload_are_offered_where_they_fit)
    assert "host_offload" not in kinds and "host offload of every kept activation does not fit either" in nf["tried"]
    for o in nf["options"]:
        assert o["verdict"] in ("fits", "tight") and o["hbm_bytes"] > 0 and o["usable_bytes"] == least["usable_bytes"]
        assert o["step_s"] > 0 and 0 < o["mfu"] < 1
        assert o["tokens_per_s"] == pytest.approx(o["tokens_per_step"] / o["step_s"])  # tokens per second
        assert "ASAP's memory model" in o["basis"] and "server/" not in o["basis"]
    batch = next(o for o in nf["options"] if o["kind"] == "per_device_batch_size")
    assert batch["changes"] == {"per_device_batch_size": 2} and batch["ici"] == {"fsdp": 16}  # the config's spelling
    assert next(o for o in nf["options"] if o["kind"] == "slice")["changes"] == {"compile_topology": "v5e-32"}


def test_every_option_fits_when_the_changed_config_is_priced_again(tmp_path: Path) -> None:
    for name in ("too_big", "far_too_big", "minimal", "split"):
        values = CONFIGS[name]
        _, doc = analyzed(name)
        options = doc["nothing_fits"]["options"]
        assert options, name
        for i, o in enumerate(options):
            p = tmp_path / f"{name}-{i}.yml"
            p.write_text(yaml_text(with_option(values, o)), encoding="utf-8")
            an = analyze(p)
            est = an.estimate
            assert est is not None, (o, [f.message for f in an.diagnostics])
            assert est.memory.launches, (o, est.memory.total, est.memory.usable)
            assert est.layout.slice.name == o["slice"]
            assert est.time.step_s == pytest.approx(o["step_s"]) and round(est.memory.total) == o["hbm_bytes"]


def _previous(name: str) -> str:
    gen = parse_slice(name).chip.generation
    names = sorted(known_names(gen), key=lambda n: parse_slice(n).chips)
    return names[names.index(name) - 1]


@pytest.mark.parametrize("name", ["too_big", "far_too_big", "minimal", "split"])
def test_the_slice_option_is_the_smallest_slice_that_fits(name: str, tmp_path: Path) -> None:
    values = CONFIGS[name]
    _, doc = analyzed(name)
    opt = next(o for o in doc["nothing_fits"]["options"] if o["kind"] == "slice")
    sl = parse_slice(opt["slice"])
    assert opt["chips"] == sl.chips
    prev = parse_slice(_previous(opt["slice"]))
    changed = {**values, **opt["changes"], "compile_topology": prev.name}
    if "per_device_batch_size" in opt["changes"]:  # the same global batch on the smaller slice
        global_batch = opt["changes"]["per_device_batch_size"] * sl.devices
        assert global_batch == values["per_device_batch_size"] * parse_slice(values["compile_topology"]).devices
        changed["per_device_batch_size"] = global_batch / prev.devices
    p = tmp_path / "prev.yml"
    p.write_text(yaml_text(changed), encoding="utf-8")
    en = enumerate_meshes(inputs(load(p)), prev, False)
    assert not en.ranked and en.too_big  # valid meshes, none fits


def test_a_policy_keeping_less_and_offload_are_offered_where_they_fit() -> None:
    _, doc = analyzed("minimal")
    nf = doc["nothing_fits"]
    by_kind = {o["kind"]: o for o in nf["options"]}
    assert set(by_kind) == {"per_device_batch_size", "remat_policy", "host_offload", "slice"}
    # the policy keeping the most that fits (the least recompute), then the offload of MaxText's named policy
    assert by_kind["remat_policy"]["changes"] == {"remat_policy": "save_out_proj"}
    assert by_kind["host_offload"]["changes"] == {"remat_policy": "minimal_offloaded"}
    assert by_kind["per_device_batch_size"]["changes"] == {"per_device_batch_size": 0.5}  # global batch 4 of 8 chips


def test_split_physical_axes_is_offered_when_that_is_what_fits() -> None:
    _, doc = analyzed("split")
    nf = doc["nothing_fits"]
    assert nf["allow_split_physical_axes"] is False
    split = nf["options"][0]
    assert split["kind"] == "split_physical_axes" and split["changes"] == {"allow_split_physical_axes": True}
    assert split["ici"] == {"fsdp": 8, "tensor": 2}
    # the others fit on whole physical axes: they do not need the flag
    assert all("allow_split_physical_axes" not in o["changes"] for o in nf["options"][1:])


def test_far_too_big_says_what_did_not_fit_and_keeps_the_global_batch() -> None:
    _, doc = analyzed("far_too_big")
    nf = doc["nothing_fits"]
    assert [o["kind"] for o in nf["options"]] == ["slice"]
    opt = nf["options"][0]
    assert opt["changes"]["compile_topology"] == "v5e-128" and opt["changes"]["per_device_batch_size"] == 0.25
    assert nf["least"]["state_bytes"] > nf["least"]["usable_bytes"]  # the model state alone is over
    assert any(t.startswith("per_device_batch_size down to") for t in nf["tried"])


def test_a_config_with_a_mesh_that_fits_has_nothing_fits_null() -> None:
    _, doc = analyzed("others_fit")
    assert doc["estimate"]["memory"]["verdict"] == "does not fit" and doc["proposals"]
    assert "nothing_fits" in doc and doc["nothing_fits"] is None
    r = run_cli(ROOT / "examples" / "llama3-8b-v6e-16.yml", "--json")
    assert json.loads(r.stdout)["nothing_fits"] is None


def test_the_documents_validate_against_the_published_schema() -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    for name in CONFIGS:
        _, doc = analyzed(name)
        validator.validate(doc)
        report = AnalysisReport.from_json(doc)
        assert json.dumps(report.to_json()) == json.dumps(doc)  # same keys, order and numbers
    _, doc = analyzed("too_big")
    doc["nothing_fits"]["options"][0].pop("basis")
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(doc)


def test_text_output_says_nothing_fits_and_what_would() -> None:
    path, _ = analyzed("too_big")
    r = run_cli(path)
    out = " ".join(r.stdout.split())  # rich wraps lines
    assert "No mesh of v5e-16 fits llama2-13b at per_device_batch_size 8" in out
    assert "What would fit" in out and "per_device_batch_size: 2 on v5e-16 with fsdp=16" in out
    assert "compile_topology: v5e-32 (32 chips) with " in out  # on its fastest mesh that launches


def test_the_diagnostic_without_proposals_says_what_would_fit() -> None:
    path, doc = analyzed("too_big")
    report = AnalysisReport.from_json(doc)
    findings = diagnosis_findings(report, analyze(path), stale=False)
    assert findings and all("What would fit: per_device_batch_size: 2" in f.message for f in findings)
    assert lens_title(report) == "ASAP: no mesh of v5e-16 fits (what would: see the diagnostic)"
