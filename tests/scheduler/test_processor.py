"""The scheduler processor on an in-memory task: no broker, real decode/encode and state."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Any

from kadence.codec import Codec
from kadence.models import Decision, HistoryRecord, KafkaTarget, ScheduleDefinition
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.store import Batch, MemoryStore
from streams.runtime.task import Task
from streams.scheduler.processor import TZDB_MARKER, SchedulerConfig, SchedulerProcessor
from streams.scheduler.state import dump_state, load_state

CODEC = Codec()
NOW = int(datetime(2026, 12, 1, 9, 0, 30, tzinfo=UTC).timestamp() * 1000)


def setup(tzdb: str) -> tuple[SchedulerProcessor, Task, list[tuple[Any, ...]]]:
    topics = Topics(KadenceSettings(partitions=1))
    proc = SchedulerProcessor(SchedulerConfig(topics, 1, 1, tzdb), CODEC)
    task = Task(0, MemoryStore(), NOW, 60_000)
    out: list[tuple[Any, ...]] = []
    task._emit = lambda *a: out.append(a)
    task.changelog = topics.scheduler_changelog
    return proc, task, out


def commit(task: Task) -> None:
    task.store.apply(task.batch)
    task.batch = Batch()


def test_maintain_recomputes_every_job_once_after_a_tz_database_change() -> None:
    proc, task, out = setup("2020a")
    for i in range(5):
        d = ScheduleDefinition(
            tenant="acme",
            job_id=f"j{i}",
            version=1,
            schedule={
                "kind": "cron",
                "spread_s": 0,
                "expression": "0 9 * * *",
                "timezone": "Europe/London",
            },
            target=KafkaTarget(topic="o"),
        )
        proc.process(
            task,
            InputRecord(proc.cfg.topics.schedules, 0, i, d.key.encode(), CODEC.encode(d), [], NOW),
            NOW,
        )
    assert proc.maintain(task, NOW)
    commit(task)
    # a new release ships tz database 2099a; one job's stored next occurrence is now wrong
    key = b"acme/j3"
    raw = task.get(key)
    assert raw is not None
    wrong = load_state(raw).evolve(next_nominal_ms=NOW + 1, next_due_ms=NOW + 1)
    task.put(key, dump_state(wrong), NOW + 1)
    commit(task)
    proc2, _, _ = setup("2099a")
    out.clear()
    assert proc2.maintain(task, NOW)
    commit(task)
    assert all(load_state(task.get(f"acme/j{i}".encode()) or b"").tzdb == "2099a" for i in range(5))
    assert task.get(TZDB_MARKER) == b"2099a"
    moved = [CODEC.decode(v) for (topic, _p, _k, v, _h) in out if topic.endswith(".history")]
    assert [
        h.job_id
        for h in moved
        if isinstance(h, HistoryRecord) and h.decision is Decision.rescheduled
    ] == ["j3"]
    assert proc2.maintain(task, NOW)  # done: nothing to do the second time


def test_an_unexpected_error_rejects_the_record_instead_of_crashing(monkeypatch: Any) -> None:
    proc, task, out = setup("2025b")

    def boom(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr("streams.scheduler.logic.apply_definition", boom)
    d = ScheduleDefinition(
        tenant="acme",
        job_id="j",
        version=1,
        schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * *"},
        target=KafkaTarget(topic="o"),
    )
    record = InputRecord(proc.cfg.topics.schedules, 0, 7, b"acme/j", CODEC.encode(d), [], NOW)
    ok = task.attempt(
        partial(proc.process, task, record, NOW), partial(proc.refuse, task, record, now_ms=NOW)
    )
    assert not ok
    [history, (topic, _p, _key, value, _h)] = out
    assert CODEC.decode(history[3]).decision is Decision.refused  # type: ignore[attr-defined]
    assert topic == proc.cfg.topics.rejected
    rejected = CODEC.decode(value)
    assert getattr(rejected, "code", None) == "processing_error"
    assert "RuntimeError: boom" in getattr(rejected, "reason", "")
