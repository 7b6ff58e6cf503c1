"""A bounded fuzz of the language server over stdio (issue 17 item 6): a few dozen hostile configs, built by
hypothesis with issue 17's mutations (tests/fuzzing/mutations.py), through one real server, as an editor sends
them (tests/fuzzing/lsp_session.py). Every request is answered, none with an error; the server logs no error and
prints no traceback; every diagnostic lies in the document; every offered quick fix applies to the text it was
made for, leaves a file that parses with its keys and comments (an independent reading, not the server's), and
clears its diagnostic; incremental edits leave the server with the client's text (its diagnostics and hovers
equal those of the same text opened fresh). Derandomized; bench/fuzz.py runs the long version.

The server runs in an event loop of its own thread, so each hypothesis example is a plain call into it.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from fuzzing import lsp_session
from fuzzing.mutations import Case
from fuzzing.strategies import cases, every_mutation, explicit_cases
from hypothesis import HealthCheck, Phase, given, settings

from .conftest import TIMEOUT_S

T = TypeVar("T")
CASE_S = 120.0  # one case: open, requests, a few fixes and edits (each change waits out the debounce)


class ServerThread:
    """A session with one real server, driven from an event loop in another thread."""

    def __init__(self, workdir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fuzz-server", daemon=True)
        self.thread.start()
        self.tally = lsp_session.Tally()
        self.session = self.call(lsp_session.start(self.tally, workdir, seed=0, request_s=TIMEOUT_S), TIMEOUT_S * 2)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = CASE_S) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        try:
            self.call(self.session.client.close(), TIMEOUT_S * 2)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    s = ServerThread(tmp_path_factory.mktemp("fuzz-server"))
    yield s
    s.close()


# No shrinking: each step would be another round trip through the server. A failure's message has the case's
# mutations and bytes; bench/fuzz.py writes reproducers.
@settings(
    derandomize=True,
    max_examples=24,  # and one explicit example per mutation
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(case=cases(max_mutations=3))
@every_mutation
def test_fuzz_server_answers_and_its_fixes_keep_the_file(server: ServerThread, case: Case):
    rng = random.Random(case.data)  # where the hovers and edits go: the case's own
    problems = server.call(server.session.run(case, fixes=2, edits=3, hovers=2, rng=rng))
    assert not problems, f"{case.describe()}\nbytes: {case.data[:400]!r}\n" + "\n".join(
        f"-- {p.kind}: {p.detail[-3000:]}" for p in problems
    )


def test_fuzz_server_session_did_its_work(server: ServerThread):
    """The property test above checked something: cases ran, fixes were applied, edits were sent, requests were
    timed. (It runs after that test, on the same server; selected alone, it runs the explicit cases first.)"""
    t = server.tally
    if t.cases == 0:
        for case in explicit_cases():
            server.call(server.session.run(case, fixes=2, edits=3, hovers=2, rng=random.Random(case.data)))
    assert t.cases >= len(explicit_cases()) and t.edits >= t.cases and t.fixes >= 3, (t.cases, t.edits, t.fixes)
    assert {"hover", "codeAction", "codeLens", "publish"} <= set(t.latency)
    assert t.key_hovers["per_device_batch_size"] >= 1, t.key_hovers  # the batch_size mutation's key, hovered
