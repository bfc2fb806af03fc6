"""Downtime policies, every command end to end, and poison input, against the real broker."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kadence.client import KadenceClient
from kadence.clock import datetime_to_ms
from kadence.codec import Codec
from kadence.models import (
    Backfill,
    CancelRun,
    CronSchedule,
    Decision,
    DstFoldPolicy,
    DstGapPolicy,
    HistoryRecord,
    KafkaTarget,
    PauseJob,
    ResumeJob,
    ScheduleDefinition,
    TriggerNow,
)
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from testkit.scheduler_process import (
    SchedulerProcess,
    counts,
    executions,
    executions_and_revocations,
    history,
    rejected,
)
from testkit.topic_reader import read_topic

CODEC = Codec()
MIN = 60_000


def job(job_id: str, expression: str, **kw: object) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": job_id,
            "version": 1,
            "schedule": {
                "kind": "cron",
                "expression": expression,
                "spread_s": 0,  # these tests reason about exact minutes
                **kw.pop("schedule", {}),  # type: ignore[dict-item]
            },
            "target": KafkaTarget(topic="out"),
            "overlap": "allow",
            **kw,
        }
    )


def wait_changelog(settings: KadenceSettings, n: int) -> None:
    """Until `n` jobs' states are in the changelog (the partition's own keys, `~tzdb` and the
    like, written first at assignment, do not count)."""
    topic = Topics(settings).scheduler_changelog

    def jobs() -> int:
        got = read_topic(settings.bootstrap_servers, topic, 100_000, 2)
        return len({m.key() for m in got if m.key() and not (m.key() or b"").startswith(b"~")})

    deadline = time.monotonic() + 30
    while jobs() < n:
        assert time.monotonic() < deadline, "the scheduler did not take the definitions in"


@pytest.mark.slow
def test_five_minutes_down_under_each_missed_run_policy(
    settings: KadenceSettings, tmp_path: Path
) -> None:
    """The clock jumps five minutes while the scheduler is stopped (clock offset on restart)."""
    first = (datetime.now(UTC) + timedelta(minutes=2)).replace(second=0, microsecond=0)
    modes = ["latest_once", "all", "none"]
    jobs = {
        m: job(f"per-minute-{m}", "* * * * *", schedule={"start_at": first}, missed={"mode": m})
        for m in modes
    }
    sched = SchedulerProcess(settings, "a", tmp_path / "s").start()
    with KadenceClient(settings) as client:
        client.put_many(jobs.values())
    wait_changelog(settings, 3)
    sched.stop()
    # back "five minutes later": five occurrences due, the newest 40 s late (grace is 30 s)
    offset = datetime_to_ms(first + timedelta(minutes=4, seconds=40)) - int(time.time() * 1000)
    sched = SchedulerProcess(settings, "a", tmp_path / "s", clock_offset_ms=offset).start()
    try:
        hist = _wait_history(settings, lambda h: len(h) >= 1 + 5 + 4 + 5, 30)
        got = executions(settings, expect=6, timeout_s=5)
    finally:
        sched.stop()
    minutes = [datetime_to_ms(first) + i * MIN for i in range(5)]
    by_job: dict[str, list[int]] = {m: [] for m in modes}
    for ex in got:
        if datetime_to_ms(ex.nominal_at) in minutes:
            by_job[
                ex.job_id.rsplit("-", 1)[-1] if "once" not in ex.job_id else "latest_once"
            ].append(datetime_to_ms(ex.nominal_at))
    assert by_job["latest_once"] == [minutes[-1]]
    assert sorted(by_job["all"]) == minutes
    assert by_job["none"] == []
    assert all(e.trigger == "catch_up" for e in got if datetime_to_ms(e.nominal_at) in minutes)
    decisions = [(h.job_id, h.decision) for h in hist]
    assert decisions.count(("per-minute-latest_once", Decision.coalesced)) == 4
    assert decisions.count(("per-minute-none", Decision.missed)) == 5


def _wait_history(settings: KadenceSettings, done: object, timeout_s: float) -> list[HistoryRecord]:
    deadline = time.monotonic() + timeout_s
    hist: list[HistoryRecord] = []
    while time.monotonic() < deadline:
        hist = history(settings, expect=100_000, timeout_s=1)
        if done(hist):  # type: ignore[operator]
            return hist
    return hist


def cmd(kind: type, job_id: str, request_id: str, **kw: object) -> object:
    return kind(
        tenant="acme", job_id=job_id, request_id=request_id, issued_at=datetime.now(UTC), **kw
    )


@pytest.mark.slow
def test_every_command_end_to_end(settings: KadenceSettings, tmp_path: Path) -> None:
    sched = SchedulerProcess(settings, "a", tmp_path / "s").start()
    jobs = [
        job("pausable", "* * * * * *"),
        job("deletable", "* * * * * *"),
        job("triggerable", "0 0 1 1 *"),
        job("backfillable", "* * * * *"),
        job("cancellable", "* * * * * *", overlap="buffer_one"),
    ]
    try:
        with KadenceClient(settings) as client:
            client.put_many(jobs)
            time.sleep(3)
            client.send(cmd(PauseJob, "pausable", "pause-1"))  # type: ignore[arg-type]
            client.send(cmd(TriggerNow, "triggerable", "t-1"))  # type: ignore[arg-type]
            client.send(cmd(TriggerNow, "triggerable", "t-1"))  # type: ignore[arg-type]
            client.delete("acme", "deletable")
            now = datetime.now(UTC).replace(second=0, microsecond=0)
            window = {"start": now - timedelta(minutes=5), "end": now - timedelta(minutes=1)}
            client.send(cmd(Backfill, "backfillable", "b-1", **window))  # type: ignore[arg-type]
            client.send(cmd(Backfill, "backfillable", "b-2", **window))  # type: ignore[arg-type]
            time.sleep(3)
            client.send(cmd(ResumeJob, "pausable", "resume-1"))  # type: ignore[arg-type]
            buffered = [
                h
                for h in history(settings, 100_000, 2)
                if h.job_id == "cancellable" and h.decision is Decision.buffered
            ]
            assert buffered, "the second run of the cancellable job should wait behind the first"
            target = buffered[0].execution_id
            client.send(cmd(CancelRun, "cancellable", "c-1", execution_id=target))  # type: ignore[arg-type]
            time.sleep(3)
        hist = history(settings, 100_000, 3)
        got, revoked = executions_and_revocations(settings, 100_000, 3)
    finally:
        sched.stop()

    def at(job_id: str, decision: Decision) -> datetime:
        return next(h.at for h in hist if h.job_id == job_id and h.decision is decision)

    paused, resumed = at("pausable", Decision.paused), at("pausable", Decision.resumed)
    pausable = [e for e in got if e.job_id == "pausable"]
    assert not [e for e in pausable if paused < e.dispatched_at < resumed]
    assert [e for e in pausable if e.dispatched_at >= resumed]  # runs again after resume
    # what went out ahead of its due time and was due after the pause is revoked, and only that
    ahead = {e.execution_id for e in pausable if e.dispatched_at < paused < e.due_at}
    assert ahead, "a per-second job has the look-ahead's worth out when it is paused"
    assert {r.execution_id for r in revoked if r.job_id == "pausable"} == ahead
    # issue 17, item 6: each occurrence due while paused is recorded skipped, at its due time
    skipped = [h for h in hist if h.job_id == "pausable" and h.decision is Decision.skipped_paused]
    assert len(skipped) >= 2, "about 3 s paused, a per-second job"
    for h in skipped:
        assert h.due_at is not None and paused < h.due_at <= resumed
        assert h.at - h.due_at < timedelta(seconds=2)  # when it fell due, not at the resume
    ran = {e.execution_id for e in pausable} - ahead
    assert not ran & {h.execution_id for h in skipped}  # and none of them ran
    deleted = at("deletable", Decision.deleted)
    assert not [e for e in got if e.job_id == "deletable" and e.dispatched_at > deleted]
    after_delete = {e.execution_id for e in got if e.job_id == "deletable" and e.due_at > deleted}
    assert after_delete  # out ahead of the delete ...
    assert {r.execution_id for r in revoked if r.job_id == "deletable"} == after_delete  # revoked
    manual = [e for e in got if e.job_id == "triggerable"]
    assert [(e.execution_id, e.trigger) for e in manual] == [
        ("acme/triggerable@manual:t-1", "manual")
    ]
    backfilled = [e for e in got if e.job_id == "backfillable" and e.trigger == "backfill"]
    assert len(backfilled) == 4  # every minute of [start, end), all before the job existed
    assert all(window["start"] <= e.nominal_at < window["end"] for e in backfilled)
    assert len(counts(backfilled)) == 4
    refused = [h for h in hist if h.decision is Decision.skipped_dispatched]
    assert len(refused) == 4  # the second backfill ran nothing twice
    cancelled = [h for h in hist if h.job_id == "cancellable" and h.decision is Decision.cancelled]
    assert [h.execution_id for h in cancelled] == [target]


@pytest.mark.slow
def test_poison_on_every_input_topic_is_rejected_and_a_good_job_still_fires(
    settings: KadenceSettings, tmp_path: Path
) -> None:
    topics = Topics(settings)
    parts = settings.partitions
    good = job("good", "* * * * * *")
    avro = CODEC.encode(good)
    bad_zone = good.model_copy(
        update={
            "job_id": "bad-zone",
            "schedule": CronSchedule.model_construct(
                kind="cron",
                expression="* * * * *",
                timezone="Mars/Base",
                start_at=None,
                end_at=None,
                dst_gap=DstGapPolicy.shift,
                dst_fold=DstFoldPolicy.auto,
                spread_s=0,
                exclude=[],
                also=[],
            ),
        }
    )
    poison: list[tuple[str, str, bytes | None, int | None]] = [
        (topics.schedules, "acme/x", b"\x00\x01garbage", None),
        # cut inside the expression's bytes: truncated whatever fields come after it
        (topics.schedules, "acme/good", avro[: avro.index(b"* * * * * *") + 3], None),
        (topics.schedules, "acme/good", avro[:2] + b"\x09" * 8 + avro[10:], None),
        (topics.schedules, "acme/y", json.dumps({"tenant": "acme", "job_id": "y"}).encode(), None),
        (topics.schedules, "acme/bad-zone", bad_zone.model_dump_json().encode(), None),
        (topics.schedules, "other/key", avro, None),
        (topics.schedules, "acme/good", avro, (partition_for("acme/good", parts) + 1) % parts),
        (topics.commands, "acme/good", b"not a command", None),
        (
            topics.commands,
            "acme/ghost",
            json.dumps(
                {
                    "type": "TriggerNow",
                    "tenant": "acme",
                    "job_id": "ghost",
                    "request_id": "r",
                    "issued_at": "2026-01-01T00:00:00Z",
                }
            ).encode(),
            None,
        ),
        (topics.outcomes, "acme/good", b"\xc3\x01", None),
    ]
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers})
    for topic, key, value, partition in poison:
        p = partition if partition is not None else partition_for(key, parts)
        producer.produce(topic, key=key.encode(), value=value, partition=p)
    assert producer.flush(10) == 0
    # the trigger of acme/ghost waits for a definition that never comes: 1 s, not the 30 s default
    sched = SchedulerProcess(settings, "a", tmp_path / "s", command_hold_ms=1_000).start()
    try:
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
        bounded = good.model_copy(
            update={
                "schedule": CronSchedule(
                    expression="* * * * * *", start_at=start, end_at=start + timedelta(seconds=2)
                )
            }
        )
        with KadenceClient(settings) as client:
            client.put(bounded)
        got = executions(settings, expect=3, timeout_s=30)
        bad = rejected(settings, expect=len(poison), timeout_s=10)
    finally:
        sched.stop()
    assert [e.job_id for e in got] == ["good"] * 3
    assert sorted(r.code for r in bad) == sorted(
        [
            "garbage_bytes",
            "truncated_record",
            "unknown_schema",
            "invalid_record",
            "invalid_schedule",
            "key_mismatch",
            "misrouted",
            "garbage_bytes",
            "unknown_job",
            "truncated_record",
        ]
    )
    assert all(r.processor == "scheduler" and r.reason for r in bad)
    garbage = next(r for r in bad if r.original_value == b"\x00\x01garbage")
    assert garbage.source_topic == topics.schedules
