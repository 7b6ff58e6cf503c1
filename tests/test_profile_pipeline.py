"""Profiles through the real XProf conversion: synthetic TPU profiles with known ground truth
(tests/profiles/synth.py), real CPU profiles of a sharded train step (tests/data/profiles/cpu),
bad input, the cache, linking, cancellation and the memory cap."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from profiles.synth import ground_truth, write_profile

from server.common import store
from server.common.findings import Severity
from server.common.progress import Cancelled, CancelToken
from server.profiles import profile as prof
from server.profiles import profile_convert, profile_link
from server.profiles.profile import ProfileError
from server.services.analysis import analyze
from server.services.profile_analysis import analyze_tools, run

CPU = Path(__file__).parent / "data" / "profiles" / "cpu"


@pytest.fixture
def db(tmp_path: Path):
    profile_convert._MEMO.clear()
    return store.connect(tmp_path / "cache.sqlite")


def listing(d: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(d)), p.stat().st_size) for p in d.rglob("*"))


def config(tmp_path: Path, body: str, name: str = "c.yml") -> Path:
    p = tmp_path / name
    p.write_text(body)
    return p


V5E4 = "compile_topology: v5e-4\nmodel_name: llama2-7b\nper_device_batch_size: 1\nici_fsdp_parallelism: 4\n"


def report_for(run_dir: Path, db, cfg_text: str | None = None, tmp: Path | None = None) -> prof.Report:
    pf = profile_convert.find_profile(run_dir)
    tools, _ = profile_convert.load_tools(pf, db=db)
    an = None
    if cfg_text is not None and tmp is not None:
        c = config(tmp, cfg_text)
        an = analyze(c, c.read_text())
    report, _ = analyze_tools(tools, an, pf.describe())
    return report


# -- verdicts on profiles with known ground truth ------------------------------------------------------
@pytest.mark.parametrize(
    ("scenario", "bottleneck", "rule"),
    [
        ("compute", "compute", "largest share of the step"),
        ("hbm", "hbm", "largest share of the step"),
        ("comm", "communication", "collectives >= 30% of the step"),
        ("idle", "host", "device idle (not input) >= 20% of the step"),
    ],
)
def test_verdicts_match_ground_truth(tmp_path: Path, db, scenario: str, bottleneck: str, rule: str) -> None:
    write_profile(tmp_path / "run", scenario)
    truth = ground_truth(scenario)
    r = report_for(tmp_path / "run", db)
    v = r.verdict
    assert (v.bottleneck, v.rule) == (bottleneck, rule)
    assert v.confidence >= 0.6
    # the evidence is the ground truth's numbers, not a label
    assert v.shares["communication"] == pytest.approx(truth.collective_fraction_of_device_time, abs=0.01)
    assert v.shares["host"] == pytest.approx(truth.idle_fraction, abs=0.01)
    busy = 1 - truth.idle_fraction
    assert v.shares["compute"] == pytest.approx(truth.compute_bound_fraction_of_op_time * busy, abs=0.01)
    assert r.kpis.steps is not None and r.kpis.steps.n == truth.steps
    assert r.kpis.steps.median_ms == pytest.approx(truth.step_time_ms_mean, rel=0.01)
    assert f"collectives {v.shares['communication']:.0%}" in v.evidence[0]


def test_comm_profile_collectives_by_kind_and_mesh_axis(tmp_path: Path, db) -> None:
    write_profile(tmp_path / "run", "comm")
    r = report_for(tmp_path / "run", db, V5E4, tmp_path)
    c = r.collectives
    truth = ground_truth("comm")
    assert c.share == pytest.approx(truth.collective_fraction_of_device_time, abs=0.01)
    assert {"all-gather", "reduce-scatter", "all-reduce", "all-reduce-scatter"} <= set(c.by_kind)
    # every replica-group syntax in the profile maps onto the config's 4-device fsdp axis
    assert set(c.by_axis) == {"fsdp"}
    assert sum(g.fraction for g in c.by_axis.values()) <= c.share + 1e-9
    assert all(g.payload_bytes > 0 for k, g in c.by_kind.items() if k != "all-reduce-scatter")
    assert any("fsdp" in e for e in r.verdict.evidence)


def test_implausible_custom_calls_are_flagged(tmp_path: Path, db) -> None:
    write_profile(tmp_path / "run", "implausible")
    r = report_for(tmp_path / "run", db)
    truth = ground_truth("implausible")
    assert sorted(o.name for o in r.implausible_ops) == sorted(truth.implausible_ops)
    assert all(o.category == "custom-call" and o.flop_utilization is None for o in r.implausible_ops)
    assert all((o.claimed_efficiency or 0) > 1 for o in r.implausible_ops)
    assert r.verdict.shares["unattributed"] > 0
    assert any("not believed" in e for e in r.verdict.evidence)


def test_no_step_markers_lowers_confidence_and_says_so(tmp_path: Path, db) -> None:
    write_profile(tmp_path / "a", "no_steps")
    write_profile(tmp_path / "b", "compute")
    without, with_steps = report_for(tmp_path / "a", db), report_for(tmp_path / "b", db)
    assert without.kpis.steps is None
    assert without.verdict.bottleneck == "compute"
    assert without.verdict.confidence < with_steps.verdict.confidence
    assert any("no step markers" in w for w in without.warnings)


def test_multi_host_profiles_are_read_together(tmp_path: Path, db) -> None:
    files = write_profile(tmp_path / "run", "hbm", hosts=2, step_jitter=0.2, seed=3)
    pf = profile_convert.find_profile(files[1])  # any one host's file brings the whole run
    assert [f.name for f in pf.files] == ["host0.xplane.pb", "host1.xplane.pb"]
    r = report_for(tmp_path / "run", db)
    assert r.verdict.bottleneck == "hbm"
    assert r.kpis.steps is not None and r.kpis.steps.cv > 0.01  # jitter shows up as step-time noise


def test_other_generation_is_a_located_warning(tmp_path: Path, db) -> None:
    write_profile(tmp_path / "run", "compute")  # TPU v5 lite
    c = config(tmp_path, "compile_topology: v6e-4\nmodel_name: llama2-7b\nper_device_batch_size: 1\n")
    an = analyze(c, c.read_text())
    tools, _ = profile_convert.load_tools(profile_convert.find_profile(tmp_path / "run"), db=db)
    _, findings = analyze_tools(tools, an, "run")
    (w,) = [f for f in findings if "TPU v5 lite" in f.message]
    assert w.severity == Severity.WARNING and w.key == "compile_topology" and w.span.line == 0


# -- real CPU profiles ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mesh", "keys", "axes"),
    [
        ("data8", "ici_data_parallelism: 8\nici_fsdp_parallelism: 1\n", {"data"}),
        ("fsdp8", "ici_fsdp_parallelism: 8\n", {"fsdp"}),
        ("fsdp4_tensor2", "ici_fsdp_parallelism: 4\nici_tensor_parallelism: 2\n", {"fsdp", "tensor"}),
    ],
)
def test_cpu_profiles_fall_back_to_the_host_trace(tmp_path: Path, db, mesh: str, keys: str, axes: set[str]) -> None:
    meta = json.loads((CPU / mesh / "mesh.json").read_text())
    text = f"compile_topology: v5e-8\nmodel_name: llama2-7b\nper_device_batch_size: 1\n{keys}"
    r = report_for(CPU / mesh, db, text, tmp_path)
    assert any("CPU only" in w for w in r.warnings)
    assert r.kpis.mxu_utilization is None
    assert r.kpis.steps is not None and r.kpis.steps.n == meta["steps"]
    assert set(r.collectives.by_axis) == axes
    assert r.verdict.confidence <= 0.5  # CPU times say little about a TPU run
    assert r.comparison is None  # another device: no comparison with the TPU estimate


# -- bad input -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "expect"),
    [(b"", r"is empty \(0 bytes\)"), (b"\x0a\xff\xff\xff\x0f garbage", "not a readable XSpace"), (None, "truncated")],
)
def test_broken_files_give_a_clear_message_naming_the_file(
    tmp_path: Path, db, content: bytes | None, expect: str
) -> None:
    run_dir = tmp_path / "run"
    if content is None:
        (f,) = write_profile(tmp_path / "good", "compute")
        content = f.read_bytes()[: f.stat().st_size // 3]
    run_dir.mkdir()
    (run_dir / "h.xplane.pb").write_bytes(content)
    with pytest.raises(ProfileError, match=expect) as e:
        profile_convert.load_tools(profile_convert.find_profile(run_dir), db=db)
    assert str(run_dir / "h.xplane.pb") in str(e.value)


def test_missing_and_empty_paths(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="does not exist"):
        profile_convert.find_profile(tmp_path / "nope")
    with pytest.raises(ProfileError, match="no profiles in"):
        profile_convert.find_profile(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ProfileError, match="neither an XProf profile"):
        profile_convert.find_profile(tmp_path / "notes.txt")


def test_memory_cap_is_enforced_with_a_clear_message(tmp_path: Path) -> None:
    write_profile(tmp_path / "run", "compute")
    pf = profile_convert.find_profile(tmp_path / "run")
    with pytest.raises(ProfileError, match="ran out of its memory limit \\(60 MiB; set ASAP_PROFILE_MAX_MEMORY"):
        profile_convert.convert(pf, max_memory=60 << 20)


def test_cancel_kills_the_conversion_and_caches_nothing(tmp_path: Path, db) -> None:
    write_profile(tmp_path / "run", "compute")
    pf = profile_convert.find_profile(tmp_path / "run")
    token = CancelToken()
    seen: list[str] = []

    def progress(msg: str, frac: float | None) -> None:
        seen.append(msg)
        token.cancel()  # cancel as soon as the child reports it started

    with pytest.raises(Cancelled):
        profile_convert.load_tools(pf, progress, token, db=db)
    assert seen and seen[0].startswith("reading 1 file")
    assert not profile_convert.is_cached(pf, db=db)


# -- conversion hygiene and the cache ------------------------------------------------------------------
def test_conversion_never_writes_into_the_profile_directory_and_is_cached(tmp_path: Path, db) -> None:
    write_profile(tmp_path / "run", "comm", hosts=2)
    before = listing(tmp_path / "run")
    pf = profile_convert.find_profile(tmp_path / "run")
    tools, cached = profile_convert.load_tools(pf, db=db)
    assert not cached and {"overview_page", "hlo_stats", "roofline_model"} <= set(tools)
    assert listing(tmp_path / "run") == before
    profile_convert._MEMO.clear()  # a restarted editor: only the sqlite store remains
    again, cached = profile_convert.load_tools(pf, db=db)
    assert cached and again == tools
    # the same content elsewhere is the same profile; changed content is not
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    assert profile_convert.load_tools(profile_convert.find_profile(tmp_path / "copy"), db=db)[1]
    write_profile(tmp_path / "copy", "hbm", hosts=2)
    assert not profile_convert.is_cached(profile_convert.find_profile(tmp_path / "copy"), db=db)


# -- linking -------------------------------------------------------------------------------------------
def test_comment_link_relative_to_the_config(tmp_path: Path, db) -> None:
    write_profile(tmp_path / "runs" / "r1", "hbm")
    (tmp_path / "cfg").mkdir()
    c = config(tmp_path / "cfg", "# asap: profile=../runs/r1\n" + V5E4, "x.yml")
    an = analyze(c, c.read_text())
    res = run(an, tmp_path)
    assert res.link is not None and res.link.origin == "comment"
    assert res.report is not None and res.report.verdict.bottleneck == "hbm"
    (summary,) = [f for f in res.findings if f.code == "ASAP200"]
    assert summary.span.line == 0 and summary.severity == Severity.INFORMATION
    assert "hbm-bound" in summary.message


def test_missing_link_is_a_warning_at_the_path(tmp_path: Path) -> None:
    c = config(tmp_path, "compile_topology: v5e-4\n# asap: profile=nowhere/run\nmodel_name: llama2-7b\n")
    res = run(analyze(c, c.read_text()), tmp_path)
    (w,) = res.findings
    assert w.code == "ASAP201" and w.severity == Severity.WARNING
    line = c.read_text().splitlines()[1]
    assert (w.span.line, w.span.column, w.span.end_column) == (1, line.index("nowhere"), len(line))


def test_workspace_link_file_round_trip(tmp_path: Path) -> None:
    write_profile(tmp_path / "runs" / "r1", "compute")
    c = config(tmp_path, V5E4)
    written = profile_link.write_link(tmp_path, c, tmp_path / "runs" / "r1")
    assert json.loads(written.read_text()) == {"version": 1, "links": {"c.yml": "runs/r1"}}
    res = run(analyze(c, c.read_text()), tmp_path)
    assert res.link is not None and res.link.origin == "workspace"
    assert res.report is not None and res.report.verdict.bottleneck == "compute"
    profile_link.write_link(tmp_path, c, None)
    assert profile_link.read_links(tmp_path) == {}


def test_maxtext_run_dir_newest_timestamp_inside_the_workspace_only(tmp_path: Path) -> None:
    base = tmp_path / "out" / "r1" / "tensorboard" / "plugins" / "profile"
    write_profile(base / "2026_01_01_00_00_00", "compute")
    write_profile(base / "2026_02_01_00_00_00", "hbm")
    text = f"base_output_directory: {tmp_path / 'out'}\nrun_name: r1\n" + V5E4
    c = config(tmp_path, text)
    res = run(analyze(c, c.read_text()), tmp_path)
    assert res.link is not None and res.link.origin == "maxtext"
    assert res.files is not None and res.files.run_dir.name == "2026_02_01_00_00_00"
    assert res.report is not None and res.report.verdict.bottleneck == "hbm"
    assert any(f.code == "ASAP200" and f.key == "base_output_directory" for f in res.findings)
    # the same run seen from a workspace that does not contain it: a hint, not a read
    other = tmp_path / "elsewhere"
    other.mkdir()
    c2 = config(other, text)
    res2 = run(analyze(c2, c2.read_text()), other)
    assert res2.link is None and [f.code for f in res2.findings] == ["ASAP204"]


def test_cache_dir_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path / "c"))
    assert store.cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()


def test_hover_on_the_link_line_shows_the_report(tmp_path: Path) -> None:
    from server.presentation import explain

    write_profile(tmp_path / "run", "comm")
    c = config(tmp_path, "# asap: profile=run\n" + V5E4)
    res = run(analyze(c, c.read_text()), tmp_path)
    found = explain.profile_hover(res, 0, 5)
    assert found is not None
    md, span = found
    assert span.line == 0 and md.startswith("**Profile: communication-bound**")
    assert "| op | category |" in md and "By mesh axis: fsdp" in md
    assert explain.profile_hover(res, 1, 0) is None  # only on the link's line


def test_unwritable_cache_still_analyses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("ASAP_CACHE_DIR", str(blocker / "cache"))  # cannot be created
    profile_convert._MEMO.clear()
    write_profile(tmp_path / "run", "hbm", seed=11)
    pf = profile_convert.find_profile(tmp_path / "run")
    tools, cached = profile_convert.load_tools(pf)
    assert not cached and "hlo_stats" in tools
    assert profile_convert.load_tools(pf)[1]  # kept in memory for this process


def test_profile_search_paths_find_a_local_copy_of_a_remote_run(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    write_profile(mirror / "r1" / "tensorboard" / "plugins" / "profile" / "2026_03_01_00_00_00", "comm", seed=21)
    ws = tmp_path / "ws"
    ws.mkdir()
    c = config(ws, "base_output_directory: gs://my-bucket/runs\nrun_name: r1\n" + V5E4)
    an = analyze(c, c.read_text())
    assert run(an, ws).link is None  # gs:// is not local and nothing is listed
    res = run(an, ws, search_paths=[mirror])
    assert res.link is not None and res.link.origin == "search_path" and res.link.key == "run_name"
    assert res.report is not None and res.report.verdict.bottleneck == "communication"
    (summary,) = [f for f in res.findings if f.code == "ASAP200"]
    assert summary.span.line == 1  # at run_name
