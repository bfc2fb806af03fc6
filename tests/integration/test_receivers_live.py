"""The issue's live find, through the whole stack: five per-second jobs of one tenant call one
receiver, each on its own path — one answers twice then closes, one answers 200 and then an
unsolicited 500, one gives Content-Length twice, one ends its lines with LF alone, one is plain.
Before, the plain job had runs reported succeeded that never reached the receiver (answers left
on a kept connection by another job), and the LF job's delivered runs all ended dead-lettered.
Now every run reported succeeded arrived, and every delivered run succeeded."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kadence.client import KadenceClient
from kadence.models import ExecutionOutcome, HttpTarget, OutcomeStatus, ScheduleDefinition
from kadence.settings import KadenceSettings
from testkit.receivers import Receiver
from testkit.stack import Stack, dead_letters, execution_settings, outcomes, until

CASES = ("twice-then-close", "extra-500", "equal-lengths", "bare-lf", "plain")
SECONDS = 8


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    srv = Receiver().start()
    yield srv
    srv.stop()


@pytest.mark.slow
def test_jobs_sharing_a_receiver_get_their_own_answers_and_no_delivered_run_fails(
    settings: KadenceSettings, receiver: Receiver, tmp_path: Path
) -> None:
    xsettings = execution_settings(settings)
    stack = Stack.start(xsettings, tmp_path)
    try:
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
        jobs = [
            ScheduleDefinition(
                tenant="acme",
                job_id=case,
                version=1,
                schedule={
                    "kind": "cron",
                    "expression": "* * * * * *",
                    "start_at": start,
                    "end_at": start + timedelta(seconds=SECONDS - 1),
                },
                target=HttpTarget(url=receiver.url(case), secret_ref="test"),
                overlap="allow",
                timeout_ms=5_000,
            )
            for case in CASES
        ]
        with KadenceClient(xsettings) as client:
            client.put_many(jobs)
        expected = len(CASES) * SECONDS

        def all_succeeded() -> list[ExecutionOutcome] | None:
            got = outcomes(xsettings)
            return got if len(_succeeded(got)) >= expected else None

        finished = until(all_succeeded, 90, f"{expected} runs succeeded")
    finally:
        stack.stop()
    for case in CASES:
        delivered = set(receiver.runs(case))
        mine = [o for o in finished if o.job_id == case]
        succeeded = {o.execution_id for o in _succeeded(mine)}
        assert len(succeeded) == SECONDS, (case, mine)
        assert succeeded <= delivered, f"{case}: runs succeeded that never reached the receiver"
        assert [o for o in mine if o.status is not OutcomeStatus.succeeded] == [], case
    assert dead_letters(xsettings, expect=1, timeout_s=2) == []


def _succeeded(outs: list[ExecutionOutcome]) -> list[ExecutionOutcome]:
    return [o for o in outs if o.status is OutcomeStatus.succeeded]
