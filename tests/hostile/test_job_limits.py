"""A tenant cannot grow one job's scheduler state past the broker's limit, and one job that
breaks while firing cannot stop the loop (issue 14, items 1 and 3), on an in-memory task."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from kadence.codec import Codec
from kadence.envelope import stored_definitions
from kadence.models import (
    Backfill,
    Decision,
    HistoryRecord,
    KafkaTarget,
    ResumeJob,
    ScheduleDefinition,
    TriggerNow,
    WireModel,
)
from kadence.models.base import MAX_PAYLOAD_BYTES
from kadence.settings import KadenceSettings
from kadence.sizing import RECORD_LIMIT
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.store import Batch, MemoryStore, wake_of
from streams.runtime.task import Task
from streams.scheduler.backfill import STEP_RUNS
from streams.scheduler.entries import Running
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor
from streams.scheduler.state import RUNNING_LIMIT, dump_state, fit_state, load_state

CODEC = Codec()
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
NOW = int((T0 + timedelta(hours=4)).timestamp() * 1000)
SIX_HOURS_MS = 6 * 3600 * 1000


class Harness:
    def __init__(self) -> None:
        self.topics = Topics(KadenceSettings(partitions=1))
        self.proc = SchedulerProcessor(SchedulerConfig(self.topics, 1, 1, "2025b"), CODEC)
        self.task = Task(0, MemoryStore(), NOW, 60_000)
        self.out: list[tuple[Any, ...]] = []
        self.task._emit = lambda *a: self.out.append(a)
        self.task.changelog = self.topics.scheduler_changelog
        self.offset = 0

    def send(self, topic: str, key: bytes, record: WireModel, now_ms: int = NOW) -> bool:
        """One input record, handled as the runtime handles it (one unit of work)."""
        self.offset += 1
        rec = InputRecord(topic, 0, self.offset, key, CODEC.encode(record), [], now_ms)
        ok = self.task.attempt(
            partial(self.proc.process, self.task, rec, now_ms),
            partial(self.proc.refuse, self.task, rec, now_ms=now_ms),
        )
        self.commit()
        return ok

    def fire(self, key: bytes, now_ms: int) -> bool:
        ok = self.task.attempt(
            partial(self.proc.fire, self.task, key, now_ms),
            partial(self.proc.quarantine, self.task, key, now_ms=now_ms),
        )
        self.commit()
        return ok

    def commit(self) -> None:
        self.task.store.apply(self.task.batch)
        self.task.batch = Batch()

    def records(self, suffix: str) -> list[Any]:
        return [CODEC.decode(v) for (t, _p, _k, v, _h) in self.out if t.endswith(suffix)]

    def history(self, decision: Decision) -> list[HistoryRecord]:
        return [h for h in self.records(".history") if h.decision is decision]

    def largest_record(self) -> int:
        return max(len(k or b"") + len(v or b"") for (_t, _p, k, v, _h) in self.out)


def per_second_job(tenant: str = "mallory", job_id: str = "flood") -> ScheduleDefinition:
    return ScheduleDefinition(
        tenant=tenant,
        job_id=job_id,
        version=1,
        schedule={"kind": "cron", "expression": "* * * * * *", "spread_s": 0},
        target=KafkaTarget(topic="out"),
        timeout_ms=SIX_HOURS_MS,
    )


def backfill(n: int, request_id: str, force: bool = True) -> Backfill:
    return Backfill(
        tenant="mallory",
        job_id="flood",
        request_id=request_id,
        issued_at=T0,
        start=T0,
        end=T0 + timedelta(seconds=n),
        force=force,
        max_occurrences=min(n, 100_000),
    )


def step_until_quiet(h: Harness, key: bytes, now_ms: int, steps: int = 200) -> int:
    """Fire the job at each wake time its state names, `steps` times at most; the time reached."""
    for _ in range(steps):
        state = load_state(h.task.get(key) or b"")
        if not state.backfills:
            break
        now_ms = max(now_ms, state.backfills[0].wake_ms)
        assert h.fire(key, now_ms)
        assert len(load_state(h.task.get(key) or b"").running) <= RUNNING_LIMIT
    return now_ms


def test_two_forced_backfill_floods_are_paced_and_never_outgrow_the_limits() -> None:
    """Two backfills of 10 000 runs are queued, not refused: each step fires at most 200, and
    none passes the job's limit of runs at once; every record fits the broker's limit."""
    h = Harness()
    d = per_second_job()
    key = d.key.encode()
    assert h.send(h.topics.schedules, key, d)
    for attempt in ("flood-1", "flood-2"):
        assert h.send(h.topics.commands, key, backfill(10_000, attempt))
    assert h.records(".rejected") == []
    assert len(h.records(".executions")) == STEP_RUNS  # the first step only
    step_until_quiet(h, key, NOW, steps=30)
    state = load_state(h.task.get(key) or b"")
    assert len(state.running) == RUNNING_LIMIT  # full, and waiting for runs to finish
    assert len(h.records(".executions")) == RUNNING_LIMIT
    assert state.backfills[0].request_id == "flood-1"
    assert len(state.backfills) == 2
    assert len(dump_state(state)) < RECORD_LIMIT
    assert h.largest_record() < RECORD_LIMIT


def test_backfills_fill_the_job_up_to_its_limit_and_not_one_run_more() -> None:
    h = Harness()
    d = per_second_job()
    key = d.key.encode()
    h.send(h.topics.schedules, key, d)
    assert h.send(h.topics.commands, key, backfill(RUNNING_LIMIT - 1, "fill"))
    step_until_quiet(h, key, NOW)
    assert h.send(h.topics.commands, key, TriggerNow(**_cmd("one-more")))
    fired = [e for e in h.records(".executions")]
    assert len(fired) == RUNNING_LIMIT
    assert h.send(h.topics.commands, key, TriggerNow(**_cmd("past-the-limit")))
    assert [r.code for r in h.records(".rejected")] == ["too_many_runs"]
    assert len(h.records(".executions")) == RUNNING_LIMIT
    state = load_state(h.task.get(key) or b"")
    assert len(state.running) == RUNNING_LIMIT
    assert len(dump_state(state)) < RECORD_LIMIT
    # the schedule itself keeps deciding: the next occurrence is skipped, with the reason
    assert h.fire(key, (state.next_due_ms or 0) + 1)
    skip = h.history(Decision.skipped_overlap)[-1]
    assert "per-job limit" in (skip.reason or "")


def _cmd(request_id: str) -> dict[str, Any]:
    return {"tenant": "mallory", "job_id": "flood", "request_id": request_id, "issued_at": T0}


def test_a_state_at_every_limit_with_the_longest_ids_is_trimmed_to_fit() -> None:
    tenant, job = "t" * 128, "j" * 128
    d = per_second_job(tenant, job).model_copy(update={"payload": b"p" * 200_000})
    h = Harness()
    h.send(h.topics.schedules, d.key.encode(), d)
    state = load_state(h.task.get(d.key.encode()) or b"")
    long_id = f"{d.key}@manual:" + "r" * 128
    state = state.evolve(
        running=tuple(Running(f"{long_id}{i}", NOW, 1, NOW + 1) for i in range(RUNNING_LIMIT)),
        finished=tuple(f"{long_id}{i}#1" for i in range(1000)),
        request_ids=tuple("r" * 124 + f"{i:04}" for i in range(1000)),
    )
    # the definition is stored under its own key now: as if the broker's limit were 200 kB
    # lower, this state no longer fits (what a flood of long ids beside it used to reach)
    limit = RECORD_LIMIT - len(d.key) - 8 - 200_000
    assert len(dump_state(state)) > limit
    fitted, data = fit_state(state, limit)
    assert data == dump_state(fitted)
    assert len(data) <= limit
    assert fitted.running == state.running  # what is in flight is never forgotten
    assert fitted.finished == state.finished[-len(fitted.finished) :]  # the newest are kept


def test_a_job_that_breaks_while_firing_is_quarantined_and_the_others_still_fire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = Harness()
    bad, good = per_second_job("mallory", "breaks"), per_second_job("alice", "fine")
    for d in (bad, good):
        h.send(h.topics.schedules, d.key.encode(), d)
    real_on_due = __import__("streams.scheduler.firing", fromlist=["on_due"]).on_due

    def on_due(state: Any, ctx: Any) -> Any:
        if state.definition(CODEC).job_id == "breaks":
            raise RuntimeError("a bug that only this job's state triggers")
        return real_on_due(state, ctx)

    monkeypatch.setattr("streams.scheduler.firing.on_due", on_due)
    due = load_state(h.task.get(bad.key.encode()) or b"").wake_ms or 0
    h.out.clear()
    assert not h.fire(bad.key.encode(), due)
    assert h.fire(good.key.encode(), due)
    [q] = h.history(Decision.quarantined)
    assert q.job_id == "breaks" and "a bug that only" in (q.reason or "")
    assert [e.job_id for e in h.records(".executions")] == ["fine"]
    assert (
        wake_of(h.task.batch.values.get(bad.key.encode()) or h.task.store.get(bad.key.encode()))
        is None
    )
    assert h.proc.metrics.failures.labels("quarantined")._value.get() == 1
    # a command re-arms it once the cause is gone
    monkeypatch.setattr("streams.scheduler.firing.on_due", real_on_due)
    assert h.send(
        h.topics.commands,
        bad.key.encode(),
        ResumeJob(**{**_cmd("rearm"), "tenant": "mallory", "job_id": "breaks"}),
    )
    assert load_state(h.task.get(bad.key.encode()) or b"").wake_ms is not None


def test_a_definition_whose_state_would_not_fit_is_refused_and_nothing_else_is_written() -> None:
    h = Harness()
    h.task.record_limit = 50_000  # as if the broker's limit were 50 kB
    big = per_second_job("mallory", "big").model_copy(update={"payload": b"p" * 60_000})
    assert not h.send(h.topics.schedules, big.key.encode(), big)
    [rejected] = h.records(".rejected")
    assert rejected.code == "record_too_large"
    assert "50000-byte limit" in rejected.reason
    assert [r.decision for r in h.records(".history")] == [Decision.refused]
    assert h.task.get(big.key.encode()) is None  # no state, no changelog record
    assert not [o for o in h.out if o[0] == h.topics.scheduler_changelog]
    small = per_second_job("alice", "small")
    assert h.send(h.topics.schedules, small.key.encode(), small)  # the next input goes on
    assert h.task.get(small.key.encode()) is not None


def test_overrides_are_kept_only_while_the_largest_state_still_fits() -> None:
    """Overrides are never trimmed, so a trigger's override is refused unless the state fits
    with it even once the job has its most runs at once with the longest ids: here the largest
    override does not fit (the definition, with the largest payload, is stored under its own
    key), a smaller one does, and that state still fits."""
    tenant, job = "t" * 128, "j" * 128
    d = per_second_job(tenant, job).model_copy(update={"payload": b"p" * MAX_PAYLOAD_BYTES})
    h = Harness()
    key = d.key.encode()
    h.send(h.topics.schedules, key, d)
    big = TriggerNow(
        **{**_cmd("r" * 128), "tenant": tenant, "job_id": job, "payload": b"x" * MAX_PAYLOAD_BYTES}
    )
    assert h.send(h.topics.commands, key, big)  # refused, not crashed: a rejected record says why
    [refused] = h.records(".rejected")
    assert refused.code == "payload_override_too_large"
    small = TriggerNow(
        **{**_cmd("s" * 128), "tenant": tenant, "job_id": job, "payload": b"x" * 10_000}
    )
    assert h.send(h.topics.commands, key, small)
    state = load_state(h.task.get(key) or b"")
    assert len(state.payloads) == 1
    long_id = f"{d.key}@manual:" + "r" * 128
    full = state.evolve(
        running=tuple(Running(f"{long_id}{i:04}", NOW, 1, NOW + 1) for i in range(RUNNING_LIMIT)),
        finished=tuple(f"{long_id}{i}#1" for i in range(1000)),
        request_ids=tuple("r" * 124 + f"{i:04}" for i in range(1000)),
    )
    fitted, data = fit_state(full, RECORD_LIMIT - len(d.key) - 8)
    assert len(data) <= RECORD_LIMIT - len(d.key) - 8
    assert fitted.payloads == state.payloads and fitted.running == full.running


def test_a_trigger_whose_payload_a_json_envelope_cannot_hold_is_refused_with_the_reason() -> None:
    """Issue 43, item 7: a 512 KiB payload of control characters is 3 MiB as the JSON string of
    a `"format": "json"` Kafka target's envelope; the trigger carrying it (through the API or a
    tenant's ingress topic, both end here) is refused, and nothing is dispatched. The same
    payload to the job as an Avro target runs."""
    control = b"\x01" * MAX_PAYLOAD_BYTES
    for fmt, runs in (("json", 0), ("avro", 1)):
        h = Harness()
        d = per_second_job().model_copy(update={"target": KafkaTarget(topic="out", format=fmt)})
        key = d.key.encode()
        h.send(h.topics.schedules, key, d)
        assert h.send(h.topics.commands, key, TriggerNow(**_cmd("hostile"), payload=control))
        fired = [e for e in h.records(".executions") if e.trigger == "manual"]
        assert len(fired) == runs, fmt
        if runs == 0:
            [refused] = h.records(".rejected")
            assert refused.code == "payload_too_large"
            assert "3145730 bytes" in refused.reason and "record limit" in refused.reason
        else:
            assert fired[0].payload == control and h.records(".rejected") == []


def test_a_job_stored_before_the_envelope_check_still_fires_and_can_be_fixed() -> None:
    """A definition the scheduler accepted before its payload was checked against a JSON
    envelope stays readable in its state: it fires (the worker fails its runs for good,
    tests/driver/test_envelope_guard.py) and a new version that fits is accepted; were it
    checked again, the job would be quarantined and refuse every update."""
    d = per_second_job().model_copy(
        update={
            "target": KafkaTarget(topic="out", format="json"),
            "payload": b"\x01" * MAX_PAYLOAD_BYTES,
        }
    )
    h, key = Harness(), d.key.encode()
    with stored_definitions():  # written by the release before
        assert h.send(h.topics.schedules, key, d)
    assert h.fire(key, NOW + 1_000)
    assert h.history(Decision.quarantined) == []
    assert len(h.records(".executions")) == 1
    fixed = d.model_copy(update={"version": 2, "payload": b"fits"})
    assert h.send(h.topics.schedules, key, fixed)
    assert h.records(".rejected") == []
    assert h.send(h.topics.schedules, key, d.model_copy(update={"version": 3}))
    [refused] = h.records(".rejected")  # a new one is checked, as everywhere
    assert refused.code == "invalid_record" and "3145730 bytes" in refused.reason
