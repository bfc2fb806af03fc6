"""Concurrency groups through the processor: a group runs one run at a time whatever started
it (schedule under every overlap policy, retry, trigger, replay, backfill), what waits starts
the moment the group is free, jobs take turns, and a deleted job's run still holds the group
(docs/scheduler.md, "Concurrency groups")."""

from __future__ import annotations

from typing import Any

from kadence.clock import ms_to_datetime
from kadence.models import (
    Backfill,
    Decision,
    ExecutionOutcome,
    ExecutionRequested,
    HistoryRecord,
    KafkaTarget,
    OutcomeStatus,
    ReplayDeadLetter,
    ScheduleDefinition,
    TriggerNow,
)
from streams.runtime.store import MemoryStore, Store
from streams.scheduler.breaker import BreakerConfig
from streams.scheduler.state import load_state
from tests.scheduler.test_breaker import CODEC, Scheduler
from tests.scheduler.test_domain import MIN, T0
from tests.scheduler.test_domain import outcome as make_outcome

NO_BREAKER = BreakerConfig(min_attempts=1_000_000)
EVERY_MINUTE = {"kind": "cron", "spread_s": 0, "expression": "* * * * *"}


class Group(Scheduler):
    """The processor with jobs of tenant `acme`, most of them in concurrency group `db`."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, NO_BREAKER)
        self.now = T0
        self.requests = 0

    def job(self, job_id: str, **kw: Any) -> ScheduleDefinition:
        fields: dict[str, Any] = {
            "schedule": EVERY_MINUTE,
            "concurrency_key": "db",
            "timeout_ms": 600_000,
            "retry": {"max_attempts": 3, "initial_backoff_ms": 1_000, "jitter": "none"},
            **kw,
        }
        d = ScheduleDefinition(
            tenant="acme", job_id=job_id, version=1, target=KafkaTarget(topic="o"), **fields
        )
        self.feed(self.topics.schedules, d.key, CODEC.encode(d), self.now)
        return d

    def at(self, now: int) -> list[ExecutionRequested]:
        """Move the clock to `now`, fire what is due; the runs that went out."""
        self.now = now
        self.out.clear()
        self.tick(now)
        return self.take(ExecutionRequested)

    def end(
        self, ex: ExecutionRequested, status: OutcomeStatus = OutcomeStatus.succeeded, **kw: Any
    ) -> list[ExecutionRequested]:
        """Report `ex`'s outcome now; the runs that went out in the same step."""
        self.out.clear()
        o: ExecutionOutcome = make_outcome(ex, status, **kw)
        self.feed(self.topics.outcomes, ex.key, CODEC.encode(o), self.now)
        return self.take(ExecutionRequested)

    def command(self, cmd: Any) -> list[ExecutionRequested]:
        self.out.clear()
        self.feed(self.topics.commands, cmd.key, CODEC.encode(cmd), self.now)
        return self.take(ExecutionRequested)

    def request(self, kind: Any, job_id: str, **kw: Any) -> Any:
        self.requests += 1
        return kind(
            tenant="acme",
            job_id=job_id,
            request_id=f"r{self.requests}",
            issued_at=ms_to_datetime(self.now),
            **kw,
        )

    def decisions(self, decision: Decision) -> list[HistoryRecord]:
        return [h for h in self.take(HistoryRecord) if h.decision is decision]

    def buffered(self, job_id: str) -> int:
        raw = self.task.get(f"acme/{job_id}".encode())
        return len(load_state(raw).buffered) if raw else 0


def test_allow_in_a_group_waits_and_starts_when_the_other_job_s_run_ends(store: Store) -> None:
    g = Group(store)
    g.job("a", overlap="allow")
    g.job("b", overlap="allow")
    [first] = g.at(T0 + MIN)  # both due: one runs, the other waits (allow cannot overlap)
    waiting = g.decisions(Decision.buffered)
    assert len(waiting) == 1
    assert "concurrency group db" in (waiting[0].reason or "")
    # before: the waiting run started at the next wake of its job, a whole period later
    g.now = T0 + MIN + 5_000
    [second] = g.end(first)
    assert second.job_id != first.job_id
    assert second.nominal_at == ms_to_datetime(T0 + MIN)
    assert (second.trigger, second.due_at) == ("schedule", ms_to_datetime(T0 + MIN))


def test_cancel_other_stops_only_its_own_run_and_waits_for_it(store: Store) -> None:
    g = Group(store)
    g.job("a", overlap="cancel_other", schedule={**EVERY_MINUTE, "expression": "1-59/2 * * * *"})
    g.job("b", overlap="skip", schedule={**EVERY_MINUTE, "expression": "*/2 * * * *"})
    [a1] = g.at(T0 + MIN)
    assert a1.job_id == "a"
    assert g.at(T0 + 2 * MIN) == []  # b is due while a runs: skipped (its policy)
    assert len(g.decisions(Decision.skipped_overlap)) == 1
    assert g.at(T0 + 3 * MIN) == []  # a again: stops its own run, the new one waits for it
    [stop] = g.decisions(Decision.cancel_requested)
    assert stop.execution_id == a1.execution_id
    g.now = T0 + 3 * MIN + 1_000
    [a2] = g.end(a1, OutcomeStatus.cancelled)
    assert (a2.job_id, a2.nominal_at) == ("a", ms_to_datetime(T0 + 3 * MIN))
    assert g.at(T0 + 4 * MIN) == []  # b is due while a2 runs: b's run is never cancelled by a
    assert g.decisions(Decision.cancel_requested) == []


def test_retries_triggers_replays_and_backfills_wait_for_the_group(store: Store) -> None:
    g = Group(store)
    g.job("a", schedule={"kind": "once", "run_at": "2026-12-01T09:01:00Z"})
    g.job("b", schedule={"kind": "once", "run_at": "2026-12-01T09:01:00Z"})
    [first] = g.at(T0 + MIN)
    other = "b" if first.job_id == "a" else "a"
    assert g.decisions(Decision.skipped_overlap)  # a one-off whose group runs is skipped (skip)
    g.now = T0 + MIN + 1_000
    # the other job: a trigger with its own payload, while the group runs
    assert g.command(g.request(TriggerNow, other, payload=b"mine")) == []
    [held] = g.decisions(Decision.buffered)
    assert (held.job_id, held.details["trigger"]) == (other, "manual")
    # the first fails: its retry is due in 1 s, but the trigger waited longer: it goes first
    [triggered] = g.end(first, OutcomeStatus.failed, retryable=True)
    assert (triggered.job_id, triggered.trigger, triggered.payload) == (other, "manual", b"mine")
    assert g.at(T0 + MIN + 2_500) == []  # the retry is due: it waits for the group
    [retry_waits] = g.decisions(Decision.buffered)
    assert (retry_waits.attempt, retry_waits.details["trigger"]) == (2, "retry")
    g.now = T0 + MIN + 3_000
    [retry] = g.end(triggered, OutcomeStatus.failed)  # not retryable: dead-lettered
    assert (retry.execution_id, retry.attempt, retry.trigger) == (first.execution_id, 2, "retry")
    # a replay of the dead letter waits for the retry's run
    assert g.command(g.request(ReplayDeadLetter, other)) == []
    [replay] = g.end(retry)
    assert (replay.execution_id, replay.trigger, replay.payload) == (
        triggered.execution_id,
        "replay",
        b"mine",  # the run's own payload, also after waiting
    )
    # a backfill of the other job's one-off, skipped at the start: it waits for the group
    skipped = g.request(
        Backfill,
        other,
        start=ms_to_datetime(T0),
        end=ms_to_datetime(T0 + 2 * MIN),
    )
    assert g.command(skipped) == []  # the group runs the replay: the backfill waits
    [backfilled] = g.end(replay)
    assert (backfilled.job_id, backfilled.trigger) == (other, "backfill")
    assert backfilled.nominal_at == ms_to_datetime(T0 + MIN)


def test_jobs_take_turns_while_one_of_them_always_has_a_run_waiting(store: Store) -> None:
    g = Group(store)
    g.job("a", overlap="buffer_all")
    g.job("b", overlap="buffer_all")
    g.job("c", overlap="buffer_all")
    started = g.at(T0 + MIN)
    for minute in range(2, 5):  # each minute every job gets another occurrence waiting
        g.at(T0 + minute * MIN)
    order = [started[0].job_id]
    running = started[0]
    for _ in range(8):
        g.now += 1_000
        [running] = g.end(running)
        order.append(running.job_id)
    # round robin: no job runs twice before the others that wait have run once
    assert all(len(set(order[i : i + 3])) == 3 for i in range(len(order) - 2)), order


def test_a_deleted_job_s_run_holds_the_group_until_its_outcome(store: Store) -> None:
    g = Group(store)
    g.job("a", schedule={"kind": "once", "run_at": "2026-12-01T09:01:00Z"})
    [a] = g.at(T0 + MIN)
    g.job("b", overlap="buffer_one")
    g.out.clear()
    g.feed(g.topics.schedules, "acme/a", None, T0 + MIN + 1)  # deleted while its run runs
    assert g.at(T0 + 2 * MIN) == []  # b waits: a's run still runs
    assert g.buffered("b") == 1
    g.now = T0 + 2 * MIN + 10
    [b] = g.end(a)
    assert (b.job_id, b.nominal_at) == ("b", ms_to_datetime(T0 + 2 * MIN))
    assert g.task.get(b"~gone/acme/a") is None


def test_a_run_that_never_reports_frees_the_group_at_its_expiry(store: Store) -> None:
    g = Group(store)
    g.job("a", schedule={"kind": "once", "run_at": "2026-12-01T09:01:00Z"}, timeout_ms=90_000)
    g.job("b", overlap="buffer_one", schedule={"kind": "once", "run_at": "2026-12-01T09:01:30Z"})
    [a] = g.at(T0 + MIN)
    assert g.at(T0 + MIN + 30_000) == []
    expires = T0 + MIN + a.timeout_ms + a.lease_ttl_ms
    assert g.at(expires - 1) == []
    [b] = g.at(expires + 1_000)  # no outcome ever came: the waiting job looks again then
    assert b.job_id == "b"


def test_a_job_that_leaves_the_group_no_longer_holds_it() -> None:
    g = Group(MemoryStore())
    g.job("a", schedule={"kind": "once", "run_at": "2026-12-01T09:01:00Z"})
    g.job("b", overlap="buffer_one")
    [a] = g.at(T0 + MIN)
    assert a.job_id == "a"
    moved = ScheduleDefinition(
        tenant="acme", job_id="a", version=2, target=KafkaTarget(topic="o"),
        schedule={"kind": "once", "run_at": "2026-12-01T09:01:00Z"}, concurrency_key="other",
    )  # fmt: skip
    g.feed(g.topics.schedules, moved.key, CODEC.encode(moved), T0 + MIN + 1)
    assert b"acme/a" not in str(g.task.get(b"~group/acme/~db") or b"").encode()
    [b] = g.at(T0 + 2 * MIN)
    assert b.job_id == "b"
