"""Kafka-topic runs delivered in the worker's own transaction: exactly once to the tenant.

A due execution whose target `Delivers` (the Kafka topic target, its topic known to exist) is
not claimed under a lease. The worker writes the tenant's record, the run's outcome
(`succeeded`) and the consumer offsets that pass the execution in one transaction, so all of it
commits or none of it does:
- the worker dies before the commit: nothing is visible, the offsets did not move, and the
  partition's next owner reads the execution again and delivers it;
- a worker cut off from its group (SIGSTOP, a network partition) cannot commit once the group
  has moved on: its offsets carry the group generation, so the new owner's delivery is the
  only one;
- there is no lease, so the reaper never redelivers it.
A `read_committed` consumer of the tenant's topic therefore sees each execution once.

When this cannot hold, the run takes the claimed path (at least once, with the same execution
id as idempotency key), and says so in the log:
- its topic is not known to exist `TOPIC_WAIT_MS` after the due time (the target creates it
  when the execution is read, ahead of its due time; the claimed path creates it or reports
  why not), unless the broker has not answered yet (the creation is under way, or its last try
  timed out or found no broker: the claimed path would need the broker as much, and a run
  claimed in an outage is redelivered when its lease runs out): then it waits up to
  `UNANSWERED_WAIT_MS`;
- its transaction aborted `MAX_ABORTS` times (a broker that keeps failing it);
- the offset commit cannot name the held executions before it (offsets.METADATA_LIMIT): the
  partition's next owner would read it again.
A record the broker refuses for good (over the topic's size limit, a topic the tenant may not
write) aborts its transaction: the others go back to the inbox and are delivered in the next
one, and the refused run is reported `failed` (retryable) without its record, so the job's
retry policy and dead letter take over. A record over Kadence's own limit (kadence/sizing.py) is
never produced: its run is reported `failed`, not retryable, and dead-lettered at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from confluent_kafka import KafkaError, KafkaException, Message

from kadence.clock import Clock
from kadence.envelope import TOO_LARGE, TOO_LARGE_FIX
from kadence.errors import RecordTooLargeError
from kadence.models import ExecutionRequested
from kadence.settings import KadenceSettings
from kadence.targets import Delivers, Delivery, Result, Stop, Target
from streams.worker.active import ActiveRun, Delivered, TxnWork
from streams.worker.event_age import too_old
from streams.worker.holding import claim
from streams.worker.inbox import Inbox, Item
from streams.worker.metrics import WorkerMetrics
from streams.worker.outcome_bytes import DeliveredOutcomes
from streams.worker.summary import RunSummary

log = logging.getLogger(__name__)
TOPIC_WAIT_MS = 5_000
UNANSWERED_WAIT_MS = 60_000
"""How long after its due time a run waits for a broker that does not answer whether its topic
exists, before it takes the claimed path anyway."""
MAX_ABORTS = 5
REFUSED = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError.INVALID_RECORD,
        KafkaError.POLICY_VIOLATION,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.INVALID_REQUIRED_ACKS,
    }
)
"""Errors of one record that no retry of the same record fixes."""
NO_STOP = Stop()
"""A delivery is never stopped (it has no lease to lose and ends with its transaction): its
run shares this one instead of building an event and a lock each."""


class Deliveries:
    """Which due runs go in the transaction, and what becomes of them."""

    def __init__(
        self,
        settings: KadenceSettings,
        targets: dict[str, Target],
        *,
        inbox: Inbox,
        clock: Clock,
        metrics: WorkerMetrics,
        summary: RunSummary,
        outcomes: DeliveredOutcomes,
    ) -> None:
        self.inbox = inbox
        self.outcomes = outcomes
        self.clock = clock
        self.metrics = metrics
        self.summary = summary
        self.per_txn = settings.worker_deliveries_per_transaction
        inbox.max_leaseless = self.per_txn  # more would only be held back again (`route`)
        self._delivers: dict[str, Callable[..., Delivery | None]] = {}
        self._unanswered: dict[str, Callable[[ExecutionRequested], bool]] = {}
        if settings.worker_kafka_exactly_once:
            for kind, target in targets.items():
                if isinstance(target, Delivers):
                    self._delivers[kind] = target.delivery
                    self._unanswered[kind] = target.unanswered
        self._waiting: set[str] = set()
        """Execution ids past TOPIC_WAIT_MS that wait for the broker (said once in the log)."""
        self._aborts: dict[str, int] = {}
        """execution id -> transactions with its record that did not commit."""
        self._refused: dict[str, Result] = {}
        """execution id -> why the broker refused its record for good (reported next time)."""

    def takes(self, ex: ExecutionRequested) -> bool:
        """Whether `ex`, just read, is to be delivered in a transaction when due (then it is
        never claimed ahead: `Item.leaseless`)."""
        return ex.target.kind in self._delivers

    def prepare(self, item: Item) -> None:
        """Build `item`'s record and its outcome while it waits for its due time (the record
        when its topic is known)."""
        if not item.leaseless:
            return
        ex = item.execution
        item.outcome = self.outcomes.prepare(ex)
        try:
            item.prepared = self._delivers[ex.target.kind](ex, item.record)
        except Exception:  # the turn at its due time tries again, and says what failed
            item.prepared = None

    def _claimed_instead(self, item: Item) -> None:
        item.leaseless = False
        if item.head is not None:  # a batch's executions move together
            item.head.leaseless = False
            for other in item.head.batch or ():
                other.leaseless = False

    def route_batch(self, head: Item, txn: TxnWork, now: int) -> bool:
        """Put every execution of the due batch `head` holds in `txn`, or the batch back in the
        inbox (one of them waits for its topic); False: they are to be claimed, all together.
        A batch is never split between transactions (its offset is passed once all of it is):
        it may take `txn` past `per_txn` by less than a batch."""
        assert head.batch is not None
        taken = [self._take(item, now) for item in head.batch]
        if any(t is None for t in taken):
            self._claimed_instead(head.batch[0])
            return False
        if any(not isinstance(t, Delivered) for t in taken):
            for t in taken:  # a refusal to report stays for when the batch goes
                if isinstance(t, Delivered) and t.refused is not None:
                    self._refused[t.run.execution.execution_id] = t.refused
            self.inbox.hold(head)
            return True
        txn.deliveries += [t for t in taken if isinstance(t, Delivered)]
        return True

    def route(self, item: Item, txn: TxnWork, now: int) -> bool:
        """Put due `item` in `txn` with its record, or back in the inbox (its topic is not
        known yet, or `txn` is full); False: it is to be claimed."""
        taken = self._take(item, now)
        if taken is None:
            return False
        if isinstance(taken, Delivered) and len(txn.deliveries) < self.per_txn:
            txn.deliveries.append(taken)
        else:
            self.inbox.hold(item)
        return True

    def _take(self, item: Item, now: int) -> Delivered | bool | None:
        ex = item.execution
        if not item.leaseless:
            return None
        run = claim(item, now, NO_STOP)
        refused = self._refused.pop(ex.execution_id, None)
        if refused is None and ex.start_by is not None:
            refused = too_old(ex, now)  # past the job's max_event_age_ms: not delivered
        if refused is not None:
            return Delivered(run, None, refused)
        try:
            found = item.prepared or self._delivers[ex.target.kind](ex, item.record)
        except RecordTooLargeError as exc:  # no retry can make it fit: failed for good
            too_large = Result.failed(TOO_LARGE, f"{exc}; {TOO_LARGE_FIX}", retryable=False)
            return Delivered(run, None, too_large)
        except Exception:  # a target bug must not kill the worker: the claimed path reports it
            log.exception("target %s: delivery failed for %s", ex.target.kind, ex.execution_id)
            self._claimed_instead(item)
            return None
        if found is not None:
            if self._waiting:  # (empty but in an outage: nothing to look up per delivery)
                self._waiting.discard(ex.execution_id)
            return Delivered(run, found)
        return self._waits(item, now)

    def _waits(self, item: Item, now: int) -> bool | None:
        """`item`'s topic is not known to exist: True while it waits for it, None (claimed) once
        the broker answered and the topic is still not known TOPIC_WAIT_MS after its due time,
        or after UNANSWERED_WAIT_MS whatever the broker does."""
        ex, late = item.execution, now - item.due_ms
        if late < TOPIC_WAIT_MS:
            return True
        if late < UNANSWERED_WAIT_MS and self._no_answer(ex):
            if ex.execution_id not in self._waiting and len(self._waiting) < 100_000:
                self._waiting.add(ex.execution_id)
                log.warning(
                    "%s: its topic is not known to exist %d ms after its due time and the "
                    "broker has not answered; it waits for the broker (up to %d ms), not claimed",
                    ex.execution_id,
                    late,
                    UNANSWERED_WAIT_MS,
                )
            return True
        self._waiting.discard(ex.execution_id)
        self._claimed_instead(item)
        log.warning(
            "%s: its topic is not known to exist %d ms after its due time; it runs at least "
            "once (claimed), which creates the topic or reports why not",
            ex.execution_id,
            late,
        )
        return None

    def _no_answer(self, ex: ExecutionRequested) -> bool:
        try:
            return self._unanswered[ex.target.kind](ex)
        except Exception:  # a target bug: the claimed path reports it
            log.exception("target %s: unanswered failed for %s", ex.target.kind, ex.execution_id)
            return False

    def unnamed(self, txn: TxnWork, offsets: Mapping[int, tuple[int, str]]) -> bool:
        """Deliveries the offset commit would not pass safely (executions held before them
        that the commit cannot name: the next owner would read them again) go back and are
        claimed instead. Whether there were any."""
        unsafe = []
        for d in txn.deliveries:
            item = d.run.item
            committed, named = offsets.get(item.partition, (0, ""))
            if not named and committed <= item.offset:
                unsafe.append(d)
        for d in unsafe:
            log.info(
                "%s: the offset commit cannot name what is held before it; it runs at least "
                "once (claimed)",
                d.run.execution.execution_id,
            )
            txn.deliveries.remove(d)
            self._claimed_instead(d.run.item)
            self.inbox.hold(d.run.item)
        return bool(unsafe)

    def produce(
        self, d: Delivered, send: Callable[..., None], outcome: Callable[[ActiveRun], None]
    ) -> None:
        """Queue `d`'s record (`send`) and its `succeeded` outcome (`outcome`: the worker
        writes it, alone or in a batch) in the open transaction, stamping its hand-off; a
        record refused at once is reported failed in the same transaction instead (by the
        caller: `d.refused`)."""
        d.run.started_ms = self.clock.now_ms()
        record = d.delivery
        if record is None:
            return

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                d.error = err

        try:
            send(
                record.topic, None, record.key, record.value, record.headers,
                on_delivery=on_delivery,
            )  # fmt: skip
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None or error.code() not in REFUSED:
                raise
            d.delivery = None
            d.refused = _refusal(record.topic, error)
            return
        outcome(d.run)

    def committed(self, done: list[Delivered]) -> None:
        """The transaction of `done` committed: their records are visible now."""
        visible = self.clock.now_ms()
        ok: dict[str, tuple[list[float], list[float]]] = {}
        aborts, started = self._aborts, []
        for d in done:
            run = d.run
            ex, due = run.item.execution, run.item.due_ms
            if aborts:  # (empty unless transactions aborted: nothing to look up per run)
                aborts.pop(ex.execution_id, None)
            lateness_s = max(0, run.started_ms - due) / 1000
            started.append(lateness_s)
            if d.refused is None:
                pair = ok.get(ex.tenant)
                if pair is None:
                    pair = ok[ex.tenant] = ([], [])
                pair[0].append(lateness_s)
                pair[1].append(max(0, visible - due) / 1000)
            else:
                self.metrics.started(ex.tenant, lateness_s)
                self.metrics.finished(ex.tenant, d.refused.status.value)
                self.summary.finished(d.refused.status.value)
        self.summary.started_all(started)
        succeeded = 0
        for tenant, (late, seen) in ok.items():
            self.metrics.delivered(tenant, late, seen)
            succeeded += len(late)
        if succeeded:
            self.summary.finished("succeeded", succeeded)

    def failed(self, done: list[Delivered]) -> None:
        """Their transaction did not commit: they go back to the inbox. A record the broker
        refused for good is reported failed next time; the rest are delivered again (after
        MAX_ABORTS, claimed)."""
        for d in done:
            eid = d.run.execution.execution_id
            if d.error is not None and d.error.code() in REFUSED and d.delivery is not None:
                self._refused[eid] = _refusal(d.delivery.topic, d.error)
                self.inbox.hold(d.run.item)
                continue
            aborts = self._aborts[eid] = self._aborts.get(eid, 0) + 1
            if aborts >= MAX_ABORTS:
                self._claimed_instead(d.run.item)
            self.inbox.hold(d.run.item)
            if aborts == MAX_ABORTS:
                log.warning(
                    "%s: %d transactions with its record did not commit; it runs at least "
                    "once (claimed)",
                    eid,
                    aborts,
                )
        if len(self._aborts) > 100_000:  # a long outage: forget the oldest counts
            self._aborts = dict(list(self._aborts.items())[-50_000:])


def _refusal(topic: str, error: KafkaError) -> Result:
    return Result.failed("KafkaError", f"{topic}: {error.str()}", retryable=True)
