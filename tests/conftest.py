from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.support import checkout_guard

# ASAP's cache (converted profiles, the knowledge index) goes to a directory of this test session,
# never the user's cache; servers started by the tests inherit it.
_CACHE = tempfile.mkdtemp(prefix="asap-test-cache-")
os.environ["ASAP_CACHE_DIR"] = _CACHE


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_CACHE, ignore_errors=True)


# `make test` runs pytest on several processes (pytest-xdist's `-n 3`, scheduled as below); each has its
# own ASAP_CACHE_DIR above, and every server a test starts takes a free port and a temporary directory. A test file
# runs whole on one process, so a module-scoped fixture (an LSP server, a PostgreSQL or GCS server shared by the
# file's tests) starts once, as in a serial run; the files that start a Ray cluster run on one process, one after
# another, since `ray start --head` also takes fixed ports (the Ray client server's 10001, the dashboard agent's
# 52365) that two clusters cannot share. (xdist's own `--dist loadgroup` cannot do this under pytest 9.2: it renames
# the tests through an attribute pytest no longer reads.)
RAY_FILES = {
    "tests/test_ray_sweep.py",
    "tests/test_cli_verify_several.py",
    "tests/lsp/test_verify_on_ray_lsp.py",
    "tests/lsp/test_ray_head_lost_lsp.py",
}

# Started first, so that no process is left with one of them at the end (each took 50-170 s on one of 3 processes of
# a 2-core machine; the others run in order of their number of tests, most first).
SLOW_FIRST = [
    "ray",
    "tests/test_stores_heal.py",
    "tests/test_placement_jax.py",
    "tests/test_verify.py",
    "tests/test_fuzz.py",
    "tests/test_cli_contract.py",
]


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: pytest without it runs the tests serially
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getoption("dist") != "load":  # `-n N` alone; an explicit other --dist is xdist's
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "ray" if path in RAY_FILES else path

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the first assignment: the queue is complete
                for scope in reversed(SLOW_FIRST):
                    if scope in self.workqueue:
                        self.workqueue.move_to_end(scope, last=False)
                self.ordered = True
            super()._assign_work_unit(node)

    return FileScheduling(config, log)


ROOT = Path(__file__).resolve().parent.parent
checkout_guard.install()


@pytest.fixture(autouse=True)
def _reads_stay_in_the_checkout():
    """A test that reads a file beside the checkout (a sibling folder or repository) fails: a clone has none."""
    checkout_guard.take()
    yield
    if read := checkout_guard.take():
        pytest.fail(f"the test read outside the checkout, which a user's clone does not have: {read[:5]}")


EXAMPLES = ROOT / "examples"


@pytest.fixture
def write(tmp_path: Path):
    """Write a config file under tmp_path and return its path."""

    def _write(name: str, text: str) -> Path:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        return p

    return _write
