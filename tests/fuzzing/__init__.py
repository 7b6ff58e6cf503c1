"""Fuzzing ASAP with hostile configs (issue 17 item 6): the mutations (`mutations.py`), the checks of the command
line functions on one config (`cli.py`), a session with the real language server over stdio (`lsp_session.py`),
the client's own model of a document it checks the server against (`textmodel.py`), and hypothesis strategies
(`strategies.py`). Shared by the bounded property tests (tests/test_fuzz.py, tests/lsp/test_fuzz_server.py) and
the long runs of bench/fuzz.py; the tests import it as `fuzzing`, the bench as `tests.fuzzing`, so its modules
import each other relatively."""
