"""The server never blocks on an analysis (issue 17, item 3): analyses run off the event loop, requests answer
from what is ready, and a document over the size limit gets one diagnostic and no analysis.

Synchronised on the protocol only: the order of responses and publishDiagnostics, never sleeps or clocks. A
60 KB config takes about a second to analyse, a hover a few milliseconds: the requests on a small config while
it is analysed must come back before its diagnostics do.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types as lsp

from .conftest import ESTIMATE, AsapClient, Doc, by_code

pytestmark = pytest.mark.asyncio(loop_scope="module")

CLEAN = "llama2-7b-v5e-256.yml"  # ici_fsdp_parallelism: -1 on line 8, the mesh block's first key
FSDP_LINE = 8
ANALYSING = "ASAP: analysing"


def sixty_kb(workdir: Path) -> Path:
    """The clean example with 2,500 more keys: about 65 KB, valid, analysed in about a second."""
    path = workdir / "sixty-kb.yml"
    text = (workdir / CLEAN).read_text()
    path.write_text(text + "".join(f"extra_key_{i}: value_{i}\n" for i in range(2500)))
    return path


def one_mb_list(workdir: Path) -> Path:
    """A 1 MB flow list on one line (over the byte limit, under the line limit)."""
    path = workdir / "one-mb.yml"
    items = ", ".join(str(i) for i in range(150_000))
    path.write_text((workdir / CLEAN).read_text() + f"big_list: [{items}]\n")
    assert path.stat().st_size > 1_000_000
    return path


def many_keys(workdir: Path) -> Path:
    """50,000 short keys: about 480 KB (under the byte limit), over the line limit."""
    path = workdir / "many-keys.yml"
    path.write_text((workdir / CLEAN).read_text() + "".join(f"k{i}: 1\n" for i in range(50_000)))
    assert path.stat().st_size < 512 * 1024
    return path


def misspelt_keys(workdir: Path) -> Path:
    """About 2,250 misspelt parallelism keys (each its own ASAP113 warning) in 60 KB: under the limits."""
    path = workdir / "misspelt.yml"
    keys = "".join(f"ici_fsdp_paralelism{i}: 1\n" for i in range(2250))
    path.write_text((workdir / CLEAN).read_text() + keys + "dcn_data_parallelism: 2\n")  # an error, last
    return path


def alias_bomb(workdir: Path) -> Path:
    """The clean example, its fsdp degree wrong (a fix to offer), with an alias bomb used as a value: l0 a list of
    ten values, each next key a list of ten aliases of the one before, l5 a million values in 300 bytes."""
    bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 6)
    )
    path = workdir / "alias-bomb.yml"
    text = (workdir / CLEAN).read_text().replace("ici_fsdp_parallelism: -1", "ici_fsdp_parallelism: 8")
    path.write_text(bomb + text + "sweep: *l5\n")
    return path


async def lens_titles(client: AsapClient, doc: Doc) -> list[lsp.CodeLens]:
    return await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(doc.uri))) or []


def titles(lenses: list[lsp.CodeLens]) -> list[str]:
    return [lens.command.title for lens in lenses if lens.command]


async def test_requests_on_a_small_config_answer_while_large_ones_are_analysed(shared: AsapClient, workdir: Path):
    small = Doc(shared, workdir / CLEAN).open()
    diags = await small.diagnostics(version=1)
    estimate = by_code(diags, ESTIMATE)

    huge = Doc(shared, one_mb_list(workdir)).open()
    big = Doc(shared, sixty_kb(workdir)).open()
    # What an editor asks on opening them, answered from what is ready: nothing yet, and no analysis on the loop.
    hover = await big.hover(FSDP_LINE, 2)
    assert hover is not None and hover.contents.value.startswith(ANALYSING), hover
    assert await lens_titles(shared, big) == []  # no analysis yet: no row to keep
    assert await huge.hover(FSDP_LINE, 2) is None  # over the limit: never analysed, nothing to say there
    assert await lens_titles(shared, huge) == []
    assert await huge.code_actions([]) == []

    # The small config answers in full meanwhile, from its own analysis.
    hover = await small.hover(FSDP_LINE, 2)
    assert hover is not None and "Degree: **256**" in hover.contents.value
    first = titles(await lens_titles(shared, small))[0]
    assert first.startswith("ASAP: ") and "MFU " in first
    actions = await small.code_actions([estimate])
    assert isinstance(actions, list)
    assert shared.history(big.uri) == [], "the requests waited for the 60 KB config's analysis"

    # The large configs: the one over the limit gets exactly one diagnostic, the other its analysis.
    (only,) = await huge.diagnostics(version=1)
    assert only.code == "ASAP007" and only.severity == lsp.DiagnosticSeverity.Warning
    assert only.range.start == lsp.Position(0, 0) and "KiB" in only.message
    big_diags = await big.diagnostics(version=1)
    assert by_code(big_diags, ESTIMATE)
    assert all(len(p.diagnostics) == 1 for p in shared.history(huge.uri))
    # and a code action on the 60 KB config answers (from its analysis, now ready)
    assert isinstance(await big.code_actions(big_diags), list)
    for doc in (small, huge, big):
        doc.close()


async def test_over_the_line_limit_one_diagnostic_and_its_explanation(shared: AsapClient, workdir: Path):
    doc = Doc(shared, many_keys(workdir)).open()
    (only,) = await doc.diagnostics(version=1)
    assert only.code == "ASAP007" and "50,0" in only.message and "lines" in only.message
    hover = await doc.hover(0, 1)  # the diagnostic, on the first line, explained from the catalog
    assert hover is not None and "**ASAP007**" in hover.contents.value
    assert await doc.hover(FSDP_LINE, 2) is None  # no analysis: nothing about the keys
    assert await lens_titles(shared, doc) == []

    # an edit that brings it under the limit is analysed as usual
    v2 = doc.replace_all((workdir / CLEAN).read_text())
    diags = await doc.diagnostics(version=v2)
    assert by_code(diags, ESTIMATE) and all(d.code != "ASAP007" for d in diags)
    doc.close()


async def test_hover_analysing_then_full_after_the_versions_diagnostics(shared: AsapClient, workdir: Path):
    big = Doc(shared, sixty_kb(workdir)).open()
    hover = await big.hover(FSDP_LINE, 2)
    assert hover is not None and hover.contents.value.startswith(ANALYSING)
    assert await big.hover(0, 3) is None  # a comment line: nothing to say, analysed or not
    await big.diagnostics(version=1)
    hover = await big.hover(FSDP_LINE, 2)
    assert hover is not None and "Degree: **256**" in hover.contents.value
    lenses = await lens_titles(shared, big)
    assert titles(lenses)[0].startswith("ASAP: ") and "MFU " in titles(lenses)[0]
    row = lenses[0].range.start.line

    # an edit: version 1's answers are never served for version 2
    v2 = big.replace_all(big.text.replace("ici_fsdp_parallelism: -1", "ici_fsdp_parallelism: 32"))
    hover = await big.hover(FSDP_LINE, 2)
    assert hover is not None and hover.contents.value.startswith(ANALYSING), hover
    lenses = await lens_titles(shared, big)  # the row stays where it was, saying so
    assert titles(lenses) == ["ASAP: analysing…", "Analyze"] and {lens.range.start.line for lens in lenses} == {row}
    diags = await big.diagnostics(version=v2)
    product = by_code(diags, "ASAP101")
    hover = await big.hover(FSDP_LINE, 2)
    assert hover is not None and "Degree: **32**" in hover.contents.value
    assert await big.code_actions([product]), "the fix of the current diagnostic is offered"
    big.close()


async def test_rapid_edits_of_a_large_config_publish_only_the_latest(shared: AsapClient, workdir: Path):
    """Edits arriving while a version is analysed: one analysis at a time, and the last version's findings win."""
    big = Doc(shared, sixty_kb(workdir)).open()
    base, mark = big.text, len(shared.publishes)
    for degree in (16, 32, 64, 8):
        final = big.replace_all(base.replace("ici_fsdp_parallelism: -1", f"ici_fsdp_parallelism: {degree}"))
    big.mark = mark
    product = by_code(await big.diagnostics(version=final), "ASAP101")
    assert "8" in product.message
    versions = [p.version for p in shared.history(big.uri, mark)]
    assert versions == sorted(versions), f"an older version published after a newer one: {versions}"
    hover = await big.hover(FSDP_LINE, 2)
    assert hover is not None and "Degree: **8**" in hover.contents.value
    big.close()


async def test_at_most_a_thousand_diagnostics_errors_first(shared: AsapClient, workdir: Path):
    doc = Doc(shared, misspelt_keys(workdir)).open()
    diags = await doc.diagnostics(version=1)
    assert len(diags) == 1000
    error = by_code(diags, "ASAP105")  # DCN parallelism on one slice, on the last line
    assert error.range.start.line == 2260 and error.severity == lsp.DiagnosticSeverity.Error
    warnings = [d for d in diags if d is not error]
    assert all(d.code == "ASAP113" for d in warnings)
    lines = [d.range.start.line for d in warnings]
    assert lines == list(range(10, 1009)), "then in document order from the first misspelt key"
    hover = await doc.hover(2000, 3)  # a finding past the thousandth is still explained
    assert hover is not None and "ASAP113" in hover.contents.value
    doc.close()


async def test_alias_bomb_one_diagnostic_and_nothing_expanded(shared: AsapClient, workdir: Path):
    """Issue 25: a code action on a config with an alias bomb waited 14-34 s while the fix vetting expanded the
    million values. The document gets one ASAP008 at the key where the aliases cross the bound, and every request
    answers from it without expanding anything: no fix, no analysis of the keys, the finding explained."""
    doc = Doc(shared, alias_bomb(workdir)).open()
    fsdp = 6 + FSDP_LINE  # the six bomb lines come first
    (only,) = await doc.diagnostics(version=1)
    assert only.code == "ASAP008" and only.severity == lsp.DiagnosticSeverity.Error
    assert only.range.start == lsp.Position(2, 0) and "l2" in only.message and "*l1" in only.message
    assert await doc.code_actions([only]) == []
    line = lsp.Range(lsp.Position(fsdp, 0), lsp.Position(fsdp, 0))
    actions = await shared.text_document_code_action_async(
        lsp.CodeActionParams(lsp.TextDocumentIdentifier(doc.uri), line, lsp.CodeActionContext(diagnostics=[]))
    )
    assert not actions  # no analysis, so no ICI product finding and no fix to vet
    hover = await doc.hover(2, 1)  # the diagnostic, explained from the catalog
    assert hover is not None and "**ASAP008**" in hover.contents.value and "'x'" not in hover.contents.value
    assert await doc.hover(fsdp, 2) is None  # nothing about the keys
    assert await lens_titles(shared, doc) == []

    # without the bomb the document is analysed as usual, and the fix of its finding offered
    v2 = doc.replace_all("".join(doc.text.splitlines(keepends=True)[6:]).replace("sweep: *l5\n", ""))
    product = by_code(await doc.diagnostics(version=v2), "ASAP101")
    assert await doc.code_actions([product])
    doc.close()
