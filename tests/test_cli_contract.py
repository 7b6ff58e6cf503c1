"""The `asap` command line's contract (issue 17): exit status 0 clean, 1 findings, 2 cannot read an input or
usage, 3 internal error (one line, the traceback only with --debug); with --json one JSON document on stdout on
every exit path; `asap estimate --mesh` judges the mesh asked about; each file of `asap check A B ...` on its own.

Every test runs the real CLI in a child process. Internal errors are injected in that process (a command's
callee replaced by one that raises) rather than found by fuzzing the parser, whose crashes get fixed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import run_asap, unprivileged_prefix

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GOOD = EXAMPLES / "llama2-7b-v5e-256.yml"  # valid mesh, fits
BAD = EXAMPLES / "bad-mesh-v5e-256.yml"  # ICI product 512 on a 256-chip slice (ASAP101)

# A child that replaces `target` (a name in server/cli/commands.py) by one that raises for paths containing
# "crash" (or always, with "*"), then runs the CLI on its arguments.
INJECT = """
import sys
import server.cli.commands as commands
from server.cli.main import main

target, when = sys.argv[1], sys.argv[2]
real = getattr(commands, target)

def crash(*args, **kwargs):
    if when == "*" or any(when in str(a) for a in args):
        raise RuntimeError("injected failure\\nwith a second line")
    return real(*args, **kwargs)

setattr(commands, target, crash)
sys.exit(main(sys.argv[3:]))
"""


def asap(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_asap(*args, env=env, timeout=180)


def asap_with_fault(target: str, when: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", INJECT, target, when, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=180,
    )


def test_clean_config_exits_0():
    r = asap("check", GOOD, "--json")
    assert r.returncode == 0, r.stderr
    assert not [f for f in json.loads(r.stdout)["findings"] if f["severity"] == "error"]
    assert asap("check", GOOD).returncode == 0
    r = asap("estimate", GOOD, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["memory"]["fits"]


def test_findings_exit_1_with_json_parseable():
    r = asap("check", BAD, "--json")
    assert r.returncode == 1, r.stderr
    assert "ASAP101" in {f["code"] for f in json.loads(r.stdout)["findings"]}
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("kind", ["missing", "directory", "not-utf8"])
def test_unreadable_config_exits_2_with_errors_document(tmp_path: Path, kind: str):
    target = {"missing": tmp_path / "missing.yml", "directory": tmp_path, "not-utf8": tmp_path / "latin1.yml"}[kind]
    if kind == "not-utf8":
        target.write_bytes(b"model_name: caf\xe9\n")
    for command in ("check", "estimate", "analyze", "verify", "models --config"):
        r = asap(*command.split(), target, "--json")
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        errors = json.loads(r.stdout)["errors"]
        assert [e["kind"] for e in errors] == ["read"] and errors[0]["file"] == str(target), command
        assert r.stderr.startswith(f"asap: cannot read {target}: ") and "Traceback" not in r.stderr
        human = asap(*command.split(), target)
        assert human.returncode == 2 and human.stdout == "" and "cannot read" in human.stderr


def test_permission_denied_exits_2(tmp_path: Path):
    prefix = unprivileged_prefix()
    if prefix is None:
        pytest.skip("running as root without user namespaces: permissions cannot be denied")
    p = tmp_path / "secret.yml"
    p.write_text(GOOD.read_text())
    p.chmod(0)
    try:
        r = subprocess.run(
            [*prefix, sys.executable, "-m", "server.cli.main", "check", str(p), "--json"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=180,
        )
    finally:
        p.chmod(0o644)
    assert r.returncode == 2, r.stderr
    assert json.loads(r.stdout)["errors"][0]["message"] == f"cannot read {p}: Permission denied"


def test_usage_errors_exit_2():
    r = asap("check")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("usage: asap check") and "asap check: error: the following arguments" in r.stderr
    r = asap("check", GOOD, "--json", "--no-such-flag")
    assert r.returncode == 2
    assert json.loads(r.stdout)["errors"] == [{"kind": "usage", "message": "unrecognized arguments: --no-such-flag"}]
    r = asap("estimate", GOOD, "--mesh", "ici_fsdp_parallelism", "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["errors"][0]["kind"] == "usage"
    assert "key=value" in r.stderr
    assert asap("no-such-command").returncode == 2


def test_internal_error_exits_3_with_one_line_and_no_traceback():
    r = asap_with_fault("analyze", "*", "check", GOOD)
    assert r.returncode == 3, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert lines[0] == (
        f"asap: internal error on {GOOD}: RuntimeError: injected failure (a bug in ASAP; --debug prints the traceback)"
    )
    # a command without per-file isolation: main() catches it
    r = asap_with_fault("estimate", "*", "estimate", GOOD, "--json")
    assert r.returncode == 3 and len(r.stderr.splitlines()) == 1
    assert json.loads(r.stdout)["errors"][0]["kind"] == "internal"
    assert "RuntimeError: injected failure" in r.stderr


@pytest.mark.parametrize("where", ["before", "after"])
def test_internal_error_traceback_with_debug(where: str):
    args = ["--debug", "estimate", str(GOOD)] if where == "before" else ["estimate", str(GOOD), "--debug"]
    r = asap_with_fault("estimate", "*", *args)
    assert r.returncode == 3
    assert r.stderr.startswith("Traceback (most recent call last):")
    assert ", in crash\n" in r.stderr and "RuntimeError: injected failure\nwith a second line\n" in r.stderr
    assert r.stderr.splitlines()[-1] == "asap: internal error: RuntimeError: injected failure (a bug in ASAP)"


def test_estimate_json_on_an_invalid_mesh_prints_the_findings(write):
    r = asap("estimate", BAD, "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["file"] == str(BAD) and doc["estimate"] is None and doc["overrides"] == {}
    assert doc["mesh"]["ici"]["fsdp"] == 32 and "ASAP101" in {f["code"] for f in doc["findings"]}
    # no estimate at all (no slice declared): the cost model's reason, as a finding
    p = write("noslice.yml", "model_name: llama2-7b\nici_fsdp_parallelism: 8\n")
    r = asap("estimate", p, "--json")
    assert r.returncode == 1
    assert [f["code"] for f in json.loads(r.stdout)["findings"] if f["severity"] == "error"] == ["ASAP129"]


def test_estimate_mesh_override_is_the_mesh_judged():
    # the file's mesh is invalid, the asked one is valid: an estimate, exit 0
    r = asap("estimate", BAD, "--mesh", "ici_fsdp_parallelism=256,ici_tensor_parallelism=1", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["mesh"]["ici"]["fsdp"] == 256 and r.stderr == ""
    # the file's mesh is valid, the asked one is not: its findings, the --mesh keys named
    mesh = "ici_fsdp_parallelism=64,ici_tensor_parallelism=8"
    r = asap("estimate", GOOD, "--mesh", mesh, "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["overrides"] == {"ici_fsdp_parallelism": 64, "ici_tensor_parallelism": 8}
    assert (doc["mesh"]["ici"]["fsdp"], doc["mesh"]["ici"]["tensor"]) == (64, 8)
    f = next(f for f in doc["findings"] if f["code"] == "ASAP101")
    assert f["override"] in ("ici_fsdp_parallelism=64", "ici_tensor_parallelism=8", mesh)
    human = asap("estimate", GOOD, "--mesh", mesh)
    assert human.returncode == 1 and human.stdout == ""
    assert human.stderr.startswith(f"--mesh {f['override']}: error ASAP101: ")
    # a value of --mesh that is not a degree: named at its assignment
    r = asap("estimate", GOOD, "--mesh", "ici_fsdp_parallelism=x", "--json")
    assert r.returncode == 1
    f = next(f for f in json.loads(r.stdout)["findings"] if f["code"] == "ASAP100")
    assert f["override"] == "ici_fsdp_parallelism=x" and "got 'x'" in f["message"]


def test_each_file_of_a_check_is_on_its_own(tmp_path: Path):
    crash = tmp_path / "crash.yml"
    crash.write_text(GOOD.read_text())
    missing = tmp_path / "missing.yml"
    files = [GOOD, missing, crash, BAD]
    r = asap_with_fault("analyze", "crash", "check", *files, "--json")
    assert r.returncode == 3, r.stderr  # the worst of the files: an internal error
    docs = json.loads(r.stdout)
    assert [d["file"] for d in docs] == [str(f) for f in files]
    assert "findings" in docs[0] and not [f for f in docs[0]["findings"] if f["severity"] == "error"]
    assert docs[1]["errors"][0]["kind"] == "read" and docs[2]["errors"][0]["kind"] == "internal"
    assert "ASAP101" in {f["code"] for f in docs[3]["findings"]}
    assert r.stderr.splitlines() == [
        f"asap: cannot read {missing}: No such file or directory",
        f"asap: internal error on {crash}: RuntimeError: injected failure (a bug in ASAP; --debug prints the "
        "traceback)",
    ]
    human = asap_with_fault("analyze", "crash", "check", GOOD, crash, BAD)
    assert human.returncode == 3
    assert f"{GOOD}: 0 error(s)" in human.stdout and "error ASAP101" in human.stdout
    assert str(crash) not in human.stdout and "Traceback" not in human.stderr
    # without the crash, a file that cannot be read decides (2), then findings (1)
    assert asap("check", GOOD, missing, BAD).returncode == 2
    assert asap("check", GOOD, BAD).returncode == 1
