"""docs/architecture.md names every part of the tree it describes: each package of `streams/`,
each process of `apps/`, each topic of `kadence/topics.py` (the ingress was once missing from
all three lists)."""

from __future__ import annotations

from pathlib import Path

from kadence.settings import KadenceSettings
from kadence.topics import all_topics

REPO = Path(__file__).resolve().parents[1]
DOC = (REPO / "docs" / "architecture.md").read_text()


def test_every_streams_package_is_in_the_layers() -> None:
    packages = [p.name for p in (REPO / "streams").iterdir() if (p / "__init__.py").is_file()]
    assert packages
    assert [p for p in packages if f"{p}/" not in DOC] == []


def test_every_process_is_named() -> None:
    processes = [
        p.stem for p in (REPO / "apps").glob("*.py") if "return process_main(" in p.read_text()
    ]
    assert "ingress" in processes
    assert [p for p in processes if f"`{p}`" not in DOC] == []


def test_every_topic_is_named() -> None:
    suffixes = {t.suffix for t in all_topics(KadenceSettings())}
    assert [s for s in sorted(suffixes) if f"`{s}`" not in DOC] == []


def test_executions_are_partitioned_as_the_code_does() -> None:
    """By tenant (kadence/partitioning.execution_route), never "by routing key"."""
    assert "execution_route" in DOC
    assert "by routing key" not in DOC
