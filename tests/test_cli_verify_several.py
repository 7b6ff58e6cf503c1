"""`asap verify A.yml B.yml ...` on this machine: each config verified on its own, one after another, a config that
cannot be read an error of its own while the others run, the exit status the worst of them; the text in one section
per config, the JSON `{"configs": [{"file", "exit_status", "report" | "errors"}], "exit_status"}` with each `report`
the document `asap verify CONFIG --json` prints for that config alone. The compiler is the MaxText path's real child
process, answered by tests/support/fake_maxtext.py (libtpu's out-of-memory for fsdp=16). The same on a Ray cluster,
in one sweep: tests/test_ray_sweep.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import fake_maxtext

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "llama3-8b-v6e-16.yml"


@pytest.fixture
def setup(tmp_path: Path) -> tuple[list[Path], Path, dict[str, str]]:
    """Two configs (the same model; the second's text differs, so its compiles are its own) and the stand-in."""
    exe = fake_maxtext.write(tmp_path / "maxtext-env")
    (exe.parent / "release").touch()  # the proposals compile at once
    a, b = tmp_path / "a.yml", tmp_path / "b.yml"
    a.write_text(EXAMPLE.read_text())
    b.write_text(EXAMPLE.read_text() + "# the second config\n")
    env = {**os.environ, "ASAP_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("ASAP_MAXTEXT_PYTHON", None)
    return [a, b], exe, env


def asap(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


def _compiles(exe: Path) -> int:
    pids = exe.parent / "pids"
    return len(pids.read_text().split()) if pids.exists() else 0


def _labels(doc: dict[str, object]) -> list[tuple[str, str]]:
    entries = [*doc["results"], *doc["withdrawn"]]  # type: ignore[misc]
    return [(e["label"], e["result"]["status"]) for e in entries]


def test_verify_several_configs_with_proposals_one_after_another(setup) -> None:  # type: ignore[no-untyped-def]
    """Two configs and a missing one: each readable config verified as `asap verify CONFIG --proposals` verifies it
    alone (the same targets and verdicts, its compiles its own), the missing one a located error of its own, the exit
    status 2 (the worst); a second run answers every target from the cache with each config's own document."""
    (a, b), exe, env = setup
    missing = a.parent / "missing.yml"
    r = asap(env, "verify", a, missing, b, "--proposals", "--maxtext-python", exe, "--json")
    assert r.returncode == 2, r.stderr
    doc = json.loads(r.stdout)
    assert [c["file"] for c in doc["configs"]] == [str(a), str(missing), str(b)]
    assert [c["exit_status"] for c in doc["configs"]] == [0, 2, 0] and doc["exit_status"] == 2
    gone = doc["configs"][1]
    assert "report" not in gone and gone["errors"][0]["kind"] == "read" and gone["errors"][0]["file"] == str(missing)
    assert f"cannot read {missing}" in r.stderr
    expected = fake_maxtext.DEMO_VERDICTS
    for c in (doc["configs"][0], doc["configs"][2]):
        assert set(c["report"]) == {"results", "withdrawn", "compiler_note"}
        assert _labels(c["report"]) == expected
    compiled = _compiles(exe)
    assert compiled == 2 * len(expected)  # each config's own compiles: the second config is not the first's

    # each config alone: its document is the one the several-config run printed for it (from the cache now)
    alone = [asap(env, "verify", cfg, "--proposals", "--maxtext-python", exe, "--json") for cfg in (a, b)]
    assert [x.returncode for x in alone] == [0, 0]
    again = asap(env, "verify", a, b, "--proposals", "--maxtext-python", exe, "--json")
    assert again.returncode == 0, again.stderr
    assert [c["report"] for c in json.loads(again.stdout)["configs"]] == [json.loads(x.stdout) for x in alone]
    assert _compiles(exe) == compiled  # nothing compiled again

    # the text: a section per config, each as `asap verify CONFIG --proposals` prints it
    text = asap(env, "verify", a, missing, b, "--proposals", "--maxtext-python", exe)
    assert text.returncode == 2
    sections = text.stdout.split("\n\n")
    assert [s.splitlines()[0] for s in sections] == [f"=== {a}", f"=== {missing}", f"=== {b}"]
    one = asap(env, "verify", a, "--proposals", "--maxtext-python", exe).stdout
    assert sections[0].split("\n", 1)[1] + "\n" == one
    assert sections[1].splitlines()[1].strip() == f"asap: cannot read {missing}: No such file or directory"


def test_verify_several_configs_mesh_only(setup) -> None:  # type: ignore[no-untyped-def]
    """Without --proposals: each config's own mesh, its report the verifier's document; a config ASAP cannot
    verify (not YAML) is that config's error, the others verified, the exit status the worst."""
    (a, b), exe, env = setup
    bad = a.parent / "bad.yml"
    bad.write_bytes(b"\xff\xfe not text")
    r = asap(env, "verify", a, bad, b, "--maxtext-python", exe, "--json")
    doc = json.loads(r.stdout)
    assert [c["file"] for c in doc["configs"]] == [str(a), str(bad), str(b)]
    ok = [doc["configs"][0], doc["configs"][2]]
    assert all(c["exit_status"] == 0 and c["report"]["status"] == "ok" for c in ok)
    assert all(c["report"]["program"] == "maxtext" for c in ok)
    assert doc["configs"][1]["exit_status"] == 2 and "UTF-8" in doc["configs"][1]["errors"][0]["message"]
    assert r.returncode == doc["exit_status"] == 2
    assert _compiles(exe) == 2
    # one config: the verifier's document itself, as ever
    one = json.loads(asap(env, "verify", a, "--maxtext-python", exe, "--json").stdout)
    assert one == {**ok[0]["report"], "cached": True}


def test_ctrl_c_during_a_local_verify_is_a_clean_cancel(setup) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C while a local compile runs: exit 130 with one line saying so (no traceback), the compile's process is
    killed with it, and nothing is kept: a second run compiles again."""
    import signal

    from support.ray_cluster import alive, until

    (a, _), exe, env = setup
    hold = exe.parent / "hold"
    hold.touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli.main", "verify", str(a), "--maxtext-python", str(exe)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until(lambda: _compiles(exe) >= 1 or proc.poll() is not None, "the first compile to start")
        assert proc.poll() is None, proc.communicate()
        running = [int(p) for p in (exe.parent / "pids").read_text().split()]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "asap: cancelled" in err and "Traceback" not in err
    until(lambda: not any(alive(p) for p in running), "the cancelled compile to stop")
    hold.unlink()
    again = asap(env, "verify", a, "--maxtext-python", exe, "--json")
    assert again.returncode == 0, again.stderr
    assert _compiles(exe) > len(running)


def test_ray_before_the_configs_takes_no_config_for_its_address(setup) -> None:  # type: ignore[no-untyped-def]
    """`asap verify --proposals --ray a.yml b.yml`: argparse gives `a.yml` to --ray's optional ADDRESS; ASAP gives it
    back to the configs and looks for the cluster on this machine. With no config at all: the usual usage error."""
    (a, b), exe, env = setup
    env = {**env, "RAY_ADDRESS": ""}
    r = asap(env, "verify", "--proposals", "--ray", a, b, "--maxtext-python", exe, "--json")
    errors = json.loads(r.stdout).get("errors", [])
    assert not any(str(a) in e["message"] for e in errors), errors  # not "a.yml is not HOST:PORT"
    if r.returncode != 0:  # no cluster runs here (the usual case in the tests): the cluster is what is missing
        assert r.returncode == 2 and errors[0]["message"].startswith("no Ray cluster runs on this machine"), errors
    none = asap(env, "verify", "--proposals", "--json")
    assert none.returncode == 2
    assert json.loads(none.stdout)["errors"][0]["message"] == "the following arguments are required: CONFIG.yml"
