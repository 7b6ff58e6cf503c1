"""`asap verify --proposals` as the editor's Verify (verification.verify_advice: the current mesh first, a proposal the
TPU compiler rejects withdrawn and the engine's next candidate compiled in its place), and `asap analyze` applying the
verdicts ASAP's cache keeps. The compiler is the MaxText path's real child process, answered by
tests/support/fake_maxtext.py (libtpu's out-of-memory for fsdp=16, as on the demo config)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import fake_maxtext

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "llama3-8b-v6e-16.yml"


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    exe = fake_maxtext.write(tmp_path / "maxtext-env")
    (exe.parent / "release").touch()  # the proposals compile at once
    cfg = tmp_path / "llama.yml"
    shutil.copy(EXAMPLE, cfg)
    env = {**os.environ, "ASAP_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("ASAP_MAXTEXT_PYTHON", None)
    return cfg, exe, env


def asap(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli.main", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )


def test_verify_proposals_withdraws_and_replaces_then_analyze_applies_the_cached_verdicts(setup) -> None:
    cfg, exe, env = setup
    before = json.loads(asap(env, "analyze", str(cfg), "--json").stdout)
    assert before["proposals"][0]["ici"] == {"fsdp": 16}  # the estimate's proposal 1, not compiled yet
    assert "withdrawn" not in before and "compiler" not in before["proposals"][0]

    r = asap(env, "verify", str(cfg), "--proposals", "--maxtext-python", str(exe), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    results = doc["results"]
    assert results[0]["label"] == "current mesh" and results[0]["rank"] is None  # the current mesh first
    assert results[0]["result"]["status"] == "ok"
    assert [e["rank"] for e in results[1:]] == [1, 2, 3]  # the proposals as they now stand
    assert all(e["overrides"].get("ici_fsdp_parallelism") != 16 for e in results)
    assert all(e["result"]["status"] == "ok" for e in results)
    assert doc["withdrawn"] and all(w["overrides"]["ici_fsdp_parallelism"] == 16 for w in doc["withdrawn"])
    assert all("39.80 GiB of 31.25 GiB" in w["result"]["message"] for w in doc["withdrawn"])  # the compiler's words
    assert doc["compiler_note"].startswith("Withdrawn proposal 1 (fsdp=16): estimate ")

    # the human output: the current mesh's verdict first, then the proposals, then the withdrawn with their words
    text = asap(env, "verify", str(cfg), "--proposals", "--maxtext-python", str(exe)).stdout
    heads = [ln for ln in text.splitlines() if ln.startswith("== ")]
    assert heads[0].startswith("== current mesh (as written) on v6e-16: ok")
    assert [h.split(" (")[0] for h in heads[1:4]] == ["== proposal 1", "== proposal 2", "== proposal 3"]
    assert heads[4].startswith("== withdrawn by the TPU compiler (")
    assert "fsdp=16: does not fit: needs 39.80 GiB of 31.25 GiB per chip" in text

    # `asap analyze` reads the verdicts back (the same MaxText: its version keys the cache), compiling nothing
    env_mx = {**env, "ASAP_MAXTEXT_PYTHON": str(exe)}
    pids = (exe.parent / "pids").read_text()
    after = json.loads(asap(env_mx, "analyze", str(cfg), "--json").stdout)
    assert (exe.parent / "pids").read_text() == pids  # no compile
    shown = [{k: v for k, v in e["result"]["mesh"]["ici"].items() if v != 1} for e in results[1:]]
    assert [p["ici"] for p in after["proposals"]] == shown  # the meshes `asap verify` printed, in its order
    assert all(p["compiler"]["fits"] is True for p in after["proposals"])
    assert after["withdrawn"][0]["ici"] == {"fsdp": 16}
    assert after["compiler_note"] == doc["compiler_note"]


def test_verify_proposals_with_another_mesh_is_a_usage_error(setup) -> None:
    cfg, _, env = setup
    r = asap(env, "verify", str(cfg), "--proposals", "--mesh", "ici_fsdp_parallelism=16", "--json")
    assert r.returncode == 2
    assert json.loads(r.stdout)["errors"][0]["kind"] == "usage"
    assert "--proposals verifies the config's own mesh" in r.stderr
