"""No document names a file that is not there (issue 31): every relative link, and every path
in backticks that starts at one of the repository's folders, resolves in the checkout."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = (
    "apps",
    "bench",
    "connectors",
    "docs",
    "infra",
    "kadence",
    "schemas",
    "streams",
    "testkit",
    "tests",
    ".ci",
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")
CODE_SPAN = re.compile(r"``.*?``|`[^`]*`")
"""Inline code: a regular expression in one (`^(?:[a-z](?:x)?)$`, docs/jobs.md) is no link."""
PATH = re.compile(rf"^(?:{'|'.join(re.escape(f) for f in FOLDERS)})/[\w./-]*$")
GENERATED = {".run", ".venv"}


def documents() -> list[Path]:
    return sorted([*REPO.glob("*.md"), *REPO.glob("docs/**/*.md"), *REPO.glob("infra/**/*.md")])


def referenced(doc: Path, text: str) -> set[str]:
    """What `text`, the document at `doc` (which need not be written), names."""
    out = set()
    for link in LINK.findall(CODE_SPAN.sub("", text)):
        if "://" in link or link.startswith(("#", "mailto:")):
            continue
        out.add(str((doc.parent / link.split("#", 1)[0]).resolve().relative_to(REPO)))
    for code in CODE.findall(text):
        path = code.split("::", 1)[0].rstrip(".,:;")
        if PATH.match(path) and not re.search(r"[<>*{}]", path):
            out.add(path.split("#", 1)[0])
    return out


def exists(path: str) -> bool:
    """The file, or a module's attribute written `streams/scheduler/backfill.plan`."""
    if path.split("/", 1)[0] in GENERATED or (REPO / path).exists():
        return True
    module, dot, _ = path.rpartition(".")
    return bool(dot) and (REPO / f"{module}.py").is_file()


def missing_in(doc: Path, text: str) -> list[str]:
    return [f"{doc.relative_to(REPO)}: {p}" for p in sorted(referenced(doc, text)) if not exists(p)]


def missing() -> list[str]:
    return [m for doc in documents() for m in missing_in(doc, doc.read_text())]


def test_every_document_names_only_files_that_exist() -> None:
    assert len(documents()) >= 10
    assert missing() == []


def test_the_check_finds_a_missing_file() -> None:
    text = (
        "see [the plan](no-such-plan.md), `kadence/no_such_module.py`, `docs/api.md` and "
        "`streams/scheduler/backfill.plan`"
    )
    fake = REPO / "docs" / "zz-fake.md"  # never written: a test beside this one reads docs/
    assert missing_in(fake, text) == [
        f"docs/{fake.name}: docs/no-such-plan.md",
        f"docs/{fake.name}: kadence/no_such_module.py",
    ]
