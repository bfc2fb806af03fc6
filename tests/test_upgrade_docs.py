"""One upgrade procedure, stated once (issue 43, item 2): docs/operations.md `## Upgrading`; every
link into operations.md lands on a heading it has, and no other document states an upgrade order
of its own again (the phrases the old notes used)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OPERATIONS = REPO / "docs/operations.md"
LINK = re.compile(r"\]\((?:[\w./]*/)?operations\.md#([\w-]+)\)")
RESTATED = re.compile(
    r"upgrade all schedulers together|upgrade every scheduler before|in the one order"
    r"|the one upgrade order|upgrade the schedulers(?:, reapers and views)? before"
    r"|upgrade reapers first|rolls one pod at a time",
    re.I,
)
"""How the notes that restated an order said it (before issue 43)."""


def documents() -> list[Path]:
    return sorted([*REPO.glob("*.md"), *REPO.glob("docs/**/*.md"), *REPO.glob("infra/**/*.md")])


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors() -> set[str]:
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", OPERATIONS.read_text(), re.M)}


def test_the_procedure_is_where_every_document_links() -> None:
    assert "upgrading" in anchors()
    broken = [
        (str(doc.relative_to(REPO)), anchor)
        for doc in documents()
        for anchor in LINK.findall(doc.read_text())
        if anchor not in anchors()
    ]
    assert broken == []
    linking = {doc.name for doc in documents() if "operations.md#upgrading)" in doc.read_text()}
    assert {"deploy.md", "scheduler.md", "execution.md", "api.md", "CHANGELOG.md"} <= linking


def test_no_other_document_restates_an_order() -> None:
    restating = [
        (str(doc.relative_to(REPO)), found.group(0))
        for doc in documents()
        if doc not in (OPERATIONS, REPO / "CHANGELOG.md")
        for found in RESTATED.finditer(doc.read_text())
    ]
    assert restating == []


def test_the_checks_can_fail() -> None:
    assert slug("Upgrading processes one at a time") not in anchors()
    assert RESTATED.search("upgrade all schedulers together (they are the only readers)")
