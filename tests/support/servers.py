"""What a test does when a server it needs (PostgreSQL, Ray, the GCS emulator) cannot be started here.

`make test` (and so CI) sets ASAP_REQUIRE_SERVERS=1 after installing what they need: a missing server is then a
failure with its reason, never a silent skip. Run by hand without them (pytest alone), such tests are skipped with
the reason.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

ENV = "ASAP_REQUIRE_SERVERS"


def required() -> bool:
    return os.environ.get(ENV) == "1"


def unavailable(reason: str) -> NoReturn:
    """Skip the test with `reason`, or fail it when the servers are required (ASAP_REQUIRE_SERVERS=1)."""
    if required():
        pytest.fail(f"{reason} ({ENV}=1: `make test` installs what the tests need)", pytrace=False)
    pytest.skip(reason)
