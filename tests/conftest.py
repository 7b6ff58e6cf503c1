from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support import checkout_guard

# ASAP's cache (converted profiles, the knowledge index) goes to a directory of this test session,
# never the user's cache; servers started by the tests inherit it.
_CACHE = tempfile.mkdtemp(prefix="asap-test-cache-")
os.environ["ASAP_CACHE_DIR"] = _CACHE


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_CACHE, ignore_errors=True)


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
