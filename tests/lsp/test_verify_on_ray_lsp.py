"""ASAP: Verify with `asap.verifyCluster` set, over stdio against the real server: the compiles run as tasks on a real
local Ray cluster (tests/support/ray_cluster.py: a head node and one worker node on 127.0.0.1, stopped by PID), with
the same cancellable `$/progress` as a local verify ("n of N done"), and the verdicts come back under the keys a
local compile uses: the code lens, the quick fixes and the withdrawn proposals are what a local verify shows, each
verdict shown as its task returns (as a local verify shows it when its compile ends), and a local verify afterwards
compiles nothing. An unreachable cluster, an address that is not HOST:PORT and an unsaved
config are an error message to the user, and the server goes on answering. The compiler is tests/support/
fake_maxtext.py's stand-in for MaxText's train_compile (setting asap.maxtextPython), as in test_verify_advice.py."""

from __future__ import annotations

import os
import re
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from support import fake_maxtext
from support.ray_cluster import (
    alive,
    cmdline,
    current_mesh_compile,
    free_port,
    needs_ray,
    parent,
    ray_cluster,
    until_async,
)

from .conftest import EXAMPLES, INFORMATION, AsapClient, Doc, initialize, position_of, wait_for_log, wait_for_progress
from .test_verify_advice import lens_commands, lens_titles, messages, proposal_titles, summary, verify

EXAMPLE = EXAMPLES / "llama3-8b-v6e-16.yml"
TIMEOUT_S = 120.0  # the first task on a fresh cluster starts a worker and ships the package (5-8 s here)

pytestmark = needs_ray


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    # two logical CPUs a node: the first wave's four tasks (the current mesh and three proposals) all run at once, so
    # a test that holds some compiles never depends on the order Ray starts the others in
    with ray_cluster(cpus=2) as address:
        yield address


@pytest.fixture
def maxtext(tmp_path: Path) -> Path:
    return fake_maxtext.write(tmp_path / "maxtext-env")


async def start(client: AsapClient, tmp_path: Path, maxtext: Path, address: str) -> Doc:
    settings = {"maxtextPython": str(maxtext), "verifyCluster": address}
    await initialize(client, {"settings": settings}, configuration=False)
    cfg = tmp_path / "llama.yml"
    shutil.copy(EXAMPLE, cfg)
    doc = Doc(client, cfg).open()
    await wait_for_log(client, "agents, llama.yml (version 1): 3 proposal(s)", timeout=TIMEOUT_S)
    return doc


def pids(maxtext: Path) -> list[int]:
    f = maxtext.parent / "pids"
    return [int(p) for p in f.read_text().split()] if f.exists() else []


def only_fsdp16_runs_free(maxtext: Path) -> None:
    """The stand-in's gate changed: a proposal's compile with fsdp=16 (proposal 1, which does not fit) no longer
    waits for `release`; the other proposals' compiles still do."""
    gate = '*" ici_fsdp_parallelism="*) while [ ! -e "$here/release" ]; do sleep 0.05; done ;;'
    assert gate in maxtext.read_text()
    maxtext.write_text(maxtext.read_text().replace(gate, '*" ici_fsdp_parallelism=16 "*) ;;\n  ' + gate))


@dataclass(frozen=True)
class Shown:
    """What the editor shows of the config: its code lenses (title, tooltip), the quick fixes at the mesh block
    (title, why disabled) and the diagnostics (code, line, message)."""

    lenses: list[tuple[str, str | None]]
    fixes: list[tuple[str, str | None]]
    diagnostics: list[tuple[str, int, str]]

    @property
    def titles(self) -> list[str]:
        return [t for t, _ in self.lenses]


async def shown(client: AsapClient, doc: Doc) -> Shown:
    """What the editor shows of the config now."""
    at = position_of(doc.text, "ici_data_parallelism")
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(lsp.TextDocumentIdentifier(doc.uri), lsp.Range(at, at), lsp.CodeActionContext([]))
    )
    return Shown(
        [(c.title, c.tooltip) for c in await lens_commands(client, doc)],
        [
            (a.title, a.disabled.reason if a.disabled else None)
            for a in actions or []
            if isinstance(a, lsp.CodeAction) and a.title.startswith("Apply proposal")
        ],
        sorted((str(d.code), d.range.start.line, d.message) for d in client.diagnostics[doc.uri]),
    )


async def test_verify_on_the_cluster_shows_what_a_local_verify_shows(
    fresh: AsapClient, tmp_path: Path, maxtext: Path, cluster: str
) -> None:
    (maxtext.parent / "release").touch()
    doc = await start(fresh, tmp_path, maxtext, cluster)
    mark = await verify(fresh, doc)
    done = await wait_for_log(fresh, f"verification of llama.yml done on the Ray cluster at {cluster}", start=mark,
                              timeout=TIMEOUT_S)  # fmt: skip
    m = re.search(r": (\d+) compiled there, 0 from the cache, 0 failed in [\d.]+ s; (\d+) proposal\(s\) withdrawn",
                  done)  # fmt: skip
    assert m is not None, done
    compiled, withdrawn = int(m.group(1)), int(m.group(2))
    assert withdrawn >= 1  # fsdp=16 does not fit (39.8 of 31.25 GiB)
    assert compiled == len(pids(maxtext)) >= 4  # the current mesh, three proposals, the next candidates

    # the progress: the local verify's cancellable bar, "n of N done" from the cluster
    (token,) = [t for t, rs in fresh.progress_reports.items() if getattr(rs[0], "title", "") == "ASAP: TPU compiler"]
    rs = fresh.progress_reports[token]
    assert isinstance(rs[0], lsp.WorkDoneProgressBegin) and rs[0].cancellable
    steps = messages(rs)
    assert steps[0] == f"connecting to the Ray cluster at {cluster}", steps
    assert any(re.fullmatch(r"compiling on the Ray cluster: 0 of \d+ done", s) for s in steps), steps
    assert any(re.fullmatch(r"compiling on the Ray cluster: \d+ of \d+ done \(proposal 1\)", s) for s in steps), steps
    end = rs[-1]
    assert isinstance(end, lsp.WorkDoneProgressEnd) and end.message == "done"

    # the advice as a local verify shows it: the withdrawn count, the current mesh's verdict, the quick fixes
    line = summary(await lens_titles(fresh, doc))
    assert re.fullmatch(
        rf"ASAP: compute-bound · MFU \d+% · 3 proposals \(best ×[\d.]+, confidence \d+%\) · {withdrawn} withdrawn", line
    ), line
    (verdict,) = [c for c in await lens_commands(fresh, doc) if c.title == "TPU compiler: fits"]
    assert verdict.tooltip is not None and "15.00 GiB of 31.25 GiB" in verdict.tooltip  # MaxText's 12 + 3 GiB
    offered = await proposal_titles(fresh, doc)
    assert len(offered) == 3 and all(t.endswith(", fits (TPU compiler))") for t in offered), offered

    # kept under the local keys: reopened, the advice starts from the cache; a local verify compiles nothing
    compiled_pids = pids(maxtext)
    doc.close()
    mark = len(fresh.log_messages)
    doc = Doc(fresh, doc.path).open()
    await wait_for_log(fresh, f"agents, llama.yml (version 1): 3 proposal(s), {withdrawn} withdrawn", start=mark)
    assert summary(await lens_titles(fresh, doc)) == line
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"maxtextPython": str(maxtext), "verifyCluster": ""}})
    )
    mark = await verify(fresh, doc)
    # (the reopened advice already has its withdrawn proposals: none is withdrawn again)
    await wait_for_log(fresh, "verification of llama.yml done: 0 compile(s), 0 proposal(s) withdrawn", start=mark)
    assert pids(maxtext) == compiled_pids
    assert summary(await lens_titles(fresh, doc)) == line
    doc.close()


async def test_each_verdict_is_shown_as_its_task_returns_as_a_local_verify_shows_it(
    fresh: AsapClient, tmp_path: Path, maxtext: Path, cluster: str
) -> None:
    """The current mesh's and proposal 1's tasks return while proposals 2 and 3 still compile (held): their verdicts
    are shown at once (the current mesh's in the lens, proposal 1 marked as not fitting and counted withdrawn), as a
    local verify shows them when it reaches proposal 2; released, the sweep ends with what a local verify ends
    with. The local verify is of the same config with a stand-in of its own (its own cache keys), held alike."""
    only_fsdp16_runs_free(maxtext)
    doc = await start(fresh, tmp_path, maxtext, cluster)
    mark = await verify(fresh, doc)
    await wait_for_log(fresh, "TPU compiler, current mesh of llama.yml: verified by the TPU compiler", start=mark,
                       timeout=TIMEOUT_S)  # fmt: skip
    await wait_for_log(fresh, "TPU compiler, proposal 1 of llama.yml: does not fit", start=mark, timeout=TIMEOUT_S)
    on_ray = await shown(fresh, doc)
    # proposals 2 and 3 still compile: the sweep has not ended
    assert not any("verification of llama.yml done" in m.message for m in fresh.log_messages[mark:])
    (token,) = [t for t, rs in fresh.progress_reports.items() if getattr(rs[0], "title", "") == "ASAP: TPU compiler"]
    assert not isinstance(fresh.progress_reports[token][-1], lsp.WorkDoneProgressEnd)
    assert "TPU compiler: fits" in on_ray.titles, on_ray  # in words beside the withdrawn count
    assert summary(on_ray.titles).endswith(" · 1 withdrawn"), on_ray  # proposal 1, marked at once
    assert not any(t.endswith(", fits (TPU compiler))") for t, _ in on_ray.fixes), on_ray  # 2 and 3: not yet
    assert any(c == "ASAP400" for c, _, _ in on_ray.diagnostics), on_ray  # the current mesh's verdict

    (maxtext.parent / "release").touch()
    done = await wait_for_log(fresh, "verification of llama.yml done on the Ray cluster", start=mark,
                              timeout=TIMEOUT_S)  # fmt: skip
    assert re.search(r"; [1-9]\d* proposal\(s\) withdrawn$", done), done
    on_ray_done = await shown(fresh, doc)
    offered = [t for t, why in on_ray_done.fixes if why is None]
    assert len(offered) == 3 and all(t.endswith(", fits (TPU compiler))") for t in offered), on_ray_done

    # the same config verified here, by a stand-in of its own held alike: the same state at each point
    local = fake_maxtext.write(tmp_path / "local-env")
    only_fsdp16_runs_free(local)
    settings = {**INFORMATION, "maxtextPython": str(local), "verifyCluster": ""}
    fresh.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"asap": settings}))
    doc.close()
    mark = len(fresh.log_messages)
    doc = Doc(fresh, doc.path).open()
    await wait_for_log(fresh, "agents, llama.yml (version 1): 3 proposal(s)", start=mark, timeout=TIMEOUT_S)
    mark = await verify(fresh, doc)
    await wait_for_log(fresh, "TPU compiler, proposal 1 of llama.yml: does not fit", start=mark, timeout=TIMEOUT_S)
    assert await shown(fresh, doc) == on_ray
    (local.parent / "release").touch()
    await wait_for_log(fresh, "verification of llama.yml done: ", start=mark, timeout=TIMEOUT_S)
    assert await shown(fresh, doc) == on_ray_done
    doc.close()


async def test_cancelling_a_verify_on_the_cluster_stops_its_compiles(
    fresh: AsapClient, tmp_path: Path, maxtext: Path, cluster: str
) -> None:
    (maxtext.parent / "hold").touch()  # every compile waits
    doc = await start(fresh, tmp_path, maxtext, cluster)
    before = summary(await lens_titles(fresh, doc))
    mark = await verify(fresh, doc)
    token = await wait_for_progress(
        fresh, lambda _t, rs: any(m.startswith("compiling on the Ray cluster: 0 of") for m in messages(rs))
    )
    await until_async(lambda: len(pids(maxtext)) >= 1, "a compile running on the cluster")
    running = pids(maxtext)
    fresh.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    await wait_for_log(fresh, "verification of llama.yml cancelled: the advice is unchanged", start=mark,
                       timeout=TIMEOUT_S)  # fmt: skip
    end = fresh.progress_reports[token][-1]
    assert isinstance(end, lsp.WorkDoneProgressEnd) and end.message == "cancelled"
    await until_async(lambda: not any(alive(p) for p in running), "the cancelled compiles to stop")
    (maxtext.parent / "hold").unlink()
    titles = await lens_titles(fresh, doc)
    assert summary(titles) == before and "Verify" in titles  # nothing withdrawn, nothing kept: Verify again
    doc.close()


async def test_an_unreachable_cluster_is_an_error_message_and_the_server_goes_on(
    fresh: AsapClient, tmp_path: Path, maxtext: Path
) -> None:
    port = free_port()  # bound and closed: nothing listens there
    address = f"127.0.0.1:{port}"
    doc = await start(fresh, tmp_path, maxtext, address)
    mark = await verify(fresh, doc)
    await wait_for_log(fresh, "verification of llama.yml not run: cannot reach the Ray cluster", start=mark)
    (shown,) = [m for m in fresh.messages if m.type == lsp.MessageType.Error]
    assert shown.message == (
        f"ASAP: Verify on the Ray cluster: cannot reach the Ray cluster at {address} (Connection refused): "
        "is `ray start --head` running there?"
    )
    assert "Traceback" not in "\n".join(m.message for m in fresh.log_messages)
    assert not pids(maxtext)  # nothing compiled locally in its place
    titles = await lens_titles(fresh, doc)  # the server answers; Verify is offered again
    assert "Verify" in titles

    # an address that is not HOST:PORT is named as the setting's
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"maxtextPython": str(maxtext), "verifyCluster": "head"}})
    )
    mark = await verify(fresh, doc)
    await wait_for_log(fresh, "verification of llama.yml not run", start=mark)
    assert fresh.messages[-1].message == (
        "ASAP: Verify on the Ray cluster: asap.verifyCluster is 'head': expected HOST:PORT (the head node's GCS "
        "port, 6379 by default)"
    )

    # the cluster compiles the saved file: an unsaved edit is refused, with what to do
    fresh.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(settings={"asap": {"maxtextPython": str(maxtext), "verifyCluster": address}})
    )
    doc.replace_all(doc.text + "\n# edited\n")
    mark = await verify(fresh, doc)
    await wait_for_log(fresh, "verification of llama.yml not run", start=mark)
    assert fresh.messages[-1].message == (
        "ASAP: Verify on the Ray cluster: the cluster compiles the saved file: save llama.yml first"
    )
    assert not pids(maxtext)
    doc.close()


async def test_a_compile_whose_worker_dies_twice_shows_the_clusters_reason(
    fresh: AsapClient, tmp_path: Path, maxtext: Path, cluster: str
) -> None:
    """The Ray worker running the current mesh's compile is killed, and again on the task's one retry: the editor
    shows that target's verdict as an error naming the Ray task; the proposals' verdicts come back."""
    hold_all = 'while [ -e "$here/hold" ]; do sleep 0.05; done'
    hold_current = 'case " $* " in *" ici_fsdp_parallelism="*) ;; *) ' + hold_all + " ;; esac"
    assert hold_all in maxtext.read_text()
    maxtext.write_text(maxtext.read_text().replace(hold_all, hold_current))  # only the current mesh's compile waits
    (maxtext.parent / "release").touch()
    (maxtext.parent / "hold").touch()
    doc = await start(fresh, tmp_path, maxtext, cluster)
    mark = await verify(fresh, doc)
    await until_async(lambda: current_mesh_compile(pids(maxtext)), "the current mesh's compile on the cluster")
    first = current_mesh_compile(pids(maxtext))
    assert first is not None
    args = cmdline(first)
    os.kill(parent(first), signal.SIGKILL)

    def retried() -> int | None:
        return next((p for p in pids(maxtext) if p != first and alive(p) and cmdline(p) == args), None)

    await until_async(lambda: retried() is not None, "the killed compile's retry")
    again = retried()
    assert again is not None
    os.kill(parent(again), signal.SIGKILL)
    (maxtext.parent / "hold").unlink()
    done = await wait_for_log(fresh, "verification of llama.yml done on the Ray cluster", start=mark, timeout=TIMEOUT_S)
    assert ", 1 failed in " in done, done
    logged = await wait_for_log(fresh, "TPU compiler, current mesh of llama.yml: ", start=mark)
    assert logged.startswith(
        "TPU compiler, current mesh of llama.yml: on the Ray cluster: the Ray task failed after one retry"
    ), logged
    (verdict,) = [c for c in await lens_commands(fresh, doc) if c.title.startswith("TPU compiler: ")]
    assert verdict.tooltip is not None
    assert verdict.tooltip.startswith("on the Ray cluster: the Ray task failed after one retry"), verdict.tooltip
    doc.close()
