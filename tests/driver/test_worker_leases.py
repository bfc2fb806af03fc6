"""Lease snapshots on the driver: one record per worker transaction listing every run held by
reference, claims ahead of the due time that start from memory at the due instant, and the
reaper redelivering by reference (a dead worker, a restarted one)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from kadence.clock import ms_to_datetime
from kadence.models import (
    ExecutionRequested,
    ExecutionRevoked,
    HeldRange,
    LeaseEvent,
    LeaseSnapshot,
    OutcomeStatus,
)
from kadence.settings import KadenceSettings
from kadence.targets import Result, Stop
from kadence.topics import LEASES, Topics
from streams.worker.active import ActiveRun, TxnWork
from streams.worker.holding import fit, ranges
from streams.worker.inbox import Item
from streams.worker.loop import Worker
from testkit.driver import START_MS, Driver
from testkit.driver.leases import snapshots
from testkit.driver.stack import DriverStack
from tests.driver.stack_helpers import TTL_MS, applied_successes, once, settings_for
from tests.driver.test_worker_loop import execution, outcomes, send, until

GROUP = "drv.workers"


class Gates:
    """A target whose runs each wait until the test opens their job's gate."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []
        """(job, delivery, when on the driver's clock)."""
        self.gates: dict[str, threading.Event] = {}
        self.now: Callable[[], int] = lambda: 0
        self.lock = threading.Lock()

    def gate(self, job: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(job, threading.Event())

    def release(self, job: str) -> None:
        self.gate(job).set()

    def __call__(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        gate = self.gate(ex.job_id)
        self.calls.append((ex.job_id, ex.delivery, self.now()))
        while not gate.wait(0.002):
            if stop.is_set():
                return Result(stop.reason or OutcomeStatus.cancelled)
        return Result.ok()


@pytest.fixture
def settings() -> KadenceSettings:
    return KadenceSettings(namespace="drv", partitions=2, execution_partitions=2)


@pytest.fixture
def topics(driver: Driver, settings: KadenceSettings) -> Topics:
    return driver.provision(settings)


@pytest.fixture
def gates(driver: Driver) -> Gates:
    g = Gates()
    g.now = driver.now_ms
    return g


def due_in(job: str, ms: int) -> ExecutionRequested:
    ex = execution(job)
    due = ms_to_datetime(START_MS + ms)
    return ex.model_copy(update={"due_at": due, "nominal_at": due})


def held(snap: LeaseSnapshot) -> list[tuple[int, int, int]]:
    return [(r.partition, r.start, r.count) for r in snap.held]


def test_one_snapshot_per_transaction_lists_every_run_and_the_outcome_releases_by_absence(
    driver: Driver, settings: KadenceSettings, topics: Topics, gates: Gates
) -> None:
    worker = driver.worker(settings, {"kafka": gates})
    for job in ("j1", "j2", "j3"):
        send(driver, topics, execution(job))
    driver.turn(worker)
    [claim] = snapshots(driver.cluster, topics)
    assert held(claim) == [(0, 0, 3)]  # three claims, one record, one range
    assert claim.key == f"{worker.worker_id}/{worker.holdings.writer.incarnation}"
    until(lambda: len(gates.calls) == 3)
    gates.release("j2")
    j2 = worker.runs[execution("j2").execution_id]
    until(lambda: j2.future is not None and j2.future.done())
    driver.turn(worker)
    claim, release = snapshots(driver.cluster, topics)
    assert held(release) == [(0, 0, 1), (0, 2, 1)]
    assert outcomes(driver, topics) == [(OutcomeStatus.succeeded, 1)]
    driver.advance(TTL_MS // 3)
    driver.turn(worker)  # the renewal: one snapshot renews both
    *_, renewal = snapshots(driver.cluster, topics)
    assert held(renewal) == [(0, 0, 1), (0, 2, 1)]
    assert {r.lease_expires_ms for r in worker.runs.values()} == {driver.now_ms() + TTL_MS}
    assert worker.metrics.renewals._value.get() == 4  # j1 and j3, twice (claims not counted)
    gates.release("j1")
    gates.release("j3")
    until(lambda: all(r.future is not None and r.future.done() for r in worker.runs.values()))
    driver.turn(worker)
    *_, last = snapshots(driver.cluster, topics)
    assert last.held == []  # the last ones released
    assert len(snapshots(driver.cluster, topics)) == 4
    assert not [r for r in driver.records(topics.leases, LEASES) if isinstance(r, LeaseEvent)]


def test_a_claim_ahead_starts_at_its_due_instant_without_another_commit_never_early(
    driver: Driver, settings: KadenceSettings, topics: Topics, gates: Gates
) -> None:
    worker = driver.worker(settings, {"kafka": gates})
    send(driver, topics, due_in("soon", 1_000))  # within half its lease TTL (1.5 s)
    send(driver, topics, due_in("later", 2_000))  # not yet
    driver.turn(worker)
    [claim] = snapshots(driver.cluster, topics)
    assert held(claim) == [(0, 0, 1)]
    assert driver.cluster.committed(GROUP)[(topics.executions, 0)] == 1  # past the claimed one
    driver.advance(999)
    driver.turn(worker, times=3)
    assert gates.calls == []  # never early
    before = len(snapshots(driver.cluster, topics))
    assert before == 2  # "later" came within reach and was claimed ahead too
    driver.advance(1)
    driver.turn(worker)
    until(lambda: bool(gates.calls))
    assert gates.calls == [("soon", 1, START_MS + 1_000)]  # at the due instant ...
    assert len(snapshots(driver.cluster, topics)) == before  # ... with no commit in between
    gates.release("soon")
    gates.release("later")
    driver.advance(1_000)
    driver.turn_until(lambda: len(outcomes(driver, topics)) == 2, worker)
    assert [c[0] for c in gates.calls] == ["soon", "later"]
    assert gates.calls[1][2] == START_MS + 2_000


def test_a_draining_worker_starts_its_claims_ahead_on_time_and_leaves_the_rest_unclaimed(
    driver: Driver, settings: KadenceSettings, topics: Topics, gates: Gates
) -> None:
    """A rolling restart a second before the top of the hour: the stopping worker's claims
    ahead start at their due instant instead of waiting out their lease for the reaper, and
    what it read but did not claim stays uncommitted for the partition's next owner."""
    worker = driver.worker(settings, {"kafka": gates})
    send(driver, topics, due_in("soon", 1_000))  # partition 0, offset 0: claimed ahead
    driver.turn(worker)
    send(driver, topics, due_in("far", 60_000))  # offset 1: read, too far ahead to claim
    driver.turn(worker)
    assert held(snapshots(driver.cluster, topics)[-1]) == [(0, 0, 1)]
    draining = threading.Thread(target=worker.drain, kwargs={"grace": timedelta(seconds=30)})
    draining.start()
    try:
        driver.advance(1_000)
        until(lambda: bool(gates.calls))
        assert gates.calls == [("soon", 1, START_MS + 1_000)]  # on time, never early
    finally:
        gates.release("soon")
        draining.join(timeout=20)
    assert not draining.is_alive()  # "far" is due after the grace: not waited for
    assert outcomes(driver, topics) == [(OutcomeStatus.succeeded, 1)]
    assert held(snapshots(driver.cluster, topics)[-1]) == []  # released with its outcome
    assert driver.cluster.committed(GROUP)[(topics.executions, 0)] == 1  # "far" read again


def test_a_claim_ahead_is_renewed_while_it_waits_and_a_revocation_drops_it(
    driver: Driver, settings: KadenceSettings, topics: Topics, gates: Gates
) -> None:
    worker = driver.worker(settings, {"kafka": gates})
    ex = due_in("revoked", 1_400)
    send(driver, topics, ex)
    driver.turn(worker)
    driver.advance(TTL_MS // 3)
    driver.turn(worker)
    claim, renewal = snapshots(driver.cluster, topics)
    assert held(claim) == held(renewal) == [(0, 0, 1)]
    revoke = ExecutionRevoked(
        execution_id=ex.execution_id,
        tenant="acme",
        job_id=ex.job_id,
        definition_version=1,
        due_at=ex.due_at,
        revoked_at=ex.due_at - timedelta(seconds=1),
        reason="paused",
    )
    driver.send(topics.executions, revoke, key=ex.routing_key, partition=0)
    driver.turn(worker)
    *_, release = snapshots(driver.cluster, topics)
    assert release.held == []
    driver.advance(2_000)
    driver.turn(worker, times=3)
    assert gates.calls == []
    assert worker.holdings.claimed == {}


def test_a_claim_ahead_whose_partition_moves_still_runs_once_on_its_claimer(
    driver: Driver, settings: KadenceSettings, topics: Topics, gates: Gates
) -> None:
    """The commit passed it, so the next owner of the partition never reads it: the worker
    that claimed it keeps it (its lease covers it) and runs it at its due time."""
    w1 = driver.worker(settings, {"kafka": gates}, instance_id="w1")
    send(driver, topics, due_in("moves", 1_000), partition=1)
    driver.turn(w1)
    assert len(w1.holdings.claimed) == 1
    other = Gates()
    w2 = driver.worker(settings, {"kafka": other}, instance_id="w2")
    driver.turn(w1, w2, times=3)
    assert [tp.partition for tp in w2.consumer.assignment()] == [1]
    driver.advance(1_000)
    driver.turn(w1, w2, times=3)
    until(lambda: bool(gates.calls))
    assert (gates.calls, other.calls) == ([("moves", 1, START_MS + 1_000)], [])
    gates.release("moves")


def test_with_the_events_format_nothing_is_claimed_ahead_and_events_are_written(
    driver: Driver, settings: KadenceSettings, topics: Topics, gates: Gates
) -> None:
    events = settings.model_copy(update={"lease_format": "events"})
    worker = driver.worker(events, {"kafka": gates})
    send(driver, topics, due_in("j", 1_000))
    driver.turn(worker)
    assert driver.messages(topics.leases) == []
    driver.advance(1_000)
    driver.turn(worker)
    until(lambda: bool(gates.calls))
    [acquired] = [r for r in driver.records(topics.leases, LEASES)]
    assert isinstance(acquired, LeaseEvent)
    assert acquired.execution is not None
    gates.release("j")


def run_at(partition: int, offset: int) -> ActiveRun:
    ex = execution(f"j{partition}-{offset}")
    return ActiveRun(Item(partition, offset, ex, START_MS), Stop(), 0, TTL_MS, 1_000)


def test_a_snapshot_that_would_not_fit_claims_less() -> None:
    txn = TxnWork(claims=[run_at(0, 5), run_at(0, 9)], ahead=[run_at(1, 0)])
    found, dropped = fit([run_at(0, 1)], txn, limit=2)
    assert [(r.partition, r.start) for r in found] == [(0, 1), (0, 5)]
    assert [(r.item.partition, r.item.offset) for r in dropped] == [(1, 0), (0, 9)]
    assert ranges([run_at(0, 1), run_at(0, 2)]) == [
        HeldRange(partition=0, start=1, count=2, ttl_ms=TTL_MS)
    ]


def test_a_snapshot_holding_too_many_runs_claims_less() -> None:
    """In one range they fit any range limit; the run limit still drops the claims ahead."""
    txn = TxnWork(claims=[run_at(0, 2)], ahead=[run_at(0, 3), run_at(0, 4)])
    found, dropped = fit([run_at(0, 1)], txn, runs=3)
    assert found == [HeldRange(partition=0, start=1, count=3, ttl_ms=TTL_MS)]
    assert [(r.item.partition, r.item.offset) for r in dropped] == [(0, 4)]


# -- the whole stack ----------------------------------------------------------------------------


@pytest.fixture(params=["snapshot", "events"])
def stack(request: pytest.FixtureRequest, driver: Driver, tmp_path: Path) -> Iterator[DriverStack]:
    s = DriverStack(driver, settings_for(tmp_path / "state", lease_format=request.param))
    yield s
    s.close()


def test_a_restarted_worker_does_not_release_what_its_previous_process_held(
    stack: DriverStack,
) -> None:
    """Same worker id, new process: the old process's run is redelivered (by reference, read
    back from `executions`, when snapshots are on) and runs once more on the new one."""
    stack.scheduler()
    stack.reaper()
    stack.worker("w0")
    stack.settle()
    gate = stack.target.gate("slow")
    stack.put(once("slow", in_s=2, handler="slow"))
    stack.run_for(2_500)
    [first] = stack.target.calls("slow")
    [old] = [w for w in stack.driver.loops if isinstance(w, Worker)]
    stack.driver.crash(old)
    stack.worker("w0")
    stack.put(once("quick", in_s=3))  # the new process writes snapshots before the old lease ends
    stack.settle()
    stack.run_for(TTL_MS + 2_500)
    assert len(applied_successes(stack, "quick")) == 1
    gate.open()
    stack.run_for(500)
    calls = stack.target.calls("slow")
    assert [(c.execution_id, c.delivery) for c in calls] == [
        (first.execution_id, 1),
        (first.execution_id, 2),
    ]
    assert len(applied_successes(stack, "slow")) == 1
    if stack.settings.lease_format == "snapshot":
        assert stack.reader.reads  # read back by reference
        keys = {s.key for s in stack.snapshots()}
        assert len(keys) == 2  # two incarnations of w0, neither releasing the other's runs
        assert not [r for r in stack.read(stack.topics.leases, LeaseEvent)]
    else:
        assert stack.snapshots() == []
