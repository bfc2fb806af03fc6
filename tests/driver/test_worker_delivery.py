"""Kafka-topic runs delivered in the worker's own transaction (streams/worker/delivering.py), on
the in-memory cluster: the tenant's record, the outcome and the offsets commit together or not
at all, so a read_committed reader of the tenant's topic sees each execution once, whatever
happens to the worker (an aborted commit, a rebalance mid-commit, a crash mid-commit)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import (
    ExecutionOutcome,
    ExecutionRequested,
    KafkaTarget,
    OutcomeStatus,
)
from kadence.settings import KadenceSettings
from kadence.targets import Delivery, Result, Stop
from kadence.topics import OUTCOMES, Topics
from streams.worker.delivering import TOPIC_WAIT_MS, UNANSWERED_WAIT_MS
from streams.worker.holding import claim
from streams.worker.item import Item
from streams.worker.records import delivered_outcome, outcome_of
from testkit.driver import START_MS, Driver, abort_error
from testkit.driver.leases import lease_facts

TTL_MS = 3_000
GROUP = "drv.workers"
TENANT_TOPIC = "drv.to.acme.t"


class Topic:
    """A Kafka-topic target that `Delivers`: its record is the bytes the worker read. Called
    (the claimed path) it only counts the call."""

    def __init__(self, *, known: bool = True, answered: bool = True) -> None:
        self.known = known
        self.answered = answered
        """False: the broker has not answered whether the topic exists (an outage)."""
        self.calls: list[str] = []
        self.built = 0
        """Records built (`delivery` called with the topic known)."""

    def delivery(self, ex: ExecutionRequested, record: bytes | None) -> Delivery | None:
        self.built += self.known
        if not self.known:
            return None
        assert record is not None
        target = ex.target
        assert isinstance(target, KafkaTarget)
        topic = f"drv.to.{ex.tenant}.{target.topic}"
        return Delivery(topic, ex.key.encode(), record, [("kadence-execution-id", b"x")])

    def unanswered(self, ex: ExecutionRequested) -> bool:
        return not self.known and not self.answered

    def __call__(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        self.calls.append(ex.execution_id)
        return Result.ok()


@pytest.fixture(params=["snapshot", "events"])
def settings(request: pytest.FixtureRequest) -> KadenceSettings:
    return KadenceSettings(
        namespace="drv", partitions=2, execution_partitions=2, lease_format=request.param
    )


@pytest.fixture
def topics(driver: Driver, settings: KadenceSettings) -> Topics:
    found = driver.provision(settings)
    driver.create_topic(TENANT_TOPIC)
    return found


def execution(job: str = "j1", *, due_in_ms: int = 0, topic: str = "t") -> ExecutionRequested:
    due = ms_to_datetime(START_MS + due_in_ms)
    return ExecutionRequested(
        execution_id=f"acme/{job}@2026-12-01T08:00:00.000Z",
        tenant="acme",
        job_id=job,
        definition_version=1,
        nominal_at=due,
        due_at=due,
        dispatched_at=due - timedelta(seconds=1),
        target=KafkaTarget(topic=topic),
        timeout_ms=600_000,
        lease_ttl_ms=TTL_MS,
    )


def send(driver: Driver, topics: Topics, ex: ExecutionRequested, partition: int = 0) -> bytes:
    message = driver.send(topics.executions, ex, key=ex.routing_key, partition=partition)
    value = message.value()
    assert value is not None
    return value


def delivered(driver: Driver) -> list[bytes | None]:
    """What a read_committed consumer of the tenant's topic sees."""
    return [m.value() for m in driver.messages(TENANT_TOPIC)]


def outcomes(driver: Driver, topics: Topics) -> list[ExecutionOutcome]:
    found = driver.records(topics.outcomes, OUTCOMES)
    return [o for o in found if isinstance(o, ExecutionOutcome)]


def test_a_kafka_run_is_its_record_its_outcome_and_its_offsets_in_one_transaction(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    target = Topic()
    worker = driver.worker(settings, {"kafka": target})
    value = send(driver, topics, execution())
    driver.turn(worker)
    assert delivered(driver) == [value]  # the bytes the worker read, not encoded again
    [outcome] = outcomes(driver, topics)
    assert outcome.status is OutcomeStatus.succeeded
    assert outcome.started_at == outcome.finished_at == ms_to_datetime(START_MS)
    assert driver.cluster.committed(GROUP)[(topics.executions, 0)] == 1
    assert lease_facts(driver.cluster, topics) == []  # no lease: the reaper has nothing to do
    assert (target.calls, worker.runs) == ([], {})
    visible = worker.metrics.visible_lateness.labels("acme")
    assert visible._sum.get() == 0.0


def test_an_aborted_commit_shows_nothing_and_the_next_one_delivers_it_once(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    worker = driver.worker(settings, {"kafka": Topic()})
    send(driver, topics, execution())
    driver.cluster.faults.fail("commit_transaction", abort_error())
    driver.turn(worker)
    assert (delivered(driver), outcomes(driver, topics)) == ([], [])
    assert driver.cluster.committed(GROUP).get((topics.executions, 0), 0) == 0
    driver.turn(worker)
    assert len(delivered(driver)) == 1
    assert [o.status for o in outcomes(driver, topics)] == [OutcomeStatus.succeeded]


def test_a_worker_fenced_by_a_rebalance_mid_commit_delivers_nothing_and_the_new_owner_once(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """The zombie: the group moves w1's partition on while w1 commits; its offsets carry the
    old generation, so its record and outcome never become visible; w2 delivers the run."""
    t1, t2 = Topic(), Topic()
    w1 = driver.worker(settings, {"kafka": t1}, instance_id="w1")
    w2 = driver.worker(settings, {"kafka": t2}, instance_id="w2")
    driver.turn(w1, w2)
    assert [tp.partition for tp in w1.consumer.assignment()] == [0]
    driver.cluster.faults.on(
        "send_offsets_to_transaction",
        lambda: driver.cluster.kick(GROUP, w1.worker_id),
        client=w1.worker_id,
    )
    value = send(driver, topics, execution(), partition=0)
    driver.turn(w1)
    assert delivered(driver) == []
    driver.turn(w2, w1, w2, w1, w2)
    assert delivered(driver) == [value]
    [outcome] = outcomes(driver, topics)
    assert outcome.worker_id == w2.worker_id


def test_a_worker_killed_mid_commit_leaves_nothing_and_the_next_owner_delivers_once(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """kill -9 while the commit is on its way: the broker aborts the open transaction, the
    partition's next owner reads the execution again and delivers it; the dead worker's
    commit, should it still arrive, is fenced."""
    w1 = driver.worker(settings, {"kafka": Topic()}, instance_id="w1")
    hang = driver.cluster.faults.hang("commit_transaction", client=w1.worker_id)
    value = send(driver, topics, execution())
    turning = threading.Thread(target=driver.turn, args=(w1,), daemon=True)
    turning.start()
    hang.entered.wait(5)
    driver.crash(w1)
    w2 = driver.worker(settings, {"kafka": Topic()}, instance_id="w2")
    driver.turn(w2, times=3)
    assert delivered(driver) == [value]
    hang.release()
    turning.join(5)
    assert delivered(driver) == [value]
    assert [o.worker_id for o in outcomes(driver, topics)] == [w2.worker_id]


def test_a_record_the_broker_refuses_is_reported_failed_and_the_others_are_delivered(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    worker = driver.worker(settings, {"kafka": Topic()})
    value = send(driver, topics, execution("j1"))
    send(driver, topics, execution("j2", topic="gone"))
    driver.turn(worker, times=2)
    assert delivered(driver) == [value]
    by_job = {o.job_id: o for o in outcomes(driver, topics)}
    assert by_job["j1"].status is OutcomeStatus.succeeded
    refused = by_job["j2"]
    assert (refused.status, refused.retryable) == (OutcomeStatus.failed, True)
    assert refused.error is not None and "drv.to.acme.gone" in refused.error.message


def test_an_execution_read_ahead_is_not_claimed_ahead_and_is_delivered_when_due(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    target = Topic()
    worker = driver.worker(settings, {"kafka": target})
    send(driver, topics, execution(due_in_ms=1_000))
    driver.turn(worker, times=2)
    assert (delivered(driver), worker.holdings.claimed) == ([], {})
    assert target.built == 1  # built while it waits: its due instant only produces it
    assert lease_facts(driver.cluster, topics) == []
    driver.advance(999)
    driver.turn(worker)
    assert delivered(driver) == []  # never early
    driver.advance(1)
    driver.turn(worker)
    assert len(delivered(driver)) == 1
    assert target.built == 1
    [outcome] = outcomes(driver, topics)
    assert outcome.started_at == ms_to_datetime(START_MS + 1_000)


def test_a_run_whose_topic_is_not_known_waits_for_it_then_runs_claimed(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    target = Topic(known=False)
    worker = driver.worker(settings, {"kafka": target})
    send(driver, topics, execution())
    driver.turn(worker, times=3)
    assert target.calls == []  # waiting for its topic
    target.known = True
    driver.turn(worker)
    assert len(delivered(driver)) == 1
    late = Topic(known=False)
    other = driver.worker(settings, {"kafka": late}, instance_id="late")
    driver.turn(worker, other)
    ex = execution("j2")
    send(driver, topics, ex, partition=1)
    driver.advance(TOPIC_WAIT_MS)
    driver.turn_until(lambda: bool(late.calls), other)
    assert late.calls == [ex.execution_id]  # the claimed path creates the topic or says why


def test_a_run_whose_topic_the_broker_has_not_answered_for_waits_past_the_topic_wait(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """A network outage while its topic is prepared: the claimed path would need the broker as
    much, and a run claimed in an outage is delivered again when its lease runs out (a
    duplicate); so it waits, and goes out exactly once when the broker answers."""
    target = Topic(known=False, answered=False)
    worker = driver.worker(settings, {"kafka": target})
    send(driver, topics, execution())
    driver.advance(TOPIC_WAIT_MS + 1_000)
    driver.turn(worker, times=3)
    assert target.calls == [] and delivered(driver) == []
    target.known = True
    driver.turn(worker)
    assert len(delivered(driver)) == 1 and target.calls == []
    assert lease_facts(driver.cluster, topics) == []
    # a broker that never answers: claimed in the end, which reports what it finds
    never = Topic(known=False, answered=False)
    other = driver.worker(settings, {"kafka": never}, instance_id="never")
    driver.turn(worker, other)
    ex = execution("j2", due_in_ms=TOPIC_WAIT_MS + 1_000)  # due now
    send(driver, topics, ex, partition=1)
    driver.advance(UNANSWERED_WAIT_MS - 1_000)
    driver.turn(worker, other, times=3)
    assert never.calls == []
    driver.advance(1_000)
    driver.turn_until(lambda: bool(never.calls), other)
    assert never.calls == [ex.execution_id]


def test_without_exactly_once_the_run_is_claimed_under_a_lease(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    target = Topic()
    off = settings.model_copy(update={"worker_kafka_exactly_once": False})
    worker = driver.worker(off, {"kafka": target})
    send(driver, topics, execution())
    driver.turn_until(lambda: bool(target.calls), worker)
    assert delivered(driver) == []
    assert lease_facts(driver.cluster, topics) != []


def test_a_delivered_outcome_built_without_validation_encodes_as_the_validated_one() -> None:
    """The burst path builds its outcomes with `model_construct`: the bytes must be those of
    the validated model (the scheduler decodes them)."""
    ex = execution(due_in_ms=250)
    run = claim(Item(0, 7, ex, START_MS + 250), START_MS)
    run.started_ms = START_MS + 251
    codec = Codec()
    fast = codec.encode(delivered_outcome(run, "w"))
    checked = codec.encode(outcome_of(run, Result.ok(), run.started_ms, "w"))
    assert fast == checked
    assert codec.decode(fast) == ExecutionOutcome.model_validate(
        delivered_outcome(run, "w").model_dump()
    )


def test_scattered_held_executions_are_named_and_a_takeover_delivers_each_once(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """Every other execution on the partition due later (frequent jobs each dispatching their
    look-ahead together): the runs held after the due ones are too many for a `k1` list, and
    were claimed instead (at least once, a claim transaction and a lease each). The `k2`
    bitmap names them: delivered in the transaction, and the next owner delivers the rest."""
    first = Topic()
    w1 = driver.worker(settings, {"kafka": first}, instance_id="w1")
    n = 1_600
    for i in range(n):
        send(driver, topics, execution(f"j{i}", due_in_ms=0 if i % 2 == 0 else 10_000))
    driver.turn_until(lambda: len(delivered(driver)) == n // 2, w1)
    driver.turn(w1)
    assert first.calls == []  # none claimed
    _, meta = driver.cluster.group(GROUP).offsets[(topics.executions, 0)]
    assert meta is not None and meta.startswith("k2:")
    driver.crash(w1)
    second = Topic()
    w2 = driver.worker(settings, {"kafka": second}, instance_id="w2")
    driver.advance(10_000)
    driver.turn_until(lambda: len(delivered(driver)) >= n, w2)
    driver.turn(w2, times=2)
    values = delivered(driver)
    assert len(values) == n and len(set(values)) == n  # each once
    assert second.calls == []


def test_a_turn_takes_from_the_inbox_only_what_one_transaction_delivers(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """With more due than one transaction delivers, the rest stay in the inbox untouched (not
    taken out and held back again: with 50 000 due that churn cost a third of the worker's
    CPU), tenants' turns stay fair, and every run is delivered once over the next turns."""
    settings = settings.model_copy(update={"worker_deliveries_per_transaction": 3})
    worker = driver.worker(settings, {"kafka": Topic()})
    held_back: list[str] = []
    hold = worker.inbox.hold

    def counted(item: Item) -> None:
        held_back.append(item.execution.job_id)
        hold(item)

    worker.inbox.hold = counted  # type: ignore[method-assign]
    for n in range(8):
        send(driver, topics, execution(f"j{n}"))
    driver.turn(worker)
    assert (len(delivered(driver)), held_back) == (3, [])
    driver.turn(worker)
    driver.turn(worker)
    assert held_back == []
    assert sorted(o.job_id for o in outcomes(driver, topics)) == [f"j{n}" for n in range(8)]
    assert len(delivered(driver)) == 8
