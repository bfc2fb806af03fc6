"""A leaseless execution is made ready while it waits for its due time
(streams/worker/delivering.py, `Deliveries.prepare`): its tenant record and its `succeeded`
outcome, so the due turn, the busiest in a burst, only produces and joins. No broker: the
Kafka-topic target here is a stand-in that builds the record as the real one would."""

from __future__ import annotations

from datetime import UTC, datetime

from kadence.clock import FakeClock, datetime_to_ms
from kadence.codec import Codec
from kadence.models import ExecutionRequested, KafkaTarget, TriggerKind
from kadence.settings import KadenceSettings
from kadence.targets import Delivery, Stop
from streams.worker.active import ActiveRun, TxnWork
from streams.worker.delivering import Deliveries
from streams.worker.inbox import Inbox, Item
from streams.worker.metrics import WorkerMetrics
from streams.worker.outcome_bytes import DeliveredOutcomes
from streams.worker.records import delivered_outcome
from streams.worker.summary import RunSummary

CODEC = Codec()
SETTINGS = KadenceSettings(namespace="prep", partitions=5)
DUE = datetime(2026, 12, 6, 11, 0, tzinfo=UTC)


class Topic:
    """The Kafka-topic target's part the worker calls: the tenant's record, its topic known."""

    def delivery(self, ex: ExecutionRequested, record: bytes | None) -> Delivery | None:
        return Delivery(f"to.{ex.tenant}", ex.tenant.encode(), ex.payload, [])

    def unanswered(self, ex: ExecutionRequested) -> bool:
        return False


def execution() -> ExecutionRequested:
    return ExecutionRequested(
        execution_id="t1/j1@2026-12-06T11:00:00Z",
        tenant="t1",
        job_id="j1",
        definition_version=1,
        attempt=1,
        delivery=1,
        trigger=TriggerKind.schedule,
        nominal_at=DUE,
        due_at=DUE,
        dispatched_at=DUE,
        target=KafkaTarget(topic="out"),
        payload=b"{}",
        timeout_ms=1_000,
        lease_ttl_ms=1_000,
    )


def test_a_leaseless_execution_is_read_with_its_record_and_outcome_made() -> None:
    outcomes = DeliveredOutcomes(CODEC, "w1", SETTINGS)
    clock = FakeClock(datetime_to_ms(DUE) - 30_000)
    deliveries = Deliveries(
        SETTINGS,
        {"kafka": Topic()},  # type: ignore[dict-item]
        inbox=Inbox(),
        clock=clock,
        metrics=WorkerMetrics(),
        summary=RunSummary(clock.now_ms()),
        outcomes=outcomes,
    )
    ex = execution()
    item = Item(0, 7, ex, datetime_to_ms(DUE), leaseless=deliveries.takes(ex))
    deliveries.prepare(item)
    assert item.prepared is not None and item.outcome is not None
    clock.set(datetime_to_ms(DUE) + 3)
    txn = TxnWork()
    assert deliveries.route(item, txn, clock.now_ms())
    (done,) = txn.deliveries
    assert done.delivery is item.prepared
    done.run.started_ms = clock.now_ms()
    found = outcomes.value(done.run)
    assert found is not None
    partition, value = found
    assert CODEC.decode(value) == delivered_outcome(done.run, "w1")
    assert partition == item.outcome[0]


def test_a_claimed_execution_is_not_made_ready() -> None:
    outcomes = DeliveredOutcomes(CODEC, "w1", SETTINGS)
    clock = FakeClock(0)
    deliveries = Deliveries(
        SETTINGS,
        {},
        inbox=Inbox(),
        clock=clock,
        metrics=WorkerMetrics(),
        summary=RunSummary(0),
        outcomes=outcomes,
    )
    ex = execution()
    item = Item(0, 7, ex, datetime_to_ms(DUE), leaseless=deliveries.takes(ex))
    deliveries.prepare(item)
    assert not item.leaseless and item.outcome is None and item.prepared is None
    run = ActiveRun(item, Stop(), started_ms=1, lease_expires_ms=1, next_renew_ms=1)
    assert outcomes.value(run) is not None  # still written at its start when asked
