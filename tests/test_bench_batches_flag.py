"""`--batches` / `--no-batches` of the benchmarks that run a stack (bench/stack.py): they follow
KADENCE_EXECUTION_BATCHES's default, on since 0.15.0, and `--no-batches` turns it off."""

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


def test_batches_are_on_unless_turned_off() -> None:
    assert _parsed() is True
    assert _parsed("--no-batches") is False
    assert _parsed("--batches") is True


def test_the_default_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KADENCE_EXECUTION_BATCHES", "false")
    assert _parsed() is False
