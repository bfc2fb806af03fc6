"""A leaseless execution is made ready while it waits for its due time
(streams/worker/delivering.py, `Deliveries.prepare`): its tenant record and its `succeeded`
outcome, so the due turn, the busiest in a burst, only produces and joins. No broker: the
Kafka-topic target here is a stand-in that builds the record as the real one would."""

from __future__ import annotations

from kadence.clock import FakeClock, datetime_to_ms
from kadence.codec import Codec
from kadence.models import ExecutionRequested
from kadence.settings import KadenceSettings
from kadence.targets import Delivery, Stop, Target
from streams.worker.active import ActiveRun, TxnWork
from streams.worker.delivering import Deliveries
from streams.worker.inbox import Inbox, Item
from streams.worker.metrics import WorkerMetrics
from streams.worker.outcome_bytes import DeliveredOutcomes
from streams.worker.records import delivered_outcome
from streams.worker.summary import RunSummary
from tests.driver.test_worker_delivery import execution

CODEC = Codec()
SETTINGS = KadenceSettings(namespace="prep", partitions=5)


class Topic:
    """The Kafka-topic target's part the worker calls: the tenant's record, its topic known."""

    def delivery(self, ex: ExecutionRequested, record: bytes | None) -> Delivery | None:
        return Delivery(f"to.{ex.tenant}", ex.tenant.encode(), ex.payload, [])

    def unanswered(self, ex: ExecutionRequested) -> bool:
        return False


def made(outcomes: DeliveredOutcomes, clock: FakeClock, targets: dict[str, Target]) -> Deliveries:
    """The worker's `Deliveries` over `targets` (none: every run is claimed)."""
    return Deliveries(
        SETTINGS,
        targets,
        inbox=Inbox(),
        clock=clock,
        metrics=WorkerMetrics(),
        summary=RunSummary(clock.now_ms()),
        outcomes=outcomes,
    )


def test_a_leaseless_execution_is_read_with_its_record_and_outcome_made() -> None:
    ex = execution()
    outcomes = DeliveredOutcomes(CODEC, "w1", SETTINGS)
    clock = FakeClock(datetime_to_ms(ex.due_at) - 30_000)
    deliveries = made(outcomes, clock, {"kafka": Topic()})  # type: ignore[dict-item]
    item = Item(0, 7, ex, datetime_to_ms(ex.due_at), leaseless=deliveries.takes(ex))
    deliveries.prepare(item)
    assert item.prepared is not None and item.outcome is not None
    clock.set(datetime_to_ms(ex.due_at) + 3)
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
    deliveries = made(outcomes, clock, {})
    ex = execution()
    item = Item(0, 7, ex, datetime_to_ms(ex.due_at), leaseless=deliveries.takes(ex))
    deliveries.prepare(item)
    assert not item.leaseless and item.outcome is None and item.prepared is None
    run = ActiveRun(item, Stop(), started_ms=1, lease_expires_ms=1, next_renew_ms=1)
    assert outcomes.value(run) is not None  # still written at its start when asked
