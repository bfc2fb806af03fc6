"""docs/scheduling.md's `kadence preview` examples print exactly what the page shows."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from apps.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "scheduling.md"


def examples() -> list[tuple[str, list[str]]]:
    """(command line, expected output lines) for every `$ kadence preview` in the doc."""
    out: list[tuple[str, list[str]]] = []
    lines = DOC.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("$ kadence preview"):
            expected = []
            for follow in lines[i + 1 :]:
                if not follow or follow.startswith(("$", "```")):
                    break
                expected.append(follow)
            out.append((line.removeprefix("$ kadence "), expected))
    return out


def test_the_doc_has_examples() -> None:
    assert len(examples()) >= 5


@pytest.mark.parametrize(("command", "expected"), examples(), ids=lambda v: str(v)[:60])
def test_example_output_matches(
    command: str, expected: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(shlex.split(command)) == 0
    assert capsys.readouterr().out.splitlines() == expected
