"""The scheduler processor on a task over the memory store and over RocksDB: no broker, real
decode/encode and state."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from kadence.clock import datetime_to_ms, ms_to_datetime
from kadence.codec import Codec
from kadence.models import (
    DeadLetter,
    Decision,
    ExecutionOutcome,
    ExecutionRequested,
    ExecutionRevoked,
    HistoryRecord,
    KafkaTarget,
    OutcomeStatus,
    PauseJob,
    ReplayDeadLetter,
    ScheduleDefinition,
)
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.timeengine.zones import tzdb_version
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.store import Batch, MemoryStore, Store
from streams.runtime.task import Task
from streams.scheduler import definitions, firing
from streams.scheduler.breaker import Breaker
from streams.scheduler.processor import TZDB_MARKER, SchedulerConfig, SchedulerProcessor
from streams.scheduler.state import dump_state, load_state
from streams.scheduler.step import Facts
from testkit.tzdb import build_tzdb
from tests.scheduler.test_breaker import Scheduler
from tests.scheduler.test_domain import T0
from tests.scheduler.test_domain import outcome as make_outcome

CODEC = Codec()
NOW = int(datetime(2026, 12, 1, 9, 0, 30, tzinfo=UTC).timestamp() * 1000)


def processor(tzdb: str) -> SchedulerProcessor:
    return SchedulerProcessor(
        SchedulerConfig(Topics(KadenceSettings(partitions=1)), 1, 1, tzdb), CODEC
    )


def setup(tzdb: str, store: Store) -> tuple[SchedulerProcessor, Task, list[tuple[Any, ...]]]:
    proc = processor(tzdb)
    topics = proc.cfg.topics
    task = Task(0, store, NOW, 60_000)
    out: list[tuple[Any, ...]] = []
    task._emit = lambda *a: out.append(a)
    task.changelog = topics.scheduler_changelog
    return proc, task, out


def commit(task: Task) -> None:
    task.store.apply(task.batch)
    task.batch = Batch()


def test_maintain_recomputes_every_job_once_after_a_tz_database_change(store: Store) -> None:
    proc, task, out = setup("2020a", store)
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
    proc2 = processor("2099a")
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


def test_an_unexpected_error_rejects_the_record_instead_of_crashing(
    monkeypatch: Any, store: Store
) -> None:
    proc, task, out = setup("2025b", store)

    def boom(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr("streams.scheduler.definitions.apply_definition", boom)
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


def test_groups_dead_letters_and_refusals_through_the_processor(store: Store) -> None:
    """The state the processor keeps beside the jobs (the group index, the dead-letter count)
    and what a refused definition leaves, read back from the store with the cache dropped."""
    s = Scheduler(store)
    once = {"kind": "once", "run_at": "2026-12-01T09:01:00Z"}
    for job in ("a", "b"):
        d = ScheduleDefinition(
            tenant="acme", job_id=job, version=1, schedule=once, concurrency_key="db",
            target=KafkaTarget(topic="o"),
        )  # fmt: skip
        s.feed(s.topics.schedules, d.key, CODEC.encode(d), T0)
    bad = ScheduleDefinition(
        tenant="acme", job_id="bad", version=1, target=KafkaTarget(topic="o"),
        schedule={"kind": "cron", "expression": "* * * * *", "timezone": "Mars/Base"},
    )  # fmt: skip
    s.feed(s.topics.schedules, bad.key, CODEC.encode(bad), T0)
    [rejected] = [h for h in s.take(HistoryRecord) if h.job_id == "bad"]
    assert rejected.decision is Decision.definition_rejected
    assert s.task.get(b"acme/bad") is None
    s.tick(T0 + 60_000)  # both due; the group lets one run
    [ex] = s.take(ExecutionRequested)
    skipped = [h for h in s.take(HistoryRecord) if h.decision is Decision.skipped_overlap]
    assert len(skipped) == 1
    assert s.task.get(b"~group/acme/~db") is not None
    s.task.cache.clear()  # what follows reads the store
    failed: ExecutionOutcome = make_outcome(ex, OutcomeStatus.failed)
    s.feed(s.topics.outcomes, ex.key, CODEC.encode(failed), T0 + 61_000)
    assert [d.execution.execution_id for d in s.take(DeadLetter)] == [ex.execution_id]
    assert s.proc.dead_letter_depth(s.task) == 1
    assert s.task.get(b"~group/acme/~db") is None  # no runs left in the group
    replay = ReplayDeadLetter(
        tenant="acme", job_id=ex.job_id, request_id="r1", issued_at=ms_to_datetime(T0 + 62_000)
    )
    s.out.clear()
    s.feed(s.topics.commands, ex.key, CODEC.encode(replay), T0 + 62_000)
    [again] = s.take(ExecutionRequested)
    assert (again.execution_id, again.trigger) == (ex.execution_id, "replay")
    assert s.proc.dead_letter_depth(s.task) == 0


def test_a_run_due_now_and_a_command_ask_the_runtime_to_commit_at_once(store: Store) -> None:
    proc, task, _out = setup("2025b", store)
    d = ScheduleDefinition(
        tenant="acme",
        job_id="j",
        version=1,
        schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * *"},
        target=KafkaTarget(topic="o"),
    )
    topics = proc.cfg.topics
    proc.process(
        task, InputRecord(topics.schedules, 0, 0, b"acme/j", CODEC.encode(d), [], NOW), NOW
    )
    assert not task.urgent  # a definition: the commit interval will do
    wake = load_state(task.get(b"acme/j") or b"").wake_ms
    assert wake is not None
    proc.fire(task, b"acme/j", wake)
    assert task.urgent
    task.committed(None)
    assert not task.urgent
    pause = PauseJob(tenant="acme", job_id="j", request_id="p", issued_at=ms_to_datetime(wake))
    proc.process(
        task, InputRecord(topics.commands, 0, 1, b"acme/j", CODEC.encode(pause), [], wake), wake
    )
    assert task.urgent


def test_a_job_awaiting_its_outcome_and_its_tenants_breaker_stay_decoded(
    store: Store, monkeypatch: Any
) -> None:
    """The outcome of a run finds the job's state and the breaker decoded (no state or breaker
    bytes read back), and what the cache holds is what the store holds."""
    proc, task, out = setup("2025b", store)
    d = ScheduleDefinition(
        tenant="acme",
        job_id="j",
        version=1,
        schedule={"kind": "once", "run_at": ms_to_datetime(NOW + 1_000)},
        target=KafkaTarget(topic="o"),
    )
    topics = proc.cfg.topics
    proc.process(
        task, InputRecord(topics.schedules, 0, 0, b"acme/j", CODEC.encode(d), [], NOW), NOW
    )
    proc.fire(task, b"acme/j", NOW + 1_000)
    [ex] = [CODEC.decode(v) for (t, _p, _k, v, _h) in out if t == topics.executions]
    assert isinstance(ex, ExecutionRequested)
    commit(task)

    def no_decoding(*_a: Any) -> Any:
        raise AssertionError("decoded again")

    monkeypatch.setattr("streams.scheduler.stored.load_state", no_decoding)
    monkeypatch.setattr("streams.scheduler.breaker.Breaker.load", no_decoding)
    done = make_outcome(ex, OutcomeStatus.failed)
    record = InputRecord(topics.outcomes, 0, 1, b"acme/j", CODEC.encode(done), [], NOW + 2_000)
    proc.process(task, record, NOW + 2_000)
    monkeypatch.undo()
    breaker = task.cache[b"~breaker/acme"]
    commit(task)
    assert (breaker.attempts, breaker.failures) == (1, 1)
    assert task.get(b"~breaker/acme") == breaker.dump()
    assert b"acme/j" not in task.cache  # settled: nothing more to wait for
    assert load_state(task.get(b"acme/j") or b"").dead


def once_in_a_second(job_id: str) -> ScheduleDefinition:
    """A one-off job of tenant acme due a second after NOW."""
    return ScheduleDefinition(
        tenant="acme",
        job_id=job_id,
        version=1,
        schedule={"kind": "once", "run_at": ms_to_datetime(NOW + 1_000)},
        target=KafkaTarget(topic="o"),
    )


def define_once(proc: SchedulerProcessor, task: Task, jobs: int) -> None:
    """Define `jobs` one-off jobs (`once_in_a_second`) j0, j1, ... on the task's partition."""
    for i in range(jobs):
        d = once_in_a_second(f"j{i}")
        record = InputRecord(
            proc.cfg.topics.schedules, 0, i, d.key.encode(), CODEC.encode(d), [], NOW
        )
        proc.process(task, record, NOW)


def test_a_tenants_breaker_is_written_once_a_transaction_and_at_once_when_it_opens(
    store: Store, monkeypatch: Any
) -> None:
    """Counting an outcome changes the tenant's breaker at nearly every input: it is written
    once, at the commit, however many outcomes the transaction counted, with all of them
    counted. Opening the circuit writes it at once and tells every partition."""
    proc, task, out = setup("2025b", store)
    topics = proc.cfg.topics
    define_once(proc, task, 10)
    for i in range(10):
        proc.fire(task, f"acme/j{i}".encode(), NOW + 1_000)
    decoded = [CODEC.decode(v) for (t, _p, _k, v, _h) in out if t == topics.executions]
    runs = [ex for ex in decoded if isinstance(ex, ExecutionRequested)]
    assert len(runs) == 10
    task.changelog_records()
    task.committed(1)
    out.clear()

    def settle(ex: ExecutionRequested, status: OutcomeStatus, offset: int) -> None:
        done = CODEC.encode(make_outcome(ex, status))
        key = f"acme/{ex.job_id}".encode()
        record = InputRecord(topics.outcomes, 0, offset, key, done, [], NOW + 2_000)
        assert task.attempt(
            partial(proc.process, task, record, NOW + 2_000), lambda exc: pytest.fail(str(exc))
        )

    def breaker_records() -> list[bytes]:
        task.changelog_records()
        task.committed(2)
        return [v[8:] for (t, _p, k, v, _h) in out if k == b"~breaker/acme"]

    dumps: list[Breaker] = []
    dump = Breaker.dump

    def counted_dump(breaker: Breaker) -> bytes:
        dumps.append(breaker)
        return dump(breaker)

    monkeypatch.setattr(Breaker, "dump", counted_dump)
    statuses = [OutcomeStatus.succeeded, OutcomeStatus.failed] * 4  # 4 failed of 8: closed
    for i, (ex, status) in enumerate(zip(runs, statuses, strict=False)):
        settle(ex, status, i)
    [written] = breaker_records()  # one record for the eight outcomes
    assert len(dumps) == 2  # encoded to size it when first counted, and at the commit
    assert (Breaker.load(written).attempts, Breaker.load(written).failures) == (8, 4)
    assert not [r for r in out if r[0] == topics.scheduler_control]
    out.clear()
    settle(runs[8], OutcomeStatus.failed, 8)  # 5 of 9: still fewer than min_attempts
    assert task.get(b"~breaker/acme") == Breaker(NOW + 2_000, 9, 5).dump()
    settle(runs[9], OutcomeStatus.succeeded, 9)  # 5 of 10: it opens, on a success
    told = [r for r in out if r[0] == topics.scheduler_control]
    assert len(told) == proc.cfg.job_partitions
    [written] = breaker_records()
    assert Breaker.load(written).open_until_ms is not None
    assert task.store.get(b"~breaker/acme") is not None


def test_jobs_awaiting_outcomes_are_kept_decoded_only_up_to_a_bound(
    store: Store, monkeypatch: Any
) -> None:
    """Past AWAITING_CACHE_LIMIT cached entries a fired job awaiting its outcome is not kept
    decoded (its outcome reads it back): workers that are down must not make the scheduler
    hold every fired job's state in memory."""
    monkeypatch.setattr("streams.scheduler.processor.AWAITING_CACHE_LIMIT", 2)
    proc, task, _out = setup("2025b", store)
    define_once(proc, task, 4)
    commit(task)
    task.cache.clear()
    for i in range(4):
        proc.fire(task, f"acme/j{i}".encode(), NOW + 1_000)
    commit(task)
    kept = [k for k in task.cache if k.startswith(b"acme/j")]
    assert 1 <= len(kept) <= 2  # the bound counts every cached entry (the breaker's too)
    assert len(task.cache) <= 3  # the last one cached when the cache held one less
    for i in range(4):  # every job's state is in the store all the same
        assert load_state(task.get(f"acme/j{i}".encode()) or b"").running


def test_jobs_awaiting_outcomes_are_bounded_per_process_not_per_partition(
    monkeypatch: Any,
) -> None:
    """AWAITING_CACHE_LIMIT bounds the jobs kept decoded while awaiting an outcome over all the
    partitions a process owns: each partition's task has a cache of its own, so a partition
    gets its share (B1, 100 000 jobs over the default 12 partitions, stayed under a bound of
    20 000 per partition and kept every fired job decoded: 781 MiB RSS instead of 365)."""
    monkeypatch.setattr("streams.scheduler.processor.AWAITING_CACHE_LIMIT", 24)
    partitions = 12
    proc = SchedulerProcessor(
        SchedulerConfig(Topics(KadenceSettings(partitions=partitions)), partitions, 1, "2025b"),
        CODEC,
    )
    topics = proc.cfg.topics
    tasks = []
    for p in range(partitions):
        task = Task(p, MemoryStore(), NOW, 60_000)
        task.changelog = topics.scheduler_changelog
        tasks.append(task)
    per_partition: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    i = 0
    while any(len(keys) < 5 for keys in per_partition.values()):
        d = once_in_a_second(f"j{i}")
        i += 1
        p = partition_for(d.routing_key, partitions)
        if len(per_partition[p]) == 5:
            continue
        per_partition[p].append(d.key.encode())
        record = InputRecord(topics.schedules, p, i, d.key.encode(), CODEC.encode(d), [], NOW)
        proc.process(tasks[p], record, NOW)
    for task in tasks:
        commit(task)
        task.cache.clear()
    for p, keys in per_partition.items():
        for key in keys:
            proc.fire(tasks[p], key, NOW + 1_000)
        commit(tasks[p])
    kept = sum(1 for task in tasks for key in task.cache if key.startswith(b"acme/j"))
    assert 1 <= kept <= 24  # 60 jobs await an outcome: 2 a partition at most (the breaker counts)
    for p, keys in per_partition.items():  # every job's state is in the store all the same
        for key in keys:
            assert load_state(tasks[p].get(key) or b"").running


def test_a_zone_whose_rules_really_change_is_recomputed_and_what_moved_reported(
    store: Store, tmp_path: Path
) -> None:
    """Issue 17, item 9: maintain + apply_tzdb, the one production path, on zones compiled for
    the test: Kadence/Shift moves by 30 s between two versions, Kadence/Still does not."""
    old = build_tzdb(tmp_path, "2099a", {"Kadence/Shift": "0", "Kadence/Still": "0"})
    new = build_tzdb(tmp_path, "2099b", {"Kadence/Shift": "0:00:30", "Kadence/Still": "0"})
    cron = {"kind": "cron", "expression": "* * * * *", "spread_s": 0}
    jobs: dict[str, dict[str, Any]] = {
        "shift": {**cron, "timezone": "Kadence/Shift"},
        "still": {**cron, "timezone": "Kadence/Still"},
        "once": {"kind": "once", "run_at": ms_to_datetime(NOW + 3_600_000)},
    }
    try:
        use_tzdb(old)
        proc, task, out = setup("2099a", store)
        for i, (job, schedule) in enumerate(jobs.items()):
            d = ScheduleDefinition(
                tenant="acme",
                job_id=job,
                version=1,
                schedule=schedule,
                target=KafkaTarget(topic="o"),
            )
            rec = InputRecord(
                proc.cfg.topics.schedules, 0, i, d.key.encode(), CODEC.encode(d), [], NOW
            )
            proc.process(task, rec, NOW)
        assert proc.maintain(task, NOW)
        commit(task)
        before = {j: load_state(task.get(f"acme/{j}".encode()) or b"") for j in jobs}
        use_tzdb(new)  # a new release ships tz database 2099b
        assert tzdb_version() == "2099b"
        task.cache.clear()  # a restarted process: nothing decoded under the old rules
        out.clear()
        assert processor("2099b").maintain(task, NOW)
        commit(task)
    finally:
        zoneinfo.reset_tzpath()
        zoneinfo.ZoneInfo.clear_cache()
    after = {j: load_state(task.get(f"acme/{j}".encode()) or b"") for j in jobs}
    assert after["shift"].next_nominal_ms == (before["shift"].next_nominal_ms or 0) + 30_000
    assert after["still"].next_nominal_ms == before["still"].next_nominal_ms
    assert after["once"].next_nominal_ms == before["once"].next_nominal_ms
    assert all(s.tzdb == "2099b" for s in after.values())
    history = [CODEC.decode(v) for (t, _p, _k, v, _h) in out if t.endswith(".history")]
    [moved] = [h for h in history if isinstance(h, HistoryRecord)]
    assert (moved.job_id, moved.decision) == ("shift", Decision.rescheduled)
    assert moved.details["tzdb"] == "2099b"


def use_tzdb(folder: Path) -> None:
    zoneinfo.reset_tzpath([str(folder)])
    zoneinfo.ZoneInfo.clear_cache()


def test_what_went_out_ahead_under_the_old_rules_and_moved_is_revoked(tmp_path: Path) -> None:
    """Runs dispatched ahead were computed with the old zone; under the new one they are other
    instants: revoked (on main they ran at the old times) and dispatched again at the new."""
    old = build_tzdb(tmp_path, "2099a", {"Kadence/Shift": "0"})
    new = build_tzdb(tmp_path, "2099b", {"Kadence/Shift": "0:00:30"})
    d = ScheduleDefinition(
        tenant="acme",
        job_id="shift",
        version=1,
        schedule={
            "kind": "cron",
            "expression": "* * * * *",
            "spread_s": 0,
            "timezone": "Kadence/Shift",
        },
        target=KafkaTarget(topic="o"),
        overlap="allow",
    )
    try:
        use_tzdb(old)
        facts = Facts(NOW, CODEC, "2099a", ahead_ms=120_000)
        created = definitions.apply_definition(None, d, CODEC.encode(d), NOW, facts).state
        assert created is not None
        fired = firing.on_due(created, facts)  # two minutes ahead: 09:01 and 09:02 go out
        assert fired.state is not None
        assert [a.nominal_ms for a in fired.state.ahead] == [NOW + 30_000, NOW + 90_000]
        use_tzdb(new)
        # decoded again, under the new rules
        state = load_state(dump_state(fired.state), fired.state.definition_bytes)
        now = Facts(NOW, CODEC, "2099b", ahead_ms=120_000)
        result = definitions.apply_tzdb(state, now)
        assert result.state is not None
        assert (result.state.wake_ms or NOW + 1) <= NOW  # at once: the new instants go out ahead
        redone = firing.on_due(result.state, now)
    finally:
        zoneinfo.reset_tzpath()
        zoneinfo.ZoneInfo.clear_cache()
    revoked = [e.record for e in result.out if isinstance(e.record, ExecutionRevoked)]
    assert [r.execution_id for r in revoked] == [a.execution_id for a in fired.state.ahead]
    again = [e.record for e in redone.out if isinstance(e.record, ExecutionRequested)]
    assert [datetime_to_ms(e.nominal_at) for e in again] == [NOW + 60_000, NOW + 120_000]


def test_replaying_schedules_onto_existing_state_changes_nothing(store: Store) -> None:
    """The documented procedure (docs/operations.md, "Replaying topics"): resetting the
    scheduler's group to the start of `schedules` re-reads every version it already applied;
    each is refused as stale (a `rejected` record), no job fires twice, none moves back."""
    from tests.scheduler.test_breaker import Scheduler  # noqa: PLC0415

    s = Scheduler(store)
    records = []
    for i in range(3):
        for version in (1, 2):
            d = ScheduleDefinition(
                tenant="acme", job_id=f"j{i}", version=version, target=KafkaTarget(topic="o"),
                schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * *"},
            )  # fmt: skip
            records.append((d.key, CODEC.encode(d)))
            s.feed(s.topics.schedules, d.key, CODEC.encode(d), T0)
    s.tick(T0 + 60_000)
    before = {k: load_state(s.task.get(k.encode()) or b"") for k, _ in records}
    s.out.clear()
    for key, value in records:  # the whole topic again
        s.feed(s.topics.schedules, key, value, T0 + 61_000)
    s.tick(T0 + 61_000)
    written = [CODEC.decode(v) for (t, _p, _k, v, _h) in s.out if t != s.topics.scheduler_changelog]
    assert {type(r).__name__ for r in written} == {"Rejected"}
    assert {getattr(r, "code", "") for r in written} == {"stale_version"}
    after = {k: load_state(s.task.get(k.encode()) or b"") for k, _ in records}
    assert all(after[k].cursor_ms == before[k].cursor_ms for k in after)
