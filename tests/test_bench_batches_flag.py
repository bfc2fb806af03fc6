"""`--batches` / `--no-batches` of the benchmarks that run a stack (bench/stack.py): they follow
KADENCE_EXECUTION_BATCHES's default (off), `--batches` turns it on and `--no-batches` off."""

from __future__ import annotations

import argparse

import pytest

from bench.stack import add_batches_flag


def _parsed(*argv: str) -> bool:
    parser = argparse.ArgumentParser()
    add_batches_flag(parser)
    batches = parser.parse_args(list(argv)).batches
    assert isinstance(batches, bool)
    return batches


def test_batches_are_off_unless_turned_on() -> None:
    assert _parsed() is False
    assert _parsed("--batches") is True
    assert _parsed("--no-batches") is False


def test_the_default_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KADENCE_EXECUTION_BATCHES", "true")
    assert _parsed() is True
