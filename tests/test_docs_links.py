"""The README and docs/*.md as a reader follows them: every relative link names a file of the checkout (and its
#anchor a heading of that file), every image is committed, every http(s) link is well formed (checked offline, no
network), and the README keeps the project's rule: it starts with the two commands and stays short."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
# [text](target) and ![alt](target), the target up to an optional "title"; text may hold one level of brackets.
LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose(text: str, spans: bool = False) -> str:
    """The Markdown without fenced blocks and, unless `spans`, code spans (a `[x](y)` there is code, not a link);
    line breaks kept so that a failure can name its line."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return text if spans else CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)


def links(path: Path) -> list[tuple[int, bool, str]]:
    """(line, is_image, target) of every inline link and image of a Markdown file."""
    text = prose(path.read_text(encoding="utf-8"))
    return [(text.count("\n", 0, m.start()) + 1, m.group(1) == "!", m.group(3)) for m in LINK.finditer(text)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, code marks and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings (a repeated one gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", prose(path.read_text(encoding="utf-8"), spans=True), re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken(path: Path) -> list[str]:
    """What is wrong with the links of one file, one line each ("file:line: target: why")."""
    out: list[str] = []
    for line, image, target in links(path):
        where = f"{path.relative_to(ROOT)}:{line}: {target!r}"
        if not target:
            out.append(f"{where}: empty link")
            continue
        parts = urlsplit(target)
        if parts.scheme in ("http", "https"):
            if not parts.netloc or "." not in parts.netloc or " " in target:
                out.append(f"{where}: not a well-formed URL")
            continue
        if parts.scheme:
            out.append(f"{where}: a {parts.scheme}: link (a reader of the repository cannot open it)")
            continue
        file = (path.parent / unquote(parts.path)).resolve() if parts.path else path
        if not file.is_relative_to(ROOT):
            out.append(f"{where}: outside the repository")
        elif not file.exists():
            out.append(f"{where}: no such file")
        elif image and (not file.is_file() or file.suffix.lower() not in (".png", ".jpg", ".jpeg", ".gif", ".svg")):
            out.append(f"{where}: not an image file")
        elif parts.fragment and file.suffix == ".md" and parts.fragment not in anchors(file):
            out.append(f"{where}: no heading #{parts.fragment} in {file.relative_to(ROOT)}")
    return out


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(path: Path):
    assert broken(path) == []


def test_the_readme_shows_the_editor_and_points_into_docs():
    found = links(ROOT / "README.md")
    images = {t for _, image, t in found if image}
    assert len(images) >= 5 and all(t.startswith("docs/images/") for t in images), images
    # docs/images holds what the README shows and `make screenshots` refreshes, nothing else, and stays small
    committed = {f"docs/images/{p.name}" for p in (ROOT / "docs" / "images").iterdir()}
    assert committed == images
    make = re.search(r"^SCREENSHOTS := (.+)$", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M)
    assert make is not None and {f"docs/images/{s}.png" for s in make.group(1).split()} == images
    assert sum((ROOT / t).stat().st_size for t in images) < 2_000_000
    # every reference file is reachable from the README, directly or through docs/README.md
    reachable = {(ROOT / t.split("#")[0]).resolve() for _, _, t in found if not urlsplit(t).scheme}
    index = ROOT / "docs" / "README.md"
    reachable |= {(index.parent / t.split("#")[0]).resolve() for _, _, t in links(index) if not urlsplit(t).scheme}
    assert [p.name for p in DOCS if p.parent.name == "docs" and p not in reachable and p != index] == []


def test_the_readme_starts_with_the_two_commands_and_stays_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ") and lines[2] == "```bash", lines[:3]
    assert [ln.split()[:2] for ln in lines[3:5]] == [["make", "demo"], ["make", "test"]] and lines[5] == "```"
    assert len(lines) <= 150


def test_the_checker_finds_what_is_broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The checker itself: each kind of broken link is reported, and links in code are not links."""
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A title\n\n## The `asap check` command\n")
    page = tmp_path / "README.md"
    page.write_text(
        "# R\n\n[ok](docs/a.md#the-asap-check-command) [ok](#r) [ok](https://example.com/x)\n"
        "[gone](docs/b.md) [anchor](docs/a.md#nope) ![pic](docs/a.md) [url](https://nohost) [self](#nope)\n"
        "`[code](docs/none.md)`\n\n```\n[fenced](docs/none.md)\n```\n"
    )
    assert [b.split(": ", 1)[0] + ": " + b.rsplit(": ", 1)[1] for b in broken(page)] == [
        "README.md:4: no such file",
        "README.md:4: no heading #nope in docs/a.md",
        "README.md:4: not an image file",
        "README.md:4: not a well-formed URL",
        "README.md:4: no heading #nope in README.md",
    ]
