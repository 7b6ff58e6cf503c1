"""Profiles from gs://, against a real GCS JSON-API server (gcp-storage-emulator, started here on 127.0.0.1 and
stopped by PID) holding MaxText's layout: `gs://<bucket>/<run_name>/tensorboard/plugins/profile/<ts>/*.xplane.pb`.
gcsfs finds the server through STORAGE_EMULATOR_HOST; nothing inside ASAP is replaced."""

from __future__ import annotations

import gc
import json
import os
import threading
import urllib.error
import urllib.request
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from profiles.synth import write_profile
from support.cli import run_asap
from support.gcs_server import GcsServer, free_port, gcs_server, refusing_server

from server.common.findings import Severity
from server.common.progress import Cancelled, CancelToken
from server.profiles import gcs, profile_convert, profile_link
from server.services.analysis import analyze
from server.services.profile_analysis import UNREADABLE, run

BUCKET = "team-runs"
RUN = "llama-fsdp4"
PROFILE = f"{RUN}/tensorboard/plugins/profile"
OLD, NEW = "2026_11_30_10_00_00", "2026_12_01_09_30_00"
V5E4 = "compile_topology: v5e-4\nmodel_name: llama2-7b\nper_device_batch_size: 1\nici_fsdp_parallelism: 4\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsServer]:
    tmp = tmp_path_factory.mktemp("gcs")
    with gcs_server(tmp) as srv:
        old = os.environ.get(gcs.EMULATOR_ENV)
        os.environ[gcs.EMULATOR_ENV] = srv.url
        fs = _fs()
        fs.mkdir(BUCKET)
        # the older run is a different scenario: picking it would show in the verdict
        for ts, scenario in ((OLD, "hbm"), (NEW, "compute")):
            for f in write_profile(tmp / "src" / ts, scenario, hosts=2):
                fs.put_file(str(f), f"{BUCKET}/{PROFILE}/{ts}/{f.name}")
        fs.pipe(f"{BUCKET}/{RUN}/checkpoints/0/state.json", b"{}")  # MaxText writes more than profiles
        fs.pipe(f"{BUCKET}/{PROFILE}/{NEW}/events.out.tfevents.1", b"not a profile")
        try:
            yield srv
        finally:
            if old is None:
                os.environ.pop(gcs.EMULATOR_ENV, None)
            else:
                os.environ[gcs.EMULATOR_ENV] = old


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASAP_CACHE_DIR", str(tmp_path / "cache"))
    gcs.forget_listings()
    profile_convert._MEMO.clear()


def _fs():  # type: ignore[no-untyped-def]
    from gcsfs.core import GCSFileSystem

    return GCSFileSystem(token="anon", skip_instance_cache=True, use_listings_cache=False)


def _mtimes(d: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in d.iterdir() if p.name.endswith(".xplane.pb")}


def test_newest_run_is_listed_and_only_its_profile_files_are_downloaded(server: GcsServer) -> None:
    pf = profile_convert.find_profile(f"gs://{BUCKET}/{RUN}")
    assert pf.remote is not None
    assert pf.remote.url == f"gs://{BUCKET}/{PROFILE}/{NEW}"
    assert [f.name for f in pf.files] == ["host0.xplane.pb", "host1.xplane.pb"]
    assert pf.run_dir == gcs.mirror_path(f"gs://{BUCKET}/{PROFILE}/{NEW}")
    assert str(pf.run_dir).startswith(os.environ["ASAP_CACHE_DIR"])
    assert f"gs://{BUCKET}/{PROFILE}/{NEW} (2 hosts" in pf.describe()
    assert not profile_convert.is_cached(pf)  # nothing downloaded yet

    seen: list[tuple[str, float | None]] = []
    got = gcs.download(pf.remote, lambda m, f: seen.append((m, f)))
    assert got == pf.remote.total_bytes > 0
    assert sorted(p.name for p in pf.run_dir.iterdir() if not p.name.startswith(".")) == [
        "host0.xplane.pb",
        "host1.xplane.pb",
    ]
    assert [p.stat().st_size for p in pf.files] == [o.size for o in pf.remote.objects]
    assert "file 1/2" in seen[0][0] and "file 2/2" in " ".join(m for m, _ in seen)
    assert seen[-1] == (f"downloaded 2 file(s), {got / 1e6:.0f} MB from {pf.remote.url}", 1.0)
    assert not (gcs.mirror_path(f"gs://{BUCKET}/{PROFILE}/{OLD}")).exists()
    assert not (gcs.mirror_path(f"gs://{BUCKET}/{RUN}/checkpoints")).exists()


def test_second_open_downloads_nothing_until_an_object_changes(server: GcsServer) -> None:
    url = f"gs://{BUCKET}/{RUN}"
    first = profile_convert.find_profile(url)
    assert first.remote is not None
    assert gcs.download(first.remote) > 0
    before = _mtimes(first.run_dir)

    gcs.forget_listings()  # a new listing, as a new session would make
    again = profile_convert.find_profile(url)
    assert again.remote is not None
    assert gcs.is_local(again.remote)
    assert gcs.download(again.remote) == 0
    assert _mtimes(again.run_dir) == before

    # the same object written again (new generation): only that file is fetched
    src = first.files[1].read_bytes()
    _fs().pipe(f"{BUCKET}/{PROFILE}/{NEW}/host1.xplane.pb", src)
    gcs.forget_listings()
    changed = profile_convert.find_profile(url)
    assert changed.remote is not None and not gcs.is_local(changed.remote)
    assert gcs.download(changed.remote) == len(src)
    after = _mtimes(changed.run_dir)
    assert after["host0.xplane.pb"] == before["host0.xplane.pb"]
    assert after["host1.xplane.pb"] != before["host1.xplane.pb"]
    manifest = json.loads((changed.run_dir / gcs.MANIFEST).read_text())
    assert manifest["host1.xplane.pb"]["generation"] == changed.remote.objects[1].generation


def test_base_output_directory_on_gs_is_read_through_xprof(server: GcsServer, tmp_path: Path) -> None:
    c = tmp_path / "c.yml"
    c.write_text(V5E4 + f"base_output_directory: gs://{BUCKET}/\nrun_name: {RUN}\n")
    an = analyze(c, c.read_text())
    link, findings = profile_link.resolve(an.config, tmp_path)
    assert findings == [] and link is not None
    assert link.url == f"gs://{BUCKET}/{RUN}" and link.key == "base_output_directory"

    res = run(an, tmp_path, cached_only=True)  # the editor's first look: the profile is to be downloaded
    assert res.files is not None and res.report is None
    res = run(an, tmp_path)
    assert res.report is not None and res.report.verdict.bottleneck == "compute"  # the newest run's scenario
    res = run(an, tmp_path, cached_only=True)
    assert res.report is not None and res.cached


def test_cli_profile_from_gs(server: GcsServer, tmp_path: Path) -> None:
    env = {**os.environ, "ASAP_CACHE_DIR": str(tmp_path / "cli-cache"), gcs.EMULATOR_ENV: server.url}
    out = run_asap("profile", f"gs://{BUCKET}/{RUN}", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["verdict"]["bottleneck"] == "compute"
    assert (tmp_path / "cli-cache" / "gcs" / BUCKET / PROFILE / NEW / "host0.xplane.pb").is_file()

    missing = run_asap("profile", "gs://no-such-bucket/run", env=env)
    assert missing.returncode != 0
    assert "bucket 'no-such-bucket' not found" in missing.stderr + missing.stdout


def test_missing_bucket_and_missing_path_are_specific(server: GcsServer) -> None:
    with pytest.raises(gcs.GcsError, match="bucket 'no-such-bucket' not found"):
        profile_convert.find_profile("gs://no-such-bucket/run")
    with pytest.raises(gcs.GcsError, match=rf"no profile under gs://{BUCKET}/other-run: expected \*\.xplane\.pb"):
        profile_convert.find_profile(f"gs://{BUCKET}/other-run")
    with pytest.raises(gcs.GcsError, match="no profile under"):  # a run without profiles (only checkpoints)
        profile_convert.find_profile(f"gs://{BUCKET}/{RUN}/checkpoints")


def test_a_bad_gs_link_is_a_located_warning(server: GcsServer, tmp_path: Path) -> None:
    c = tmp_path / "c.yml"
    c.write_text("# asap: profile=gs://no-such-bucket/run\n" + V5E4)
    an = analyze(c, c.read_text())
    res = run(an, tmp_path, cached_only=True)
    assert res.report is None
    (f,) = [f for f in res.findings if f.code == UNREADABLE]
    assert f.severity == Severity.WARNING
    assert "bucket 'no-such-bucket' not found" in f.message
    assert (f.file, f.span.line, f.span.column) == (c, 0, len("# asap: profile="))


def test_truncated_object_is_detected_and_not_kept(server: GcsServer) -> None:
    fs = _fs()
    key = f"{BUCKET}/cut/tensorboard/plugins/profile/{NEW}/host0.xplane.pb"
    fs.pipe(key, b"x" * 100_000)
    server.object_file(BUCKET, key.split("/", 1)[1]).write_bytes(b"x" * 1000)  # the server now holds less
    pf = profile_convert.find_profile(f"gs://{BUCKET}/cut")
    with pytest.raises(gcs.GcsError, match=r"host0\.xplane\.pb is truncated: 1000 of 100000 bytes"):
        profile_convert.load_tools(pf)
    assert not any(p.name.endswith((".xplane.pb", ".part")) for p in pf.run_dir.iterdir())


def test_download_is_cancellable_and_leaves_no_partial_file(server: GcsServer) -> None:
    pf = profile_convert.find_profile(f"gs://{BUCKET}/{RUN}")
    assert pf.remote is not None
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(Cancelled):
        profile_convert.load_tools(pf, cancel=cancel)
    assert not pf.run_dir.exists() or not any(p.name.endswith(".xplane.pb") for p in pf.run_dir.iterdir())
    assert gcs.download(pf.remote) == pf.remote.total_bytes  # and a later open starts afresh


def test_mirror_paths_round_trip() -> None:
    url = f"gs://{BUCKET}/{RUN}"
    assert gcs.url_of(gcs.mirror_path(url)) == url
    assert gcs.url_of(Path("/elsewhere")) is None
    with pytest.raises(gcs.GcsError, match=r"'\.\.' is not allowed"):
        gcs.mirror_path("gs://b/../../etc")


def test_no_credentials_says_how_to_get_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Google's endpoint, Application Default Credentials pointing at nothing: refused before any request
    monkeypatch.delenv(gcs.EMULATOR_ENV, raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent-adc.json"))
    with pytest.raises(
        gcs.GcsError, match=": no Google Cloud credentials: run 'gcloud auth application-default login'"
    ):
        profile_convert.find_profile(f"gs://{BUCKET}/{RUN}")


def test_permission_denied_names_the_principal(monkeypatch: pytest.MonkeyPatch) -> None:
    with refusing_server() as url:
        monkeypatch.setenv(gcs.EMULATOR_ENV, url)
        with pytest.raises(gcs.GcsError) as e:
            profile_convert.find_profile(f"gs://{BUCKET}/{RUN}")
    msg = str(e.value)
    assert msg.startswith(
        f"gs://{BUCKET}/{RUN}: permission denied for ci-reader@example-project.iam.gserviceaccount.com"
    )
    assert "storage.objects.list" in msg


def test_discovered_gs_run_is_followed_only_when_it_holds_a_profile(
    server: GcsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def resolve(body: str) -> tuple[profile_link.Link | None, list]:  # type: ignore[type-arg]
        c = tmp_path / "c.yml"
        c.write_text(V5E4 + body)
        gcs.forget_listings()
        return profile_link.resolve(analyze(c, c.read_text()).config, tmp_path)

    link, findings = resolve(f"base_output_directory: gs://{BUCKET}\nrun_name: no-profiles-yet\n")
    assert (link, findings) == (None, [])  # as a local run directory without profiles
    link, findings = resolve("base_output_directory: gs://no-such-bucket/runs\nrun_name: r1\n")
    assert link is None
    (hint,) = findings
    assert hint.severity == Severity.HINT and hint.key == "base_output_directory"
    assert "bucket 'no-such-bucket' not found" in hint.message and hint.span.line == 4
    # a machine without Google Cloud credentials (the examples' gs:// base_output_directory): nothing said
    monkeypatch.delenv(gcs.EMULATOR_ENV)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent-adc.json"))
    assert resolve(f"base_output_directory: gs://{BUCKET}\nrun_name: {RUN}\n") == (None, [])


def test_workspace_link_to_gs(server: GcsServer, tmp_path: Path) -> None:
    c = tmp_path / "c.yml"
    c.write_text(V5E4)
    url = f"gs://{BUCKET}/{RUN}"
    written = profile_link.write_link(tmp_path, c, url)
    assert json.loads(written.read_text())["links"] == {"c.yml": url}
    link, findings = profile_link.resolve(analyze(c, c.read_text()).config, tmp_path)
    assert findings == [] and link is not None and (link.origin, link.url) == ("workspace", url)
    pf = profile_convert.find_profile(link.path)  # the mirror directory stands for the URL
    assert pf.remote is not None and pf.remote.url == f"gs://{BUCKET}/{PROFILE}/{NEW}"


def test_an_unreachable_endpoint_fails_fast_with_what_could_not_be_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    # nothing listens on the port: refused at once, so ASAP does not wait out gcsfs's 6 retries (about 34 s)
    endpoint = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv(gcs.EMULATOR_ENV, endpoint)
    with pytest.raises(gcs.GcsError) as e:
        profile_convert.find_profile(f"gs://{BUCKET}/{RUN}")
    msg = str(e.value)
    assert msg.startswith(f"gs://{BUCKET}/{RUN}: cannot reach the storage server at {endpoint} (STORAGE_EMULATOR_HOST)")
    assert f"(tried {gcs.CONNECT_ATTEMPTS} times)" in msg  # the connector's attempts, not gcsfs's retry loop
    assert isinstance(e.value.__cause__, gcs.Unreachable)


@contextmanager
def flaky_proxy(upstream: str, failures: int) -> Iterator[tuple[str, list[int]]]:
    """An HTTP server on 127.0.0.1 in front of `upstream` that answers its first `failures` requests with 503
    (GCS's JSON error body) and forwards the others. Yields its URL and the statuses it answered, in order."""
    statuses: list[int] = []
    body503 = json.dumps({"error": {"code": 503, "message": "Backend Error", "errors": []}}).encode()

    class Proxy(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if len(statuses) < failures:
                status, headers, body = 503, {"Content-Type": "application/json"}, body503
            else:
                try:
                    with urllib.request.urlopen(upstream + self.path, timeout=30) as r:
                        status, body = r.status, r.read()
                        headers = {"Content-Type": r.headers.get("Content-Type", "application/json")}
                except urllib.error.HTTPError as err:
                    status, body = err.code, err.read()
                    headers = {"Content-Type": err.headers.get("Content-Type", "application/json")}
            statuses.append(status)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", statuses
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()


def test_a_503_from_a_reachable_server_is_still_retried(server: GcsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    with flaky_proxy(server.url, failures=1) as (url, statuses):
        monkeypatch.setenv(gcs.EMULATOR_ENV, url)
        run = gcs.find_run(f"gs://{BUCKET}/{RUN}")
    assert run.url == f"gs://{BUCKET}/{PROFILE}/{NEW}"
    assert statuses[0] == 503 and statuses[1] == 200  # the same listing asked again, answered


def test_a_remembered_listing_error_keeps_nothing_of_who_asked(server: GcsServer) -> None:
    """Issue 25: a failed listing is remembered (30 s) and its error raised again on every analysis. Kept with its
    traceback, and raised again as the same object (each raise adds the raiser's frames to it), it held every
    analysis that asked meanwhile, and all they held: the agents' worker grew about 1 MB a version."""

    class Held:  # what an analysis holds in its frames (the agents' priced meshes)
        pass

    asked: list[weakref.ref[Held]] = []

    def analyse() -> None:
        held = Held()
        asked.append(weakref.ref(held))
        with pytest.raises(gcs.GcsError, match="bucket 'no-such-bucket' not found"):
            gcs.find_run("gs://no-such-bucket/run")

    for _ in range(20):
        analyse()
    gc.collect()
    assert [r() for r in asked] == [None] * 20
    ((_, kept),) = gcs._LISTED.values()
    assert isinstance(kept, gcs.GcsError) and kept.kind == "bucket"
    assert (kept.__traceback__, kept.__cause__, kept.__context__) == (None, None, None)


def test_remembered_listings_are_the_latest_few(server: GcsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run_name typed a character at a time is a URL a keystroke: the listings remembered are bounded."""
    monkeypatch.setattr(gcs, "MAX_LISTED", 4)
    for i in range(10):
        with pytest.raises(gcs.GcsError):
            gcs.find_run(f"gs://no-such-bucket/run-{i}")
    assert list(gcs._LISTED) == [f"gs://no-such-bucket/run-{i}" for i in range(6, 10)]
