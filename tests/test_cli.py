"""`asap check`: human and JSON output, exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def asap(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli.main", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_check_bad_example_json_and_exit_status():
    r = asap("check", str(EXAMPLES / "bad-mesh-v5e-256.yml"), "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["slice"]["name"] == "v5e-256" and doc["slice"]["devices_per_slice"] == 256
    assert doc["mesh"]["ici"]["fsdp"] == 32 and doc["mesh"]["ici"]["tensor"] == 16
    f = next(x for x in doc["findings"] if x["code"] == "ASAP101")
    assert (f["severity"], f["key"], f["line"], f["column"]) == ("error", "ici_fsdp_parallelism", 7, 1)
    assert set(f) >= {"code", "severity", "message", "key", "line", "column"}


def test_check_good_example_exits_zero_with_human_summary():
    r = asap("check", str(EXAMPLES / "llama2-7b-v5e-256.yml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ICI fsdp=256" in r.stdout and "0 error(s)" in r.stdout


def test_check_human_output_is_compiler_style(tmp_path):
    p = tmp_path / "c.yml"
    p.write_text("model_name: llama2-7b\ncompile_topology: v5e-256\nici_tensor_parallelism: 3\n")
    r = asap("check", str(p))
    assert r.returncode == 1
    assert f"{p}:1:1: error ASAP103:" in r.stdout  # the -1 is MaxText's default fsdp: anchored at the top


def test_check_slice_option_and_missing_file(tmp_path):
    p = tmp_path / "c.yml"
    p.write_text("model_name: llama2-7b\nici_fsdp_parallelism: 8\n")
    assert json.loads(asap("check", str(p), "--json", "--slice", "v5e-8").stdout)["slice"]["source"] == "setting"
    r = asap("check", str(tmp_path / "missing.yml"))
    assert r.returncode == 2 and "cannot read" in r.stderr


def test_check_non_maxtext_yaml_is_quietly_ok(tmp_path):
    p = tmp_path / "pod.yml"
    p.write_text("apiVersion: v1\nkind: Pod\n")
    r = asap("check", str(p), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["findings"] == []


def test_estimate_json_and_alternatives():
    r = asap(
        "estimate",
        str(EXAMPLES / "llama2-7b-v5e-256.yml"),
        "--json",
        "--top",
        "3",
        "--mesh",
        "ici_fsdp_parallelism=16,ici_tensor_parallelism=16",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["mesh"]["ici"]["tensor"] == 16 and doc["bottleneck"] in ("compute", "hbm", "communication")
    alts = doc["alternatives"]
    assert [a["rank"] for a in alts] == [1, 2, 3]
    assert alts[0]["step_s"] <= alts[-1]["step_s"] and alts[0]["speedup"] > 1  # 16-way TP is not the best


def test_estimate_rejects_an_unplaceable_mesh_with_the_located_error():
    r = asap(
        "estimate",
        str(EXAMPLES / "llama2-7b-v5e-256.yml"),
        "--mesh",
        "ici_fsdp_parallelism=64,ici_tensor_parallelism=4",
    )
    assert r.returncode == 1 and "ASAP106" in r.stderr
    r = asap("estimate", str(EXAMPLES / "llama2-7b-v5e-256.yml"), "--mesh", "ici_fsdp_parallelism")
    assert r.returncode == 2 and "key=value" in r.stderr


def test_estimate_top_human_lists_the_json_alternatives_in_order():
    args = ("estimate", str(EXAMPLES / "llama3-8b-v6e-16.yml"), "--top", "3")
    human, doc = asap(*args), json.loads(asap(*args, "--json").stdout)
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    at = lines.index("  fastest valid meshes on v6e-16 (of every assignment that launches and fits):")
    rows = [line for line in lines[at + 1 :] if not line.lstrip().startswith("equivalent")]
    assert len(rows) == 3 == len(doc["alternatives"])
    for line, alt in zip(rows, doc["alternatives"], strict=True):
        assert line.startswith(f"    {alt['rank']}. {alt['label']:<48} MFU {alt['mfu']:.1%}")
        assert line.endswith(f"{alt['bottleneck']}-bound  x{alt['speedup']:.2f}")
    equivalent = [line.split(": ", 1)[1] for line in lines[at + 1 :] if line.lstrip().startswith("equivalent")]
    assert equivalent == ["; ".join(a["equivalent"]) for a in doc["alternatives"] if a["equivalent"]]


def test_shared_flags_are_declared_once_and_keep_their_help():
    from server.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices
    with_json = {name for name, p in sub.items() if any(a.dest == "json" for a in p._actions)}
    assert with_json == {"check", "estimate", "profile", "analyze", "verify", "outcome", "stats", "models"}
    helps = " ".join(asap("check", "--help").stdout.split())
    assert "--json machine-readable output (see docs/cli.md)" in helps
    assert "--slice NAME slice to assume when a config declares none (e.g. v5e-256)" in helps
    source = (ROOT / "server" / "cli" / "main.py").read_text()
    assert source.count('"--json"') == 1 and source.count('"--maxtext-path"') == 1
