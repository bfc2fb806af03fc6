"""`kadence trigger --wait` on a run that failed for good: the view shows `failed` as the
outcome lands and `dead_lettered` a moment later; the command waits for the letter (within a
grace, never past its deadline) so it says the whole story. No broker: the API is a stub."""

from __future__ import annotations

import time
from typing import Any

import pytest
from rich.console import Console

from apps.cli_runs import RunNotSucceededError, wait_run
from kadence import api_client
from kadence.api_client import ApiClient

RUN = "acme/j@manual:r1"


class Views(ApiClient):
    """Answers `GET .../runs` with the statuses given, one call each, the last one after."""

    def __init__(self, *statuses: str) -> None:
        super().__init__("http://127.0.0.1:9", None)
        self.statuses = list(statuses)
        self.calls = 0

    def call(self, method: str, path: str, **_: Any) -> list[dict[str, Any]]:
        status = self.statuses[min(self.calls, len(self.statuses) - 1)]
        self.calls += 1
        return [
            {
                "execution_id": RUN,
                "status": status,
                "lateness_s": 0.1,
                "reason": "retries_exhausted" if status == "dead_lettered" else "",
                "last_error": {"type": "HttpStatus", "message": "503 Service Unavailable"},
            }
        ]


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda _s: None)


def test_a_failed_run_is_told_as_its_dead_letter_once_that_shows() -> None:
    views = Views("running", "failed", "failed", "dead_lettered")
    with pytest.raises(RunNotSucceededError, match="dead_lettered: retries_exhausted"):
        wait_run(views, "j", RUN, timeout_s=30, console=Console(), quiet=True)
    assert views.calls == 4


def test_a_failed_run_without_a_letter_is_told_as_failed_after_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    views = Views("failed")
    with pytest.raises(RunNotSucceededError, match=f"run {RUN} failed"):
        wait_run(views, "j", RUN, timeout_s=30, console=Console(), quiet=True)
    assert api_client.LETTER_GRACE_S <= clock[0] < 30  # waited the grace, not the whole timeout
