"""A driver per test, with the production code's retry pauses cut to nothing (a retriable
error is still retried; the test just does not wait half a second for it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streams.kafkaio import errors, retry
from testkit.driver import Driver


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Driver]:
    monkeypatch.setattr(errors, "RETRY_PAUSE_S", 0.0)
    monkeypatch.setattr(retry, "PAUSE_S", 0.0)
    d = Driver()
    yield d
    d.close()
