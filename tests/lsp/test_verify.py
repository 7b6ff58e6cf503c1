"""The TPU compiler in the editor: "Verify" (code lens, command) compiles the current mesh in the background
with progress ("compiling 1/1: current mesh · ... · 12 s in"); the verdict is a diagnostic on the mesh block (ASAP400
fits, ASAP401 does not), the code lens in place of Verify, and a column of the agents' proposals table; an edit marks
it stale. Needs libtpu (the compile extra). With proposals: tests/lsp/test_verify_advice.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from support.configs import OVERSIZED, SMALL

from server.compile.verify import libtpu_available

from .conftest import AsapClient, Doc, initialize, wait_for_log, wait_for_progress

pytestmark = [
    pytest.mark.tpu,
    pytest.mark.skipif(not libtpu_available(), reason="needs libtpu: pip install '.[compile]'"),
]
COMPILE_S = 180.0  # a tiny model's compiles take 5-25 s each on two cores; bounded generously


def codes_of(diags: list[lsp.Diagnostic]) -> set[str]:
    return {str(d.code) for d in diags}


async def lenses(client: AsapClient, doc: Doc) -> list[str]:
    res = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(doc.uri)))
    return [lens.command.title for lens in res or [] if lens.command]


async def run_verify(client: AsapClient, doc: Doc) -> None:
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="asap.server.verify", arguments=[doc.uri])
    )


# the compiler's verdicts are information entries too: shown here (a healthy file keeps them out of Problems)
SHOWN = {"settings": {"showInformationDiagnostics": True}}


async def test_verify_from_the_code_lens_then_stale_after_an_edit(fresh: AsapClient, tmp_path: Path):
    await initialize(fresh, SHOWN, configuration=False)
    cfg = tmp_path / "small.yml"
    cfg.write_text(SMALL.replace("ici_fsdp_parallelism: -1", "ici_fsdp_parallelism: 16"))
    doc = Doc(fresh, cfg).open()
    await doc.diagnostics(version=1)
    titles = await lenses(fresh, doc)
    assert "Verify" in titles and not any(t.startswith("TPU compiler") for t in titles)

    mark = len(fresh.publishes)
    await run_verify(fresh, doc)
    token = await wait_for_progress(
        fresh, lambda _t, reports: any(getattr(r, "title", "") == "ASAP: TPU compiler" for r in reports)
    )
    doc.mark = mark
    diags = await doc.diagnostics(version=1, where=lambda ds: "ASAP400" in codes_of(ds), timeout=COMPILE_S)
    (ok,) = [d for d in diags if d.code == "ASAP400"]
    assert ok.severity == lsp.DiagnosticSeverity.Information and ok.range.start.line == 10  # the mesh key
    assert ok.message.startswith("Verified by the TPU compiler: ") and "per chip, fits" in ok.message
    # the compiled program's step, simulated on the slice (issue 27), in the diagnostic and the code lens
    assert re.search(r"; TPU compiler's schedule: step [\d.]+ m?s, MFU [\d.]+%$", ok.message), ok.message
    assert any(
        t.startswith("TPU compiler: fits, ") and "GiB; schedule " in t and ", MFU " in t
        for t in await lenses(fresh, doc)
    )
    await wait_for_log(fresh, "TPU compiler, current mesh of small.yml: verified by the TPU compiler")
    reports = [r for r in fresh.progress_reports[token] if isinstance(r, lsp.WorkDoneProgressReport)]
    steps = [r.message for r in reports if r.message]
    assert steps[0].startswith("compiling 1/") and ": current mesh" in steps[0], steps  # the current mesh first
    assert all(re.search(r" · \d+ s in$", m) for m in steps), steps  # each step with the time the verification has run

    v2 = doc.replace_all(doc.text.replace("per_device_batch_size: 1", "per_device_batch_size: 2"))
    stale = [d for d in await doc.diagnostics(version=v2) if d.code == "ASAP400"]
    assert stale and stale[0].message.startswith("[stale")
    assert not any(t.startswith("TPU compiler") for t in await lenses(fresh, doc))
    doc.close()


async def test_verify_reports_a_mesh_that_does_not_fit_as_an_error(fresh: AsapClient, tmp_path: Path):
    await initialize(fresh, SHOWN, configuration=False)
    cfg = tmp_path / "big.yml"
    cfg.write_text(OVERSIZED)
    doc = Doc(fresh, cfg).open()
    await doc.diagnostics(version=1)
    mark = len(fresh.publishes)
    await run_verify(fresh, doc)
    doc.mark = mark
    diags = await doc.diagnostics(version=1, where=lambda ds: "ASAP401" in codes_of(ds), timeout=COMPILE_S)
    (err,) = [d for d in diags if d.code == "ASAP401"]
    assert err.severity == lsp.DiagnosticSeverity.Error
    assert (
        err.message.startswith("TPU compiler: does not fit: needs ")
        and "of 15.75 GiB per chip on v5e-16" in err.message
    )
    doc.close()
