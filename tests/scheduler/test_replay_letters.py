"""Replaying dead letters the scheduler no longer remembers (issue 17, item 7): a letter older
than the job's last 100, and a letter of a deleted job, replay from the copy the command
carries (the API reads it back from the dead-letter topic)."""

from __future__ import annotations

import pytest

from kadence.clock import ms_to_datetime
from kadence.models import (
    DeadLetter,
    Decision,
    ExecutionRequested,
    HistoryRecord,
    KafkaTarget,
    OutcomeStatus,
    ReplayDeadLetter,
    ScheduleDefinition,
)
from streams.runtime.store import Store
from streams.scheduler import outcomes
from streams.scheduler.state import DEAD_LIMIT
from tests.scheduler.test_breaker import CODEC, Scheduler
from tests.scheduler.test_domain import MIN, T0
from tests.scheduler.test_domain import outcome as make_outcome

PER_SECOND = {"kind": "cron", "spread_s": 0, "expression": "* * * * * *"}


def letters_of(s: Scheduler, count: int) -> list[DeadLetter]:
    """A per-second job whose every run fails: `count` dead letters."""
    d = ScheduleDefinition(
        tenant="acme", job_id="j", version=1, schedule=PER_SECOND, payload=b"job",
        target=KafkaTarget(topic="o"), overlap="allow", retry={"max_attempts": 1},
    )  # fmt: skip
    s.feed(s.topics.schedules, d.key, CODEC.encode(d), T0)
    letters: list[DeadLetter] = []
    for i in range(1, count + 1):
        s.out.clear()
        s.tick(T0 + i * 1_000)
        [ex] = s.take(ExecutionRequested)
        failed = make_outcome(ex, OutcomeStatus.failed)
        s.feed(s.topics.outcomes, ex.key, CODEC.encode(failed), T0 + i * 1_000)
        letters += s.take(DeadLetter)
    return letters


def replay(s: Scheduler, dead: ExecutionRequested, request: str, now: int, **kw: object) -> None:
    cmd = ReplayDeadLetter(
        tenant="acme", job_id="j", request_id=request, issued_at=ms_to_datetime(now),
        execution_id=dead.execution_id, **kw,
    )  # fmt: skip
    s.out.clear()
    topic = s.topics.commands if cmd.letter is None else s.topics.scheduler_control
    s.feed(topic, "acme/j", CODEC.encode(cmd), now)


def test_a_letter_older_than_the_last_hundred_replays_from_its_copy(store: Store) -> None:
    s = Scheduler(store)
    s.out.clear()
    letters = letters_of(s, DEAD_LIMIT + 3)
    oldest = letters[0].execution
    now = T0 + MIN * 5
    replay(s, oldest, "r1", now)  # the job has forgotten it, and the command carries no copy
    [told] = [h for h in s.take(HistoryRecord) if h.decision is Decision.cancelled]
    assert "not among this job's recent dead letters" in (told.reason or "")
    assert s.take(ExecutionRequested) == []
    replay(s, oldest, "r2", now, letter=oldest.model_copy(update={"payload": b"its own"}))
    [again] = s.take(ExecutionRequested)
    assert (again.execution_id, again.trigger, again.attempt) == (oldest.execution_id, "replay", 1)
    assert again.payload == b"its own"  # what the letter held, not the job's payload now


def test_a_deleted_job_s_letter_runs_once_as_it_holds_it(store: Store) -> None:
    s = Scheduler(store)
    s.out.clear()
    [letter] = letters_of(s, 1)
    s.feed(s.topics.schedules, "acme/j", None, T0 + 5_000)
    now = T0 + 10_000
    replay(s, letter.execution, "r1", now)  # no copy: nothing to run it from
    assert s.take(ExecutionRequested) == []
    replay(s, letter.execution, "r2", now, letter=letter.execution)
    [again] = s.take(ExecutionRequested)
    assert (again.execution_id, again.trigger, again.attempt, again.payload) == (
        letter.execution.execution_id,
        "replay",
        1,
        b"job",
    )
    assert again.dispatched_at == ms_to_datetime(now)
    [fired] = s.take(HistoryRecord)
    assert fired.decision is Decision.fired
    assert "not retried" in (fired.reason or "")
    s.out.clear()
    replay(s, letter.execution, "r3", now + 500, letter=letter.execution)  # while it may run
    assert s.take(ExecutionRequested) == []
    [refused] = s.take(HistoryRecord)
    assert refused.decision is Decision.refused
    assert "may still be running" in (refused.reason or "")
    failed = make_outcome(again, OutcomeStatus.failed, retryable=True)
    s.out.clear()
    s.feed(s.topics.outcomes, again.key, CODEC.encode(failed), now + 1_000)
    [said] = s.take(HistoryRecord)
    assert "it is not retried" in (said.reason or "")
    assert s.take(ExecutionRequested) == []  # failed, retryable: still not retried
    s.out.clear()
    replay(s, letter.execution, "r4", now + 2_000, letter=letter.execution)  # it has ended
    [third] = s.take(ExecutionRequested)
    assert (third.execution_id, third.attempt) == (letter.execution.execution_id, 1)
    assert third.dispatched_at == ms_to_datetime(now + 2_000)


def test_a_letter_must_be_the_commands_own() -> None:
    """The model refuses a copy of another execution before any scheduler sees it."""
    other = ExecutionRequested.model_validate(
        {
            "execution_id": "acme/other@2026-12-01T09:00:01.000Z", "tenant": "acme",
            "job_id": "other", "definition_version": 1, "nominal_at": ms_to_datetime(T0),
            "due_at": ms_to_datetime(T0), "dispatched_at": ms_to_datetime(T0),
            "target": {"kind": "kafka", "topic": "o"}, "timeout_ms": 1000, "lease_ttl_ms": 1000,
        }
    )  # fmt: skip
    with pytest.raises(ValueError, match="letter must be the dead letter"):
        ReplayDeadLetter(
            tenant="acme", job_id="j", request_id="r", issued_at=ms_to_datetime(T0),
            execution_id="acme/j@2026-12-01T09:00:01.000Z", letter=other,
        )  # fmt: skip
    assert (
        outcomes.replay_orphan(
            ReplayDeadLetter(
                tenant="acme", job_id="j", request_id="r", issued_at=ms_to_datetime(T0)
            ),
            T0,
        )
        == []
    )


def test_a_replay_while_a_run_of_the_same_execution_is_in_progress_is_refused(
    store: Store,
) -> None:
    """Issue 28: 30 replays of one dead letter in a row all fired (31 `fired` in history),
    also while the first replay ran. A replay of an execution whose run is in progress is
    refused (`run_active`, a history record says why); once that run has ended it goes."""
    s = Scheduler(store)
    s.out.clear()
    [letter] = letters_of(s, 1)
    dead = letter.execution
    now = T0 + MIN * 5
    replay(s, dead, "r1", now, letter=dead)
    [running] = s.take(ExecutionRequested)
    refused: list[HistoryRecord] = []
    for i in range(5):
        for kw in ({"letter": dead}, {}):
            replay(s, dead, f"again{i}{len(kw)}", now + i, **kw)
            assert s.out and not any(t == s.topics.executions for (t, *_r) in s.out)
            refused += [h for h in s.take(HistoryRecord) if h.decision is Decision.refused]
    assert len(refused) == 10
    assert all("is in progress" in (h.reason or "") for h in refused)
    ok = make_outcome(running, OutcomeStatus.succeeded)
    s.feed(s.topics.outcomes, running.key, CODEC.encode(ok), now + 1_000)
    replay(s, dead, "r3", now + 2_000, letter=dead)
    assert [r.execution_id for r in s.take(ExecutionRequested)] == [dead.execution_id]


def test_a_deleted_job_s_letter_replays_once_at_a_time(store: Store) -> None:
    """A deleted job has no state to remember its runs: the partition keeps until when a
    replay of each letter may run, refuses another meanwhile, and lets it go once the replay's
    outcome has come (or that time has passed)."""
    s = Scheduler(store)
    s.out.clear()
    [letter] = letters_of(s, 1)
    s.feed(s.topics.schedules, "acme/j", None, T0 + 5_000)
    now = T0 + 10_000
    replay(s, letter.execution, "r1", now, letter=letter.execution)
    [again] = s.take(ExecutionRequested)
    for i in range(3):
        replay(s, letter.execution, f"x{i}", now + 100, letter=letter.execution)
        assert s.take(ExecutionRequested) == []
    s.out.clear()
    ok = make_outcome(again, OutcomeStatus.succeeded)
    s.feed(s.topics.outcomes, again.key, CODEC.encode(ok), now + 1_000)
    replay(s, letter.execution, "r2", now + 2_000, letter=letter.execution)
    assert len(s.take(ExecutionRequested)) == 1  # its outcome ended it
    late = now + 2_000 + 4 * (letter.execution.timeout_ms + letter.execution.lease_ttl_ms) + 1
    replay(s, letter.execution, "r3", late, letter=letter.execution)
    assert len(s.take(ExecutionRequested)) == 1  # no outcome, but it cannot still be running
