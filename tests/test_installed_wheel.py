"""The wheel as a user installs it (issue 29 item 1): built from the package's files, installed into a fresh venv
outside the checkout, and run from a temporary directory: `asap check`, `estimate`, `analyze` citing the shipped
knowledge notes, `kb search`, `profile` on the XProf fixture, and `python -m server` answering `initialize`.

Offline and fast: the wheel is built without build isolation (setuptools from the project venv, the dev extra) and
installed without its dependencies, which the new venv reads from the project venv's site-packages through a .pth
file (a path line there adds that directory only: the editable install's own .pth, which puts the checkout on the
path, is not read). A test checks the wheel's declared requirements are met there and that `server` is imported
from the new venv, never from the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "profiles" / "xprof-real-tpu-v5-training"
TIMEOUT = 120


@dataclass(frozen=True)
class Installed:
    python: Path  # the new venv's interpreter
    asap: Path  # its console script
    purelib: Path  # its site-packages, where the wheel went
    work: Path  # the directory every command runs in (copies of the examples and the fixture)
    env: dict[str, str]

    def run(self, *args: str | Path, expect: int = 0) -> subprocess.CompletedProcess[str]:
        p = subprocess.run(
            [str(a) for a in args], cwd=self.work, env=self.env, capture_output=True, text=True, timeout=TIMEOUT
        )
        assert p.returncode == expect, f"{args}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
        return p

    def json(self, *args: str | Path) -> dict:
        return json.loads(self.run(self.asap, *args).stdout)

    @property
    def content(self) -> Path:
        return self.purelib / "server" / "kb" / "content"


def _run(cmd: list[str | Path]) -> None:
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, f"{cmd}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    # The sources the build reads, copied: setuptools writes build/ and *.egg-info beside them, which must not land in
    # the checkout. server/kb/content stays the symlink to kb/ it is in git; the wheel gets the files.
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "kb", src / "kb")
    shutil.copytree(ROOT / "server", src / "server", symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    dist = base / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w", dist, f"{src}{os.sep}"])
    (wheel,) = dist.glob("asap-*.whl")

    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    out = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], capture_output=True, text=True
    )
    purelib = Path(out.stdout.strip())
    deps = dict.fromkeys(sysconfig.get_path(k) for k in ("purelib", "platlib"))  # the project venv's, in order
    (purelib / "_asap_test_dependencies.pth").write_text("".join(f"{d}\n" for d in deps), encoding="utf-8")
    _run([*pip, "--python", python, "install", "-q", "--no-deps", "--no-index", wheel])

    work = base / "work"
    shutil.copytree(ROOT / "examples", work)
    shutil.copytree(FIXTURE, work / "profile")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ASAP_", "ANTHROPIC_")) and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    }
    env["ASAP_CACHE_DIR"] = str(base / "cache")  # the knowledge index and the caches start empty
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return Installed(python, venv / "bin" / "asap", purelib, work, env)


def _under(path: str | Path, root: Path) -> bool:
    return Path(path).resolve().is_relative_to(root.resolve())


def test_the_server_is_the_wheels_with_its_requirements_met(installed: Installed) -> None:
    probe = """
import json, os, sys
from importlib.metadata import PackageNotFoundError, requires, version
from packaging.requirements import Requirement
import server
from server.kb.store import kb_dir
unmet = []
for text in requires("asap") or []:
    req = Requirement(text)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    try:
        found = version(req.name)
    except PackageNotFoundError:
        unmet.append(text)
        continue
    if not req.specifier.contains(found, prereleases=True):
        unmet.append(f"{text} (found {found})")
homes = [p for p in sys.path if os.path.isfile(os.path.join(p or ".", "server", "__init__.py"))]
print(json.dumps({"server": server.__file__, "kb": str(kb_dir()), "homes": homes, "unmet": unmet}))
"""
    got = json.loads(installed.run(installed.python, "-c", probe).stdout)
    assert _under(got["server"], installed.purelib), got["server"]
    # the only `server` package on the path is the wheel's: the checkout's is not importable (the project venv's
    # site-packages holds the editable install's .pth, which only a site directory reads)
    assert [Path(p).resolve() for p in got["homes"]] == [installed.purelib.resolve()], got["homes"]
    assert got["unmet"] == []
    assert Path(got["kb"]) == installed.content.resolve()
    shipped = sorted(p.relative_to(ROOT / "kb").as_posix() for p in (ROOT / "kb").rglob("*") if p.is_file())
    assert shipped == sorted(
        p.relative_to(installed.content).as_posix() for p in installed.content.rglob("*") if p.is_file()
    )
    assert not installed.content.is_symlink()  # the files themselves, not the checkout's link


def test_check_and_estimate(installed: Installed) -> None:
    good = installed.json("check", "llama2-7b-v5e-256.yml", "--json")
    assert (
        good["is_maxtext_config"] and good["findings"] and not [f for f in good["findings"] if f["severity"] == "error"]
    )
    bad = json.loads(installed.run(installed.asap, "check", "bad-mesh-v5e-256.yml", "--json", expect=1).stdout)
    assert any(f["severity"] == "error" for f in bad["findings"])
    # the installed estimate is the checkout's (the catalogs and tables it reads are the package data)
    est = installed.json("estimate", "llama2-7b-v5e-256.yml", "--json")
    here = subprocess.run(
        [sys.executable, "-m", "server.cli.main", "estimate", "llama2-7b-v5e-256.yml", "--json"],
        cwd=installed.work,
        env={**installed.env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert est == json.loads(here.stdout)
    assert 0 < est["mfu"] < 1 and est["memory"]["fits"]


def test_analyze_cites_the_shipped_knowledge(installed: Installed) -> None:
    doc = installed.json("analyze", "llama3-8b-v6e-16.yml", "--json")
    assert not any("knowledge store" in n for n in doc["notes"]), doc["notes"]
    assert doc["proposals"]
    for p in doc["proposals"]:
        assert p["references"], p
        for ref in p["references"]:
            rel = ref.partition("#")[0]
            assert rel.startswith("kb/") and (installed.content / rel.removeprefix("kb/")).is_file(), ref


def test_kb_search_and_stats(installed: Installed) -> None:
    found = installed.json("kb", "search", "pipeline bubble", "--k", "3", "--json")
    assert found["results"]
    for r in found["results"]:
        assert (installed.content / r["source"]).is_file(), r["source"]
    assert any(r["source"] == "docs/pipeline-bubbles.md" for r in found["results"])
    stats = installed.json("kb", "stats", "--json")
    assert Path(stats["kb_dir"]).resolve() == installed.content.resolve()
    assert stats["documents"] == len(list((ROOT / "kb" / "docs").glob("*.md")))
    assert stats["records"] == len(list((ROOT / "kb" / "history").glob("*.yaml")))


def test_profile_of_the_xprof_fixture(installed: Installed) -> None:
    doc = installed.json("profile", "profile", "--json")
    kpis = doc["kpis"]
    # the fixture's README: a TPU v5p training run, 8 cores on one host, 5 steps
    assert (kpis["device_type"], kpis["generation"], kpis["cores"], kpis["hosts"]) == ("TPU v5", "v5p", 8, 1)
    assert kpis["steps"]["count"] == 5


def _frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _messages(stream: bytes) -> list[dict]:
    out = []
    while stream:
        head, _, rest = stream.partition(b"\r\n\r\n")
        length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
        out.append(json.loads(rest[:length]))
        stream = rest[length:]
    return out


def test_the_language_server_answers_initialize(installed: Installed) -> None:
    """A whole session over stdio: initialize, initialized, shutdown, exit (the server then ends with 0)."""
    session = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"processId": None, "rootUri": None, "capabilities": {}},
        },
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    p = subprocess.run(
        [installed.python, "-m", "server"],
        input=b"".join(_frame(m) for m in session),
        cwd=installed.work,
        env=installed.env,
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    replies = {m["id"]: m for m in _messages(p.stdout) if "id" in m}
    caps = replies[1]["result"]["capabilities"]
    assert caps["hoverProvider"] and caps["codeActionProvider"] and "asap.server.analyze" in str(caps)
    assert replies[2]["result"] is None
