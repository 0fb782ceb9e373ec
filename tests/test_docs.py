"""The documentation stays readable and its links hold: every page of docs/ fits in 250 lines (detail
moves to a page of its own), and every link from the README, docs/ and infra/README.md to a page of the
repository, or to a heading in one, names one that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINKING = [ROOT / "README.md", ROOT / "infra" / "README.md", *PAGES]
MAX_LINES = 250
LINK = re.compile(r"\]\(([^)\s]+?\.md)(?:#([^)\s]+))?\)|\]\(#([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings: lowercased, punctuation dropped, spaces as hyphens."""
    found = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") and not line.startswith("#!"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_a_page_of_docs_fits_in_250_lines(page: Path) -> None:
    assert len(page.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


@pytest.mark.parametrize("page", LINKING, ids=[str(page.relative_to(ROOT)) for page in LINKING])
def test_links_between_pages_name_pages_and_headings_that_exist(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    for target, anchor, local in LINK.findall(text):
        linked = page if local else (page.parent / target).resolve()
        if not local and target.startswith("http"):
            continue
        assert linked.exists(), f"{page.name} links to {target}, which does not exist"
        wanted = local or anchor
        if wanted:
            assert wanted in anchors(linked), f"{page.name} links to {target}#{wanted}: no such heading"
