"""Diagnostics over stdio: open, change, debounce, save, close, YAML errors, non-MaxText
YAML and UTF-16 ranges. One server for the module; every test has its own files."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types as lsp

from server.lsp import DEBOUNCE_S

from .conftest import AsapClient, Doc, by_code, codes, has, position_of, utf16_len, value_range

pytestmark = pytest.mark.asyncio(loop_scope="module")

BAD = "bad-mesh-v5e-256.yml"
CLEAN = "llama2-7b-v5e-256.yml"


def rng(line: int, start: int, end: int) -> lsp.Range:
    return lsp.Range(lsp.Position(line, start), lsp.Position(line, end))


async def test_open_publishes_codes_severities_ranges_and_version(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / BAD).open()
    diags = await doc.diagnostics(version=1)

    assert codes(diags) == ["ASAP101", "ASAP111"]
    assert all(d.source == "asap" for d in diags)
    product = by_code(diags, "ASAP101")
    assert product.severity == lsp.DiagnosticSeverity.Error
    assert product.range == rng(6, 0, len("ici_fsdp_parallelism"))
    assert "256" in product.message and "512" in product.message
    ignored = by_code(diags, "ASAP111")
    assert ignored.severity == lsp.DiagnosticSeverity.Warning
    assert ignored.range == rng(8, 0, len("ici_sequence_parallelism"))
    # the fix payload rides along, so a quick fix needs no re-analysis
    assert isinstance(product.data, dict) and product.data.get("key") == "ici_fsdp_parallelism"


async def test_open_clean_config_publishes_at_most_the_estimate(shared: AsapClient, workdir: Path):
    """A config that works has no error or warning; the estimate is an information entry on the mesh block when
    information entries are published (asap.showInformationDiagnostics; by default nothing is: test_settings.py),
    and the hover carries it either way."""
    doc = Doc(shared, workdir / CLEAN).open()
    diags = await doc.diagnostics(version=1)
    assert codes(diags) == []
    for est in diags:
        assert est.code == "ASAP120" and est.severity == lsp.DiagnosticSeverity.Information
        assert est.range.start.line == 8  # on the mesh block: the first ici_* key
        assert "MFU" in est.message and "GiB usable" in est.message
    hover = await doc.hover(8, 3)  # the mesh block's first key: its explanation and the estimate's line
    assert hover is not None and "**ASAP120**" in hover.contents.value and "MFU" in hover.contents.value


async def test_mesh_that_does_not_fit_in_hbm_is_an_error_that_clears(shared: AsapClient, workdir: Path):
    path = workdir / "v6e.yml"
    path.write_text((workdir / "llama3-8b-v6e-16.yml").read_text())
    doc = Doc(shared, path).open()
    assert codes(await doc.diagnostics(version=1)) == []
    v2 = doc.replace_all(
        doc.text.replace(
            "ici_data_parallelism: 1\nici_fsdp_parallelism: 4", "ici_data_parallelism: 4\nici_fsdp_parallelism: 1"
        )
    )
    diags = await doc.diagnostics(version=v2)
    assert set(codes(diags)) == {"ASAP121"}
    assert all(d.severity == lsp.DiagnosticSeverity.Error for d in diags if d.code == "ASAP121")
    v3 = doc.replace_all(
        doc.text.replace(
            "ici_data_parallelism: 4\nici_fsdp_parallelism: 1", "ici_data_parallelism: 1\nici_fsdp_parallelism: 4"
        )
    )
    assert codes(await doc.diagnostics(version=v3)) == []


async def test_change_incremental_republishes_for_new_version(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / BAD).open()
    await doc.diagnostics(where=has("ASAP101"))

    v2 = doc.edit([lsp.TextEdit(value_range(doc.text, "ici_fsdp_parallelism"), "16")])
    diags = await doc.diagnostics(version=v2)
    assert codes(diags) == ["ASAP111"]

    # and back, as a full-text change
    v3 = doc.replace_all(doc.text.replace("ici_fsdp_parallelism: 16", "ici_fsdp_parallelism: 32"))
    diags = await doc.diagnostics(version=v3)
    assert codes(diags) == ["ASAP101", "ASAP111"]
    assert by_code(diags, "ASAP101").range.start.line == 6


async def test_change_that_moves_lines_moves_ranges(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / BAD).open()
    await doc.diagnostics(version=1)
    v2 = doc.edit([lsp.TextEdit(rng(0, 0, 0), "# one\n# two\n# three\n")])
    diags = await doc.diagnostics(version=v2)
    assert by_code(diags, "ASAP101").range == rng(9, 0, len("ici_fsdp_parallelism"))
    assert by_code(diags, "ASAP111").range == rng(11, 0, len("ici_sequence_parallelism"))


async def test_change_burst_is_debounced_to_the_final_version(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / BAD).open()
    await doc.diagnostics(version=1)

    # Type "16" over "32" one keystroke at a time, then a few more values: every change
    # is in the pipe before the server's debounce expires.
    start = len(shared.publishes)
    values = ["3", "", "1", "16", "8", "64", "16"]
    for v in values:
        doc.replace_all(
            doc.text.replace(doc.text.splitlines()[6], f"ici_fsdp_parallelism: {v}   # tuned by hand last week")
        )
    final = doc.version
    diags = await doc.diagnostics(version=final)
    assert codes(diags) == ["ASAP111"], "16 x 16 = 256 fits the slice"

    # A barrier: save re-analyses now; everything scheduled before it has run or been cancelled.
    doc.save()
    await doc.diagnostics(version=final)

    versions = [p.version for p in shared.history(doc.uri, start)]
    assert versions == sorted(versions), f"a stale version was published after a newer one: {versions}"
    assert set(versions) == {final}, f"debounce should publish only the final version, got {versions}"
    assert codes(shared.diagnostics[doc.uri]) == ["ASAP111"]


async def test_change_burst_slower_than_debounce_never_goes_back(shared: AsapClient, workdir: Path):
    """Changes spaced around the debounce: intermediate publishes are fine, stale ones are not."""
    doc = Doc(shared, workdir / BAD).open()
    await doc.diagnostics(version=1)
    start = len(shared.publishes)
    for v in ["16", "32", "16", "32", "16"]:
        doc.replace_all(doc.text.replace(doc.text.splitlines()[6], f"ici_fsdp_parallelism: {v}"))
        # wait for the publish of *this* version only every other time: the rest overlap
        if v == "32":
            await doc.diagnostics(version=doc.version, timeout=DEBOUNCE_S + 10)
    await doc.diagnostics(version=doc.version)
    doc.save()
    diags = await doc.diagnostics(version=doc.version)
    assert codes(diags) == ["ASAP111"]
    versions = [p.version for p in shared.history(doc.uri, start)]
    assert versions == sorted(versions), versions


async def test_save_reanalyzes_and_publishes_current_version(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / BAD).open()
    await doc.diagnostics(version=1)
    v2 = doc.replace_all(doc.text.replace("ici_fsdp_parallelism: 32", "ici_fsdp_parallelism: 16"))
    await doc.diagnostics(version=v2)
    doc.save()
    diags = await doc.diagnostics(version=v2)
    assert codes(diags) == ["ASAP111"]


async def test_close_publishes_empty(shared: AsapClient, workdir: Path):
    doc = Doc(shared, workdir / BAD).open()
    assert await doc.diagnostics(version=1)
    doc.close()
    assert codes(await doc.diagnostics(version=None)) == []


async def test_close_right_after_change_wins(shared: AsapClient, workdir: Path):
    """A pending (debounced) analysis must not resurrect diagnostics after close."""
    doc = Doc(shared, workdir / BAD).open()
    await doc.diagnostics(version=1)
    start = len(shared.publishes)
    doc.replace_all(doc.text + "\n# edited\n")
    doc.close()
    await doc.diagnostics(version=None)
    # Reopen another file and wait for it: by then the cancelled refresh would have fired.
    other = Doc(shared, workdir / CLEAN).open()
    await other.diagnostics(version=1)
    after_close = shared.history(doc.uri, start)
    assert [len(p.diagnostics) for p in after_close][-1] == 0, after_close


INVALID = """\
# broken on purpose
model_name: llama2-7b
compile_topology: v5e-256
ici_fsdp_parallelism: [16, 2
ici_tensor_parallelism: 16
"""


async def test_invalid_yaml_one_diagnostic_then_fixed(shared: AsapClient, workdir: Path):
    path = workdir / "broken.yml"
    path.write_text("model_name: llama2-7b\ncompile_topology: v5e-256\nici_fsdp_parallelism: 16\n")
    doc = Doc(shared, path).open()
    await doc.diagnostics(version=1)

    # `key: value: other` is a mapping-values error the parser locates on the second colon
    v2 = doc.replace_all("model_name: llama2-7b\ncompile_topology: v5e-256: x\nici_fsdp_parallelism: 16\n")
    diags = await doc.diagnostics(version=v2)
    assert codes(diags) == ["ASAP001"], f"only the YAML error, no follow-on rule noise: {codes(diags)}"
    err = diags[0]
    assert err.severity == lsp.DiagnosticSeverity.Error and err.source == "asap"
    assert err.range.start == lsp.Position(1, len("compile_topology: v5e-256"))

    # the server is alive and answers requests on the broken text
    assert await doc.hover(0, 3) is None  # answered (nothing to explain in unparsed text), not crashed
    fixed = doc.replace_all("model_name: llama2-7b\ncompile_topology: v5e-256\nici_fsdp_parallelism: 16\n")
    diags = await doc.diagnostics(version=fixed)
    assert "ASAP001" not in codes(diags)
    hover = await doc.hover(2, 3)
    assert hover is not None and "16" in hover.contents.value


async def test_invalid_yaml_unclosed_flow_sequence(shared: AsapClient, workdir: Path):
    path = workdir / "broken2.yml"
    path.write_text(INVALID)
    doc = Doc(shared, path).open()
    diags = await doc.diagnostics(version=1)
    assert codes(diags) == ["ASAP001"], codes(diags)
    # ruamel reports the unclosed `[` where it gave up: the start of the next key or the end
    assert diags[0].range.start.line >= 3
    hover = await doc.hover(1, 2)
    assert hover is None


K8S = """\
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  labels: {app: maxtext}
spec:
  containers:
  - name: main
    image: us-docker.pkg.dev/maxtext/train:latest
    args: ["python", "train.py", "ici_fsdp_parallelism=-1"]
"""


async def test_non_maxtext_yaml_publishes_empty(shared: AsapClient, workdir: Path):
    path = workdir / "pod.yml"
    path.write_text(K8S)
    doc = Doc(shared, path).open()
    assert codes(await doc.diagnostics(version=1)) == []
    assert await doc.hover(1, 2) is None
    # and broken non-MaxText YAML stays quiet too: it is not ours to lint
    v2 = doc.replace_all(K8S.replace("kind: Pod", "kind: Pod: x"))
    assert codes(await doc.diagnostics(version=v2)) == []


UNICODE = """\
# asap: 日本語🚀 slice=v5e-999
run_name: "日本語🚀 テスト"
model_name: llama2-7b
per_device_batch_size: 4
ici_fsdp_parallelism: 32  # 🚀🚀 fsdp
ici_tensor_parallelism: 16
"""


async def test_non_ascii_ranges_are_utf16(shared: AsapClient, workdir: Path):
    path = workdir / "unicode.yml"
    path.write_text(UNICODE, encoding="utf-8")
    doc = Doc(shared, path).open()
    diags = await doc.diagnostics(version=1)
    bad_slice = by_code(diags, "ASAP005")
    line0 = UNICODE.splitlines()[0]
    start = utf16_len(line0[: line0.index("v5e-999")])
    assert start != line0.index("v5e-999"), "the test needs a surrogate pair before the name"
    assert bad_slice.range == lsp.Range(lsp.Position(0, start), lsp.Position(0, start + len("v5e-999")))

    # A declared slice that exists: the mesh is checked, ranges land on the keys.
    v2 = doc.edit([lsp.TextEdit(bad_slice.range, "v5e-256")])
    assert doc.text.splitlines()[0] == "# asap: 日本語🚀 slice=v5e-256"
    diags = await doc.diagnostics(version=v2)
    assert by_code(diags, "ASAP101").range == rng(4, 0, len("ici_fsdp_parallelism"))

    # An incremental edit after an astral character (UTF-16 positions) on the run_name line
    pos = position_of(doc.text, " テスト")
    v3 = doc.edit([lsp.TextEdit(lsp.Range(pos, pos), "🚀")])
    diags = await doc.diagnostics(version=v3)
    assert by_code(diags, "ASAP101").range == rng(4, 0, len("ici_fsdp_parallelism"))
    # the server's copy matches ours: hovering the slice name (after CJK + emoji) finds it
    name = position_of(doc.text, "v5e-256")
    hover = await doc.hover(name.line, name.character + 1)
    assert hover is not None and "v5e-256" in hover.contents.value
    assert hover.range is not None and hover.range.start == name
