"""Tests need nothing beside the checkout (issue 25 item 1): a user's `git clone` then `make test` passes.

Two guards: the conftest's audit hook fails any test of this process that opens or lists a path beside the
checkout (tests/support/checkout_guard.py), and this file reads the test sources for paths that climb out of
the checkout, which also covers what subprocesses, the e2e and the Neovim scripts are handed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.support import checkout_guard

ROOT = checkout_guard.ROOT
TESTS = ROOT / "tests"
SOURCES = [p for p in TESTS.rglob("*") if p.suffix in {".py", ".ts", ".js", ".sh", ".lua", ".yml", ".yaml"}]
GUARDS = {Path(__file__).resolve(), Path(checkout_guard.__file__).resolve()}  # they name what they look for
SOURCES = [p for p in SOURCES if "node_modules" not in p.parts and p.resolve() not in GUARDS]
PARENTS = re.compile(r"Path\(__file__\)\.resolve\(\)\.parents\[(\d+)\]")
CLIMB = re.compile(r"""ROOT\.parent\b|\.\./shared\b|["']shared["']\s*/\s*["']fixtures""")


def test_no_test_source_points_beside_the_checkout() -> None:
    found = []
    for path in SOURCES:
        text = path.read_text(encoding="utf-8", errors="replace")
        depth = len(path.relative_to(ROOT).parts) - 1  # parents[depth] is the checkout's root
        for m in PARENTS.finditer(text):
            if int(m.group(1)) > depth:
                found.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in CLIMB.finditer(text)]
    assert SOURCES and not found, found


def test_the_real_xprof_fixture_is_in_the_checkout() -> None:
    fixture = TESTS / "data" / "profiles" / "xprof-real-tpu-v5-training"
    tools = {p.name.split(".")[1] for p in fixture.glob("tpu_training.*.json.gz")}
    assert tools >= {"overview_page", "hlo_stats", "roofline_model", "op_profile"}
    assert "Apache" in (fixture / "README.md").read_text()


def test_the_audit_hook_records_a_read_beside_the_checkout() -> None:
    beside = ROOT.parent.joinpath("shared", "fixtures", "probe.json")
    checkout_guard.take()
    sys.audit("open", str(beside), "r", 0)  # the event `open()` raises, without touching the file
    sys.audit("open", str(ROOT / "README.md"), "r", 0)
    sys.audit("open", str(ROOT.parent / ".cache" / "x"), "r", 0)
    sys.audit("os.listdir", str(ROOT.parent / "sibling-repo"))
    got = checkout_guard.take()
    if ROOT.parent == Path(ROOT.anchor):
        assert got == []  # a checkout at the root of the file system has nothing beside it
    else:
        assert got == [str(beside), str(ROOT.parent / "sibling-repo")]


def test_what_lies_beside_the_checkout() -> None:
    assert not checkout_guard.is_outside(ROOT / "tests" / "x.py")
    assert not checkout_guard.is_outside("/tmp/asap-x/cfg.yml") or ROOT.parent == Path("/tmp")
    assert not checkout_guard.is_outside(ROOT.parent / ".pyenv" / "lib.py")
    assert not checkout_guard.is_outside(Path(sys.prefix) / "lib" / "site.py")  # a venv beside the checkout too
    assert checkout_guard.is_outside(ROOT.parent.joinpath("shared", "DOMAIN.md")) == (ROOT.parent != Path(ROOT.anchor))
