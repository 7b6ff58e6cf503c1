"""`asap verify --proposals --ray` (server/compile/ray_sweep.py, server/presentation/ray_verification.py) on a real
local Ray cluster started here (a head node and one worker node, one CPU each, on 127.0.0.1; stopped by PID). The
compiler is tests/support/fake_maxtext.py's stand-in for MaxText's train_compile (instant, and held while a file
`hold` exists, so a test decides when a compile may finish and can kill the Ray worker running it); one test runs the
reference program's real compile (libtpu) through a Ray task."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import fake_maxtext
from support.configs import SMALL
from support.ray_cluster import alive, cmdline, current_mesh_compile, free_port, needs_ray, parent, ray_cluster, until

from server.common import store
from server.compile import ray_sweep
from server.compile import verify as verify_mod
from server.perf.layout import Layout

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama3-8b-v6e-16.yml"
pytestmark = needs_ray


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A head node and one worker node (one CPU each) on 127.0.0.1; its address."""
    with ray_cluster() as address:
        yield address


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "ASAP_CACHE_DIR": str(cache), "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(ROOT)}


def _verify(cfg: Path | list[Path], exe: Path, cache: Path, *extra: str) -> subprocess.Popen[str]:
    configs = [str(c) for c in (cfg if isinstance(cfg, list) else [cfg])]
    cmd = [sys.executable, "-m", "server.cli.main", "verify", *configs, "--proposals", "--maxtext-python", str(exe)]
    return subprocess.Popen(
        [*cmd, "--json", *extra],
        cwd=ROOT,
        env=_env(cache),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _pids(exe: Path) -> list[int]:
    f = exe.parent / "pids"
    return [int(x) for x in f.read_text().split()] if f.exists() else []


# The stand-in's `hold` holding only the config's own mesh (a compile without mesh keys on its command line)
HOLD_ALL = 'while [ -e "$here/hold" ]; do sleep 0.05; done'
HOLD_CURRENT = 'case " $* " in *" ici_fsdp_parallelism="*) ;; *) ' + HOLD_ALL + " ;; esac"


def _setup(tmp_path: Path, hold_current_only: bool = False) -> tuple[Path, Path, Path]:
    exe = fake_maxtext.write(tmp_path / "maxtext-env")  # its own path is its version: compiles cached apart
    if hold_current_only:
        assert HOLD_ALL in exe.read_text()
        exe.write_text(exe.read_text().replace(HOLD_ALL, HOLD_CURRENT))
    (exe.parent / "release").touch()  # the proposals are not held apart from the rest
    cfg = tmp_path / "llama.yml"
    cfg.write_text(EXAMPLE.read_text())
    return exe, cfg, tmp_path / "cache"


def _statuses(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["label"], e["result"]["status"]) for e in [*doc["results"], *doc["withdrawn"]]]


def test_sweep_survives_a_killed_worker_and_answers_as_a_local_compile(cluster: str, tmp_path: Path) -> None:
    """The current mesh, the three proposals and the two next candidates for the one the compiler withdraws, each a
    Ray task; the worker running the first compile is killed (SIGKILL) mid-compile and its task runs again (one
    retry): every verdict comes back, each compile ran once more than the killed one, and a local verify afterwards
    answers every target from the cache the sweep filled (compiles nothing) with the same JSON."""
    exe, cfg, cache = _setup(tmp_path)
    hold = exe.parent / "hold"
    hold.touch()
    sweep = _verify(cfg, exe, cache, "--ray", cluster)
    until(lambda: _pids(exe) or sweep.poll() is not None, "the first compile on the cluster")
    assert sweep.poll() is None, sweep.communicate()
    first = _pids(exe)[0]
    worker = parent(first)
    assert "ray" in cmdline(worker).lower() or "default_worker" in cmdline(worker), cmdline(worker)
    os.kill(worker, signal.SIGKILL)
    hold.unlink()
    out, err = sweep.communicate(timeout=120)
    assert sweep.returncode == 0, err
    doc = json.loads(out)
    assert _statuses(doc) == fake_maxtext.DEMO_VERDICTS
    ran = _pids(exe)
    assert len(ran) == 6 + 1  # six targets, and the killed one's retry

    local = _verify(cfg, exe, cache)
    out_local, err_local = local.communicate(timeout=120)
    assert local.returncode == 0, err_local
    assert _pids(exe) == ran  # nothing compiled locally: each target's result was kept under the local key
    assert json.loads(out_local) == doc


def test_several_configs_are_one_sweep(cluster: str, tmp_path: Path) -> None:
    """Three configs on the cluster: every (config, mesh) is a task of one sweep, so the second config's current mesh
    compiles while the first's is still held (config after config, it would wait for it); the third, a copy of the
    first, is the same compiles, run once; each config's document is the one a local verify of it then prints from
    the cache, compiling nothing."""
    exe, cfg, cache = _setup(tmp_path, hold_current_only=True)
    second = tmp_path / "second.yml"
    second.write_text(cfg.read_text() + "# another config: its compiles are its own\n")
    copy = tmp_path / "copy.yml"
    copy.write_text(cfg.read_text())
    hold = exe.parent / "hold"
    hold.touch()
    sweep = _verify([cfg, second, copy], exe, cache, "--ray", cluster)

    def held() -> set[str]:  # the configs whose current mesh (no mesh key on the command line) is compiling now
        running = [cmdline(p) for p in _pids(exe) if alive(p)]
        return {str(c) for c in (cfg, second) for line in running if f" {c} " in line and "_parallelism=" not in line}

    until(lambda: held() == {str(cfg), str(second)} or sweep.poll() is not None, "both current meshes at once")
    assert sweep.poll() is None, sweep.communicate()
    hold.unlink()
    out, err = sweep.communicate(timeout=120)
    assert sweep.returncode == 0, err
    doc = json.loads(out)
    assert [c["file"] for c in doc["configs"]] == [str(cfg), str(second), str(copy)] and doc["exit_status"] == 0
    assert doc["configs"][2]["report"] == doc["configs"][0]["report"]
    for c in doc["configs"]:
        assert c["exit_status"] == 0
        assert [label for label, _ in _statuses(c["report"])] == [
            "current mesh",
            "proposal 1",
            "proposal 2",
            "proposal 3",
            "proposal 1",
            "next candidate (fsdp=16; per_device_batch_size=4)",
        ]
    ran = _pids(exe)
    assert len(ran) == 2 * 6  # the copy's compiles are the first config's
    local = _verify([cfg, second, copy], exe, cache)
    out_local, err_local = local.communicate(timeout=120)
    assert local.returncode == 0, err_local
    assert _pids(exe) == ran
    assert json.loads(out_local) == doc


def test_ctrl_c_cancels_the_cluster_tasks_and_keeps_nothing(cluster: str, tmp_path: Path) -> None:
    """Ctrl-C while two compiles run on the cluster: the CLI exits 130, the running compiles' processes are killed
    (the tasks were cancelled, not left running), and nothing was kept: a local verify afterwards compiles every
    target itself."""
    exe, cfg, cache = _setup(tmp_path)
    hold = exe.parent / "hold"
    hold.touch()
    sweep = _verify(cfg, exe, cache, "--ray", cluster)
    until(lambda: len(_pids(exe)) >= 2 or sweep.poll() is not None, "two compiles on the cluster")
    assert sweep.poll() is None, sweep.communicate()
    running = _pids(exe)
    sweep.send_signal(signal.SIGINT)
    _, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, err
    assert "cancelled" in err
    until(lambda: not any(alive(p) for p in running), "the cancelled compiles to stop")
    hold.unlink()
    assert _kept(cache) == 0


def _kept(cache: Path) -> int:
    import sqlite3

    for db in cache.glob("*.db"):
        con = sqlite3.connect(db)
        try:
            tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
            if "verifications" in tables:
                return int(con.execute("select count(*) from verifications").fetchone()[0])
        finally:
            con.close()
    return 0


def test_a_task_whose_worker_dies_twice_is_reported(cluster: str, tmp_path: Path) -> None:
    """The same compile's worker killed on its first run and on its retry: that target is reported as failed on the
    cluster (an error naming the Ray task), the others come back, and the CLI exits 2 (the compiler failed)."""
    exe, cfg, cache = _setup(tmp_path, hold_current_only=True)
    hold = exe.parent / "hold"
    hold.touch()
    sweep = _verify(cfg, exe, cache, "--ray", cluster)

    def current() -> int | None:  # held; the proposals' compiles may be done already
        return current_mesh_compile(_pids(exe))

    until(lambda: current() is not None or sweep.poll() is not None, "the current mesh's compile on the cluster")
    first = current()
    assert first is not None, sweep.communicate()
    args = cmdline(first)
    os.kill(parent(first), signal.SIGKILL)

    def retried() -> int | None:
        for p in _pids(exe):
            if p != first and alive(p) and cmdline(p) == args:
                return p
        return None

    until(
        lambda: retried() is not None or sweep.poll() is not None,
        "the killed compile's retry",
        lambda: f"{args!r}; ran: {[(p, alive(p) and cmdline(p)) for p in _pids(exe)]}",
    )
    again = retried()
    assert again is not None, sweep.communicate()
    os.kill(parent(again), signal.SIGKILL)
    hold.unlink()
    out, err = sweep.communicate(timeout=120)
    assert sweep.returncode == 2, err
    doc = json.loads(out)
    failed = [e for e in [*doc["results"], *doc["withdrawn"]] if e["result"]["status"] == "error"]
    assert len(failed) == 1
    assert "Ray task failed after one retry" in failed[0]["result"]["message"]


@pytest.mark.skipif(not verify_mod.libtpu_available(), reason="needs libtpu (pip install '.[compile]')")
def test_reference_compile_on_ray_is_kept_under_the_local_key(cluster: str, tmp_path: Path) -> None:
    """ASAP's reference program compiled in a Ray task (libtpu, the 20M-parameter SMALL config): kept in the store
    under the key a local verify computes (it answers from the cache), with the figures a local compile gives."""
    cfg = tmp_path / "small.yml"
    cfg.write_text(SMALL)
    db = store.connect(tmp_path / "asap.db")
    unit = ray_sweep.plan(cfg, "current mesh", {}, None, verify_mod.DEFAULT_MAX_LAYERS, 600, None)
    assert unit is not None and unit.kind == "reference"
    sweep = ray_sweep.SweepReport()
    with ray_sweep.connected(cluster) as ray:
        ray_sweep.run_units(ray, [unit], db, sweep)
    assert sweep.compiled == 1 and not sweep.failed and not sweep.mismatched
    kept = verify_mod.verify(cfg, db=db, cached_only=True)
    assert kept.cached and kept.status == verify_mod.VerifyStatus.OK and kept.compiled is not None
    local = verify_mod.verify(cfg, db=db, use_cache=False)
    assert local.compiled is not None and not local.cached
    a, b = kept.compiled, local.compiled
    assert (a.memory_per_chip_bytes, a.components, a.collectives, a.fits) == (
        b.memory_per_chip_bytes,
        b.components,
        b.collectives,
        b.fits,
    )
    # the compiled step simulated in the task as locally (issue 27; the wall time it took aside)
    assert a.schedule is not None and b.schedule is not None
    assert {k: v for k, v in a.schedule.items() if k != "simulate_s"} == {
        k: v for k, v in b.schedule.items() if k != "simulate_s"
    }


def test_a_maxtext_unit_carries_the_mesh_on_the_slice_for_the_simulation(tmp_path: Path) -> None:
    """A MaxText compile planned for the cluster takes the checked mesh's layout along, so the task simulates the
    compiled step as a local verify does (issue 27): the config's degrees on its slice."""
    exe, cfg, _ = _setup(tmp_path)
    overrides = {"ici_fsdp_parallelism": 16, "ici_tensor_parallelism": 1}
    unit = ray_sweep.plan(cfg, "proposal 1", overrides, None, 4, 600, str(exe))
    assert unit is not None and unit.kind == "maxtext"
    lay = unit.args[-1]
    assert isinstance(lay, Layout) and lay.slice.name == "v6e-16"
    assert (lay.degree("fsdp"), lay.degree("tensor")) == (16, 1)
    current = ray_sweep.plan(cfg, "current mesh", {}, None, 4, 600, str(exe))
    assert current is not None and (current.args[-1].degree("fsdp"), current.args[-1].degree("tensor")) == (4, 4)


def test_an_unreachable_cluster_is_a_clear_error_at_once(tmp_path: Path) -> None:
    """Nothing listening at --ray's address: `asap verify` says so and exits 2 (Ray's own connect retries for
    minutes); an address that is not HOST:PORT is named."""
    exe, cfg, cache = _setup(tmp_path)
    port = free_port()  # bound and closed: nothing listens there
    proc = _verify(cfg, exe, cache, "--ray", f"127.0.0.1:{port}")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert json.loads(out)["errors"][0]["message"].startswith(f"cannot reach the Ray cluster at 127.0.0.1:{port}")
    assert not _pids(exe)  # nothing compiled locally instead
    proc = _verify(cfg, exe, cache, "--ray", "headnode")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "--ray headnode: expected HOST:PORT" in json.loads(out)["errors"][0]["message"]
