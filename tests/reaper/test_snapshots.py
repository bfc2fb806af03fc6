"""The reaper's snapshot table, on both stores: leases by reference expire and redeliver,
renew, release by absence; stale snapshots, new incarnations, unreadable refs; and what the
previous release wrote (LeaseEvent v1 and v2, a changelog `Lease`) still expires and
redelivers through the same processor."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kadence.clock import datetime_to_ms
from kadence.codec import Codec
from kadence.models import (
    Decision,
    ExecutionBatch,
    ExecutionOutcome,
    ExecutionRequested,
    ExecutionRevoked,
    HeldRange,
    HistoryRecord,
    KafkaTarget,
    LeaseEvent,
    LeaseSnapshot,
    OutcomeStatus,
    Rejected,
)
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.reaper import snapshots
from streams.reaper.leases import FORGET_AFTER_MS, LEASE_GRACE_MS
from streams.reaper.processor import ReaperConfig, ReaperProcessor
from streams.reaper.snapshots import Held
from streams.runtime.records import InputRecord
from streams.runtime.store import Batch, MemoryStore, RocksStore, Store
from streams.runtime.task import Task

CODEC = Codec()
T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
T_MS = datetime_to_ms(T)
TTL = 3_000
HISTORY = Path(__file__).parents[2] / "schemas" / "history" / "LeaseEvent"


def execution(job: str, delivery: int = 1) -> ExecutionRequested:
    return ExecutionRequested(
        execution_id=f"acme/{job}@2026-12-01T09:00:00.000Z",
        tenant="acme",
        job_id=job,
        definition_version=1,
        nominal_at=T,
        due_at=T,
        dispatched_at=T,
        target=KafkaTarget(topic="t"),
        timeout_ms=60_000,
        lease_ttl_ms=TTL,
        delivery=delivery,
    )


class Reader:
    """`ExecutionReader` over a dict of (partition, offset) -> bytes; counts its reads."""

    def __init__(self) -> None:
        self.log: dict[tuple[int, int], bytes] = {}
        self.reads: list[list[tuple[int, int]]] = []
        self.down: set[int] = set()
        """Partitions whose leader cannot be reached: their refs are left out (no answer)."""

    def read(self, refs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes | None]:
        self.reads.append(list(refs))
        return {ref: self.log.get(ref) for ref in refs if ref[0] not in self.down}


class Harness:
    def __init__(self, store: Store, cap: int = 3) -> None:
        self.topics = Topics(KadenceSettings(partitions=1))
        self.reader = Reader()
        cfg = ReaperConfig(self.topics, 1, 1, redelivery_cap=cap)
        self.proc = ReaperProcessor(cfg, CODEC, reader=self.reader)
        self.task = Task(0, store, T_MS, 60_000)
        self.out: list[tuple[Any, ...]] = []
        self.task._emit = lambda *a: self.out.append(a)
        self.task.changelog = self.topics.reaper_changelog
        self.offset = 0

    def snapshot(
        self, at_ms: int, *held: tuple[int, int, int], worker: str = "w1", inc: str = "a1"
    ) -> None:
        """A snapshot of `worker`/`inc` at `at_ms` holding (partition, start, count)."""
        snap = LeaseSnapshot(
            worker_id=worker,
            incarnation=inc,
            at=T + timedelta(milliseconds=at_ms - T_MS),
            held=[HeldRange(partition=p, start=s, count=c, ttl_ms=TTL) for p, s, c in held],
        )
        self.raw(CODEC.encode(snap), snap.key.encode(), at_ms)

    def raw(self, value: bytes, key: bytes, at_ms: int) -> None:
        self.offset += 1
        rec = InputRecord(self.topics.leases, 0, self.offset, key, value, [], at_ms)
        self.proc.process(self.task, rec, at_ms)
        self.commit()

    def tick(self, now_ms: int) -> None:
        for key in self.task.due(now_ms, 100):
            self.proc.fire(self.task, key, now_ms)
        self.commit()

    def commit(self) -> None:
        self.task.store.apply(self.task.batch)
        self.task.batch = Batch()

    def records(self, kind: type[Any]) -> list[Any]:
        got = []
        for topic, _p, _k, value, _h in self.out:
            if topic == self.topics.reaper_changelog or value is None:
                continue
            record = CODEC.decode(value)
            if isinstance(record, kind):
                got.append(record)
        return got

    def failures(self) -> float | None:
        registry = self.proc.metrics.registry
        return registry.get_sample_value("kadence_reaper_failures_total", {"kind": "quarantined"})


@pytest.fixture(params=["memory", "rocks"])
def h(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    store: Store = MemoryStore() if request.param == "memory" else RocksStore(tmp_path / "p0")
    harness = Harness(store)
    harness.reader.log = {(0, o): CODEC.encode(execution(f"j{o}")) for o in range(10)}
    yield harness
    store.close()


def test_an_expired_snapshot_redelivers_each_run_it_held_by_reference(h: Harness) -> None:
    h.snapshot(T_MS, (0, 2, 2))
    h.tick(T_MS + TTL + LEASE_GRACE_MS - 1)
    assert h.records(ExecutionRequested) == []  # not before expiry plus grace
    h.tick(T_MS + TTL + LEASE_GRACE_MS)
    assert h.reader.reads == [[(0, 2), (0, 3)]]  # one read for the whole batch
    again = h.records(ExecutionRequested)
    assert [(e.execution_id, e.delivery, e.trigger) for e in again] == [
        (execution("j2").execution_id, 2, "redelivery"),
        (execution("j3").execution_id, 2, "redelivery"),
    ]
    history = h.records(HistoryRecord)
    assert [r.decision for r in history] == [Decision.redelivered] * 2
    assert "delivery 1 (worker w1) expired" in (history[0].reason or "")


def test_an_expired_batch_redelivers_each_of_its_executions_as_a_record_of_its_own(
    h: Harness,
) -> None:
    """A worker claims a batch's executions together, under the batch's offset: once that
    lease runs out each is handed on (an unreadable entry is quarantined, the rest go on)."""
    entries = [CODEC.encode(execution(f"b{i}")) for i in range(3)]
    batch = ExecutionBatch(tenant="acme", due_at=T, executions=[*entries, b"\xc3\x01junk"])
    h.reader.log[(0, 9)] = CODEC.encode(batch)
    h.snapshot(T_MS, (0, 9, 1))
    h.tick(T_MS + TTL + LEASE_GRACE_MS)
    again = h.records(ExecutionRequested)
    assert [(e.job_id, e.delivery, e.trigger) for e in again] == [
        (f"b{i}", 2, "redelivery") for i in range(3)
    ]
    assert [r.decision for r in h.records(HistoryRecord)] == [Decision.redelivered] * 3
    assert h.failures() == 1


def test_a_later_snapshot_renews_and_absence_releases(h: Harness) -> None:
    h.snapshot(T_MS, (0, 2, 2))
    for i in range(1, 10):  # renewed every second for 9 s
        h.tick(T_MS + i * 1_000)
        h.snapshot(T_MS + i * 1_000, (0, 2, 2))
    h.snapshot(T_MS + 9_500, (0, 3, 1))  # j2's outcome went out: released
    h.tick(T_MS + 9_500 + TTL + LEASE_GRACE_MS)
    assert [e.job_id for e in h.records(ExecutionRequested)] == ["j3"]  # j3 was not
    h.snapshot(T_MS + 20_000)  # nothing held: the entry goes
    assert h.task.get(snapshots.store_key("w1/a1")) is None


def test_a_stale_snapshot_that_still_lists_a_redelivered_run_does_not_rearm_it(
    h: Harness,
) -> None:
    h.snapshot(T_MS, (0, 2, 1))
    h.tick(T_MS + TTL + LEASE_GRACE_MS)
    assert len(h.records(ExecutionRequested)) == 1
    h.snapshot(T_MS + 6_000, (0, 2, 1))  # the worker wakes from a pause and still lists it
    h.tick(T_MS + 6_000 + TTL + LEASE_GRACE_MS)
    assert len(h.records(ExecutionRequested)) == 1
    h.snapshot(T_MS + 12_000, (0, 5, 1))  # it lets go of it: forgotten
    held = Held.load(h.task.get(snapshots.store_key("w1/a1")) or b"")
    assert held.done == {}
    h.snapshot(T_MS - 1_000, (0, 7, 1))  # older than the one stored: ignored
    assert h.proc.metrics.stale_events._value.get() == 1


def test_a_lease_left_out_after_it_ran_out_is_redelivered_not_released(h: Harness) -> None:
    """The worker self-fenced (`lease_lost`): its next snapshot, with the outcome, leaves the
    run out after the lease ran out. That is no release."""
    h.snapshot(T_MS, (0, 4, 1))
    h.snapshot(T_MS + TTL + 500)  # empty, but after j4's lease ran out
    h.tick(T_MS + TTL + 500 + LEASE_GRACE_MS)
    [again] = h.records(ExecutionRequested)
    assert (again.job_id, again.delivery) == ("j4", 2)


def test_a_new_incarnation_of_the_worker_does_not_release_the_old_ones_runs(
    h: Harness,
) -> None:
    h.snapshot(T_MS, (0, 1, 1), inc="a1")
    h.snapshot(T_MS + 1_000, inc="b2")  # restarted: holds nothing yet
    h.snapshot(T_MS + 2_000, (0, 6, 1), inc="b2")
    h.tick(T_MS + TTL + LEASE_GRACE_MS)
    assert [e.job_id for e in h.records(ExecutionRequested)] == ["j1"]


def test_at_the_cap_the_reaper_gives_up_on_a_run_held_by_reference(tmp_path: Path) -> None:
    h = Harness(MemoryStore(), cap=2)
    h.reader.log = {(0, 0): CODEC.encode(execution("j0", delivery=2))}
    h.snapshot(T_MS, (0, 0, 1))
    h.tick(T_MS + 10_000)
    assert h.records(ExecutionRequested) == []
    [outcome] = h.records(ExecutionOutcome)
    assert (outcome.status, outcome.retryable, outcome.delivery) == (OutcomeStatus.failed, False, 2)
    assert outcome.error is not None
    assert outcome.error.type == "RedeliveryCap"


def test_refs_that_cannot_be_redelivered_are_quarantined_and_the_rest_go_on(h: Harness) -> None:
    revoked = ExecutionRevoked(
        execution_id=execution("j8").execution_id,
        tenant="acme",
        job_id="j8",
        definition_version=1,
        due_at=T,
        revoked_at=T,
        reason="paused",
    )
    h.reader.log[(0, 8)] = CODEC.encode(revoked)
    h.reader.log[(0, 9)] = b"\x00garbage"
    del h.reader.log[(0, 1)]  # deleted by retention
    h.snapshot(T_MS, (0, 0, 2), (0, 8, 2))
    h.tick(T_MS + 10_000)
    assert [e.job_id for e in h.records(ExecutionRequested)] == ["j0"]
    quarantined = [r for r in h.records(HistoryRecord) if r.decision is Decision.quarantined]
    assert [r.job_id for r in quarantined] == ["j8"]
    assert "ExecutionRevoked" in (quarantined[0].reason or "")
    assert h.failures() == 3
    h.tick(T_MS + 20_000)  # handled once, not again
    assert h.failures() == 3


def test_a_ref_that_cannot_be_read_during_a_broker_outage_is_read_again_not_lost(
    h: Harness,
) -> None:
    """A node kill (docs/benchmarks-history.md B4, the 18 runs lost): the worker's loop stalls in a
    commit, its claims ahead run out and its next snapshot leaves them out; when the reaper's
    timer fires, the leader of their executions partition is down. Not being able to read the
    record now is no answer: the run is read again and redelivered once the partition is back,
    not quarantined (which nobody ever redelivers)."""
    h.reader.down = {0}
    h.snapshot(T_MS, (0, 2, 2))
    h.tick(T_MS + TTL + LEASE_GRACE_MS)
    assert h.records(ExecutionRequested) == []
    assert not h.failures()  # not quarantined
    h.snapshot(T_MS + TTL + LEASE_GRACE_MS + 200)  # the worker, back, lists nothing
    h.tick(T_MS + TTL + LEASE_GRACE_MS + snapshots.UNREAD_RETRY_MS)  # still down
    assert h.records(ExecutionRequested) == []
    h.reader.down = set()
    h.tick(T_MS + TTL + LEASE_GRACE_MS + 2 * snapshots.UNREAD_RETRY_MS)
    again = h.records(ExecutionRequested)
    assert [(e.job_id, e.delivery) for e in again] == [("j2", 2), ("j3", 2)]
    h.tick(T_MS + 60_000)  # handled once, not again
    assert len(h.records(ExecutionRequested)) == 2
    assert not h.failures()


def test_a_ref_unreadable_for_too_long_is_quarantined_in_the_end(h: Harness) -> None:
    h.reader.down = {0}
    h.snapshot(T_MS, (0, 2, 1))
    for t in range(TTL + LEASE_GRACE_MS, snapshots.UNREAD_GIVE_UP_MS + 10_000, 5_000):
        h.tick(T_MS + t)
    assert h.records(ExecutionRequested) == []
    assert h.failures() == 1


def test_remembered_refs_are_forgotten_in_the_end(h: Harness) -> None:
    h.snapshot(T_MS, (0, 2, 1))
    h.tick(T_MS + 10_000)
    key = snapshots.store_key("w1/a1")
    assert h.task.get(key) is not None  # remembered: the worker may still list it
    h.tick(T_MS + 10_000 + FORGET_AFTER_MS)
    assert h.task.get(key) is None


# -- what the previous release wrote ----------------------------------------------------------


def old_event(version: str) -> tuple[bytes, LeaseEvent]:
    raw = (HISTORY / f"{version}.bin").read_bytes()
    event = CODEC.decode_as(raw, LeaseEvent)
    return raw, event


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_lease_events_of_the_previous_releases_still_expire(h: Harness, version: str) -> None:
    """v2 `acquired` carries the execution: redelivered. v1 did not: the reaper gives it up as
    unknown, as the previous release did (and a v2 `renewed` is accepted with it)."""
    raw, event = old_event(version)
    at = datetime_to_ms(event.at)
    h.raw(raw, event.execution_id.encode(), at)
    h.tick(datetime_to_ms(event.expires_at) + LEASE_GRACE_MS)
    again = h.records(ExecutionRequested)
    if version == "v1":
        assert again == []
        assert h.task.get(event.execution_id.encode()) is None
        return
    [one] = again
    assert (one.execution_id, one.delivery) == (event.execution_id, 2)


def test_a_changelog_lease_of_the_previous_release_expires_and_redelivers(h: Harness) -> None:
    ex = execution("old")
    key = ex.execution_id.encode()
    encoded = base64.b64encode(CODEC.encode(ex)).decode()
    expires = T_MS + TTL
    value = json.dumps({"d": 1, "w": "w9", "x": expires, "a": True, "e": encoded})
    h.task.put(key, value.replace(" ", "").encode(), expires + LEASE_GRACE_MS)
    h.commit()
    h.tick(expires + LEASE_GRACE_MS)
    [again] = h.records(ExecutionRequested)
    assert (again.execution_id, again.delivery) == (ex.execution_id, 2)
    assert "(worker w9)" in (h.records(HistoryRecord)[0].reason or "")


# -- hostile snapshots ----------------------------------------------------------------------------


def forged(count: int, ttl_ms: int = TTL, ranges: int = 1) -> bytes:
    """A snapshot no worker writes, encoded past the model's checks (kcat could write it)."""
    held = [
        HeldRange.model_construct(partition=0, start=i * count, count=count, ttl_ms=ttl_ms)
        for i in range(ranges)
    ]
    snap = LeaseSnapshot.model_construct(worker_id="evil", incarnation="e1", at=T, held=held)
    return CODEC.encode(snap)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (forged(2**62), "count"),  # one range of 4.6e18 runs: expanding it would never end
        (forged(40_000, ranges=2), "80000 runs in all"),  # each range fits, together they don't
        (forged(1, ttl_ms=2**62), "ttl_ms"),  # its expiry would not fit the timer's 64 bits
    ],
    ids=["huge-count", "too-many-in-all", "huge-ttl"],
)
def test_a_snapshot_no_worker_could_write_is_rejected_and_the_reaper_goes_on(
    h: Harness, value: bytes, says: str
) -> None:
    h.raw(value, b"evil/e1", T_MS)
    [rejected] = h.records(Rejected)
    assert rejected.processor == "reaper" and says in rejected.reason
    assert h.task.get(snapshots.store_key("evil/e1")) is None  # nothing kept, no timer
    h.snapshot(T_MS, (0, 2, 1))  # a real worker's snapshot is still kept and expires
    h.tick(T_MS + TTL + LEASE_GRACE_MS)
    assert [e.execution_id for e in h.records(ExecutionRequested)] == [execution("j2").execution_id]
