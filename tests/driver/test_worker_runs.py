"""The worker's runs in flight (streams/worker/inflight.py): a turn's work follows what
happened, not the number of runs held. Finished runs are pushed to the loop, renewals, lease
expiries and timeouts come off a heap; with many runs they still fire at their FakeClock time."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from datetime import timedelta

import pytest
from confluent_kafka import TopicPartition

from connectors.kafka_topic import KafkaTopicCaller
from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import (
    ExecutionOutcome,
    ExecutionRequested,
    KafkaTarget,
    LeaseEventKind,
    OutcomeStatus,
    WireModel,
)
from kadence.settings import KadenceSettings
from kadence.targets import Result, Stop
from kadence.topics import OUTCOMES, Topics
from streams.worker.loop import Worker
from testkit.driver import START_MS, Driver, abort_error
from testkit.driver.leases import lease_facts
from tests.connectors.test_kafka_topic_forward import Producer

TTL_MS = 3_000
RUNS = 200


class Gates:
    """A target whose runs each wait for their own gate (or their stop), parked, not polling."""

    def __init__(self) -> None:
        self.gates: dict[str, threading.Event] = {}
        self.lock = threading.Lock()

    def gate(self, execution_id: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(execution_id, threading.Event())

    def __call__(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        gate = self.gate(ex.execution_id)
        stop.on_stop(gate.set)
        gate.wait()
        return Result(stop.reason) if stop.reason is not None else Result.ok()


@pytest.fixture(params=["snapshot", "events"])
def settings(request: pytest.FixtureRequest) -> KadenceSettings:
    """Both lease formats (a snapshot renewing every run reads as a renewal of each)."""
    return KadenceSettings(
        namespace="drv",
        partitions=2,
        execution_partitions=2,
        worker_concurrency=RUNS,
        worker_tenant_max_share=1.0,
        lease_format=request.param,
    )


@pytest.fixture
def topics(driver: Driver, settings: KadenceSettings) -> Topics:
    return driver.provision(settings)


@pytest.fixture
def gates() -> Iterator[Gates]:
    g = Gates()
    yield g
    for gate in list(g.gates.values()):
        gate.set()


def execution(i: int, *, timeout_ms: int = 600_000) -> ExecutionRequested:
    due = ms_to_datetime(START_MS)
    return ExecutionRequested(
        execution_id=f"acme/j{i}@2026-12-01T08:00:00.000Z",
        tenant="acme",
        job_id=f"j{i}",
        definition_version=1,
        nominal_at=due,
        due_at=due,
        dispatched_at=due - timedelta(seconds=1),
        target=KafkaTarget(topic="t"),
        timeout_ms=timeout_ms,
        lease_ttl_ms=TTL_MS,
    )


def start(
    driver: Driver, topics: Topics, worker: Worker, gates: Gates, n: int = RUNS, *more: int
) -> None:
    """Claim executions 0..n-1 (and `more`, by number), and wait until they all run."""
    for i in [*range(n), *more]:
        ex = execution(i, timeout_ms=500 if i in more else 600_000)
        driver.send(topics.executions, ex, key=ex.routing_key, partition=i % 2)
    total = n + len(more)
    driver.turn_until(lambda: len(worker.runs) == total and len(gates.gates) == total, worker)


def renewed(driver: Driver, topics: Topics) -> int:
    facts = lease_facts(driver.cluster, topics)
    return sum(1 for kind, _, _ in facts if kind is LeaseEventKind.renewed)


def outcomes(driver: Driver, topics: Topics) -> list[ExecutionOutcome]:
    found = driver.records(topics.outcomes, OUTCOMES)
    return [o for o in found if isinstance(o, ExecutionOutcome)]


def test_idle_turns_poll_no_future_and_a_finished_run_is_reported_in_the_next_turn(
    driver: Driver,
    settings: KadenceSettings,
    topics: Topics,
    gates: Gates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = driver.worker(settings, {"kafka": gates})
    start(driver, topics, worker, gates)
    polled: list[object] = []
    done = Future.done

    def counted(future: Future[Result]) -> bool:
        polled.append(future)
        return done(future)

    monkeypatch.setattr(Future, "done", counted)
    driver.turn(worker, times=20)
    assert polled == []  # 200 runs in flight, nothing due: no run looked at
    ex = execution(7)
    run = worker.runs[ex.execution_id]
    gates.gate(ex.execution_id).set()
    assert run.future is not None
    run.future.result(timeout=5)
    driver.turn(worker)
    [outcome] = outcomes(driver, topics)
    assert (outcome.execution_id, outcome.status) == (ex.execution_id, OutcomeStatus.succeeded)
    assert ex.execution_id not in worker.runs
    assert len(worker.runs) == RUNS - 1


def test_a_finished_run_wakes_a_waiting_turn(
    driver: Driver, settings: KadenceSettings, topics: Topics, gates: Gates
) -> None:
    """With runs in flight the turn waits on completions (not in the consumer, which cannot
    be woken): a run that ends cuts the wait short, and that turn reports it."""
    worker = driver.worker(settings, {"kafka": gates})
    start(driver, topics, worker, gates, n=1)
    worker.inflight.wait(0)  # the claim's own wake-ups are spent
    threading.Timer(0.05, gates.gate(execution(0).execution_id).set).start()
    began = time.monotonic()
    worker.inflight.wait(30)
    assert time.monotonic() - began < 10
    worker.turn(poll_s=0)
    assert [o.status for o in outcomes(driver, topics)] == [OutcomeStatus.succeeded]


def test_a_commit_sends_only_the_positions_that_moved_and_always_at_least_one(
    driver: Driver,
    settings: KadenceSettings,
    topics: Topics,
    gates: Gates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every position re-sent with every transaction is a `__consumer_offsets` record per
    partition per commit on the broker: only those that moved go, one when none did (KIP-447:
    the group metadata still fences a worker that lost its partitions)."""
    worker = driver.worker(settings, {"kafka": gates})
    start(driver, topics, worker, gates, RUNS - 1)  # runs held on both partitions, one slot free
    sent: list[list[int]] = []
    producer = worker.session.producer
    send = producer.send_offsets_to_transaction

    def recording(positions: list[TopicPartition], group: object, timeout: float) -> None:
        sent.append(sorted(tp.partition for tp in positions))
        send(positions, group, timeout)

    monkeypatch.setattr(producer, "send_offsets_to_transaction", recording)
    ex = execution(RUNS + 1)
    driver.send(topics.executions, ex, key=ex.routing_key, partition=1)
    driver.turn_until(lambda: ex.execution_id in worker.runs, worker)
    assert sent == [[1]]  # its claim: partition 1's position moved, partition 0's did not
    driver.advance(TTL_MS // 3)
    driver.turn(worker)  # renewals only: nothing moved, one position goes along
    assert [len(s) for s in sent] == [1, 1]


def test_many_runs_renew_at_a_third_of_the_lease_and_fence_themselves_at_its_expiry(
    driver: Driver, settings: KadenceSettings, topics: Topics, gates: Gates
) -> None:
    worker = driver.worker(settings, {"kafka": gates})
    start(driver, topics, worker, gates)
    driver.advance(TTL_MS // 3 - 1)
    driver.turn(worker)
    assert renewed(driver, topics) == 0
    driver.advance(1)
    driver.turn(worker)
    assert renewed(driver, topics) == RUNS  # all in that turn's transaction
    renewed_at = driver.now_ms()
    driver.cluster.faults.fail("commit_transaction", abort_error(), times=1_000)
    driver.advance(TTL_MS - 1)
    driver.turn(worker)
    assert not any(r.lease_lost for r in worker.runs.values())
    driver.advance(1)
    assert driver.now_ms() == renewed_at + TTL_MS
    driver.turn(worker)
    assert all(r.lease_lost for r in worker.runs.values())
    assert worker.metrics.lease_lost._value.get() == RUNS
    driver.cluster.faults.clear()
    driver.turn_until(lambda: not worker.runs, worker)
    assert {o.status for o in outcomes(driver, topics)} == {OutcomeStatus.lease_lost}


def test_a_timeout_stops_only_the_run_past_it(
    driver: Driver, settings: KadenceSettings, topics: Topics, gates: Gates
) -> None:
    worker = driver.worker(settings, {"kafka": gates})
    short = execution(RUNS, timeout_ms=500)
    start(driver, topics, worker, gates, 10, RUNS)  # RUNS: the one with a 500 ms timeout
    driver.advance(499)
    driver.turn(worker)
    assert worker.runs[short.execution_id].stop.reason is None
    driver.advance(1)
    driver.turn(worker)
    assert worker.runs[short.execution_id].stop.reason is OutcomeStatus.timed_out
    driver.turn_until(lambda: short.execution_id not in worker.runs, worker)
    [outcome] = outcomes(driver, topics)
    assert outcome.status is OutcomeStatus.timed_out
    assert not any(r.stop.is_set() for r in worker.runs.values())


def test_per_run_lines_are_debug_and_a_summary_is_logged_every_ten_seconds(
    driver: Driver,
    settings: KadenceSettings,
    topics: Topics,
    gates: Gates,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, "streams.worker")
    worker = driver.worker(settings, {"kafka": gates})
    start(driver, topics, worker, gates, n=3)
    gates.gate(execution(0).execution_id).set()
    driver.turn_until(lambda: len(worker.runs) == 2, worker)
    per_run = [r for r in caplog.records if r.getMessage().startswith(("started", "finished"))]
    assert len(per_run) == 4
    assert {r.levelno for r in per_run} == {logging.DEBUG}
    assert not [r for r in caplog.records if r.levelno == logging.INFO and "runs in" in r.msg]
    for _ in range(10):  # renewing the two still running, every second
        driver.advance(1_000)
        driver.turn(worker)
    [summary] = [r for r in caplog.records if r.levelno == logging.INFO and "runs in" in r.msg]
    assert summary.getMessage() == (
        "runs in the last 10 s: 3 started (start lateness p50 0.000 s, p99 0.000 s), "
        "1 finished (succeeded 1); 2 in flight"
    )


def claimed_path(settings: KadenceSettings) -> KadenceSettings:
    """The Kafka target's own path (a claim, then its producer): without exactly once."""
    return settings.model_copy(update={"worker_kafka_exactly_once": False})


class NoEncoding(Codec):
    def encode(self, record: WireModel) -> bytes:
        raise AssertionError("the execution was encoded again")


def test_the_kafka_target_gets_the_bytes_the_worker_read(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """On the claimed path (without exactly once; with it, test_worker_delivery.py)."""
    kafka = KafkaTopicCaller("127.0.0.1:9", "drv", 1, NoEncoding())  # never connects
    kafka.producer = Producer()  # type: ignore[assignment]
    ex = execution(0)
    kafka._known.add(kafka.topic_for(ex))
    worker = driver.worker(claimed_path(settings), {"kafka": kafka})
    message = driver.send(topics.executions, ex, key=ex.routing_key, partition=0)
    driver.turn_until(lambda: len(outcomes(driver, topics)) == 1, worker)
    assert outcomes(driver, topics)[0].status is OutcomeStatus.succeeded
    [(_, _, value, _)] = kafka.producer.sent  # type: ignore[attr-defined]
    assert value == message.value()
    kafka._closed.set()


def test_a_kafka_run_takes_no_thread_and_still_times_out_at_its_deadline(
    driver: Driver, settings: KadenceSettings, topics: Topics, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka = KafkaTopicCaller("127.0.0.1:9", "drv", 1, Codec())  # never connects
    producer = Producer(hold=True)  # no ack ever comes
    kafka.producer = producer  # type: ignore[assignment]
    worker = driver.worker(claimed_path(settings), {"kafka": kafka})
    monkeypatch.setattr(worker.pool, "submit", pytest.fail)
    ex = execution(0, timeout_ms=2_000)
    kafka._known.add(kafka.topic_for(ex))
    driver.send(topics.executions, ex, key=ex.routing_key, partition=0)
    driver.turn_until(lambda: len(producer.sent) == 1, worker)
    driver.advance(1_000)  # renewing the lease on the way
    driver.turn(worker)
    assert outcomes(driver, topics) == []
    driver.advance(1_000)
    driver.turn(worker, times=2)  # the timeout stops it; the outcome goes with the next turn
    [outcome] = outcomes(driver, topics)
    assert (outcome.status, outcome.retryable) == (OutcomeStatus.timed_out, True)
    kafka._closed.set()


def test_a_kafka_run_whose_topic_is_new_runs_on_the_pool_with_the_bytes_read(
    driver: Driver, settings: KadenceSettings, topics: Topics, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka = KafkaTopicCaller("127.0.0.1:9", "drv", 1, NoEncoding())  # never connects
    kafka.producer = Producer()  # type: ignore[assignment]
    created: list[str] = []
    monkeypatch.setattr(kafka, "_ensure", created.append)  # (prepare() calls it too)
    worker = driver.worker(claimed_path(settings), {"kafka": kafka})
    ex = execution(0)
    message = driver.send(topics.executions, ex, key=ex.routing_key, partition=0)
    driver.turn_until(lambda: len(outcomes(driver, topics)) == 1, worker)
    assert outcomes(driver, topics)[0].status is OutcomeStatus.succeeded
    assert set(created) == {kafka.topic_for(ex)}
    [(_, _, value, _)] = kafka.producer.sent  # type: ignore[attr-defined]
    assert value == message.value()
    kafka._closed.set()


def test_a_finished_run_frees_its_slot_before_its_outcome_commits(
    driver: Driver, settings: KadenceSettings, topics: Topics, gates: Gates
) -> None:
    """The slots bound the invocations going at once: a run that has finished but whose
    outcome has not committed yet (the commit failed and is retried) does not keep the next
    due execution waiting, and the tenant's cap counts it as done."""
    one = settings.model_copy(update={"worker_concurrency": 1})
    worker = driver.worker(one, {"kafka": gates})
    start(driver, topics, worker, gates, n=1)
    driver.cluster.faults.fail("commit_transaction", abort_error(), times=3)
    gates.gate(execution(0).execution_id).set()
    driver.turn_until(lambda: worker.inflight.running == 0, worker)
    assert execution(0).execution_id in worker.runs  # its outcome has not committed yet
    assert outcomes(driver, topics) == []
    assert worker.inflight.by_tenant == {}
    nxt = execution(1)
    driver.send(topics.executions, nxt, key=nxt.routing_key, partition=1)
    driver.turn_until(lambda: nxt.execution_id in gates.gates, worker)
    assert worker.inflight.running == 1
    driver.turn_until(lambda: len(outcomes(driver, topics)) == 1, worker)
    assert [o.execution_id for o in outcomes(driver, topics)] == [execution(0).execution_id]
