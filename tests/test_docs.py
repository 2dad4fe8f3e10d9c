"""The README and docs/ read as one manual: every relative link names a file of the repository,
and every #anchor a heading of the page it points to (GitHub's heading slugs)."""

from __future__ import annotations

import re

import pytest

from tests.support.process import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def links():
    for page in PAGES:
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if not re.match(r"[a-z]+:", target):
                yield pytest.param(page, target, id=f"{page.name}->{target}")


@pytest.mark.parametrize(("page", "target"), list(links()))
def test_link_resolves(page, target):
    file, _, anchor = target.partition("#")
    path = (page.parent / file).resolve() if file else page
    assert path.exists(), f"{page.relative_to(ROOT)} links to {target}: no such file"
    if anchor and path.suffix == ".md":
        assert anchor in anchors(path), f"{page.relative_to(ROOT)} links to {target}: no such heading"


def test_no_history_in_the_manual():
    """The manual describes the software as it is: no sessions, rounds or issue numbers."""
    history = re.compile(r"\b(first|second|third|fourth|fifth|tenth|this|last|next|earlier|previous) "
                         r"sessions?\b|\bissue #?[0-9]+|\bround [0-9]+", re.I)
    found = [f"{page.name}: {m.group(0)}" for page in PAGES for m in history.finditer(page.read_text())]
    assert not found


def test_readme_links_every_page():
    """A newcomer finds every page of docs/ from the README."""
    readme = (ROOT / "README.md").read_text()
    assert [p.name for p in PAGES[1:] if f"(docs/{p.name}" not in readme] == []
