"""The worker loop: read executions, claim due ones under a lease, run them, report outcomes.

One thread does all Kafka work, in short transactions of one transactional producer. Every
transaction that claims, finishes or renews writes one LeaseSnapshot listing every run the
worker holds by (executions partition, offset) (`holding`):
- a claim is the run listed, plus the consumer offsets, committed with the group metadata: a
  worker fenced by a rebalance cannot commit it, and only a committed claim runs;
- an execution read before its due time is claimed up to half its lease TTL ahead (at most
  `worker_claim_ahead_max` at once) and waits in memory: at its due instant it starts without
  a commit, still in tenant fairness order; a revocation drops it;
- a snapshot at least every ttl/3 renews every listed lease; it counts once it commits;
- the outcome and the snapshot without the run go in one transaction (release by absence), so
  the reaper never redelivers an execution whose outcome was written.
With `lease_format=events` it writes the previous release's LeaseEvents (acquired, renewed,
released) instead, and claims only when due.
Invocations run on a bounded thread pool (`worker_concurrency` slots); a run its target starts
without a thread (HTTP, SQS, async handlers on an event loop; a Kafka produce) takes no slot, so
a burst starts at once, up to `worker_async_max_in_flight` and what one snapshot is sure to
list (`holding.fits`). A run whose lease expires before a renewal commits is stopped
(self-fencing) and reports `lease_lost`, which the scheduler records but does not apply.
A turn's cost does not grow with the runs in flight (streams/worker/inflight.py): finished runs
are pushed to the loop, renewals and expiries come off a heap of deadlines.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from confluent_kafka import KafkaException, TopicPartition

from kadence import batches
from kadence.clock import Clock
from kadence.codec import Codec
from kadence.entry_templates import EntryReader
from kadence.errors import DecodeError
from kadence.headers import Headers, headers_for
from kadence.metrics import LagTracker
from kadence.models import (
    ExecutionBatch,
    ExecutionOutcome,
    ExecutionRequested,
    ExecutionRevoked,
    OutcomeStatus,
    WireModel,
)
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.targets import Prepares, Result, Target
from kadence.topics import EXECUTIONS, Topics, workers_group
from streams.kafkaio.clients import Clients, KafkaClients
from streams.kafkaio.ports import ConsumerLike, MessageLike
from streams.kafkaio.reading import ready, usable
from streams.kafkaio.retry import retrying
from streams.kafkaio.session import Outcome, TransactionalSession
from streams.worker.active import ActiveRun, TxnWork
from streams.worker.backlog import Backlog
from streams.worker.delivering import Deliveries
from streams.worker.draining import drain
from streams.worker.holding import Holdings, claim
from streams.worker.inbox import Fairness, Inbox, Item, has_rate_limit
from streams.worker.inflight import InFlight
from streams.worker.invoker import Invoker
from streams.worker.item import read_after
from streams.worker.metrics import WorkerMetrics
from streams.worker.outcome_batches import OutcomeBatches
from streams.worker.outcome_bytes import DeliveredOutcomes
from streams.worker.records import outcome_of, rejected
from streams.worker.summary import RunSummary

log = logging.getLogger(__name__)
OFFSET_COMMIT_INTERVAL_MS = 1_000


class Worker:
    def __init__(
        self,
        settings: KadenceSettings,
        clock: Clock,
        targets: dict[str, Target],
        metrics: WorkerMetrics | None = None,
        clients: Clients | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.targets = targets
        self._preparers: dict[str, Callable[[ExecutionRequested], None]] = {}
        for kind, target in targets.items():
            if isinstance(target, Prepares):
                self._preparers[kind] = target.prepare
        self.codec = Codec()
        self._entries = EntryReader(self.codec)
        """A batch's executions read from their job's kept parts (kadence/entry_templates.py)."""
        self.topics = Topics(settings)
        self.metrics = metrics or WorkerMetrics()
        self.worker_id = f"{settings.namespace}.worker.{settings.instance_id}"
        self.inbox = Inbox(Fairness.of(settings), shards=settings.tenant_shards)
        self.inbox.on_throttled = self.metrics.throttled
        self.inflight = InFlight(self.metrics, clock.now_ms)
        self.runs = self.inflight.runs
        self.summary = RunSummary(clock.now_ms())
        self.holdings = Holdings(settings, self.worker_id, self.inbox)
        self.pool = ThreadPoolExecutor(settings.worker_concurrency, thread_name_prefix="invoke")
        self.invoker = Invoker(targets, self.pool, clock.now_ms)
        self.deliveries = Deliveries(
            settings,
            targets,
            inbox=self.inbox,
            clock=clock,
            metrics=self.metrics,
            summary=self.summary,
            outcomes=DeliveredOutcomes(self.codec, self.worker_id, settings),
        )
        self.batches = (
            OutcomeBatches(self.codec, self.topics.outcomes)
            if settings.outcome_format == "batches"
            else None
        )
        """The open transaction's outcomes, one record per partition (outcome_batches.py);
        None: one record per outcome (`outcome_format` `records`)."""
        self._rejects: list[tuple[str, int, bytes | None, bytes, Headers]] = []
        self._last_offsets: dict[int, tuple[int, str]] = {}
        self._last_commit_ms = 0
        group = workers_group(settings.namespace, settings.worker_pool)
        self.lag = LagTracker(group)
        self.clients = clients or KafkaClients(settings)
        self.consumer = self.clients.consumer(group, self.worker_id)
        self.backlog = Backlog(self.inbox, settings, self.consumer, metrics=self.metrics)
        self.session = TransactionalSession(  # linger: the commit sends at once (flush)
            self.clients, self.worker_id, producer_options={"linger.ms": 100}
        )

    # -- assignment --------------------------------------------------------------------------

    def _on_revoke(self, _consumer: ConsumerLike, partitions: list[TopicPartition]) -> None:
        gone = {tp.partition for tp in partitions}
        self.inbox.forget(gone)
        for p in gone:
            self._last_offsets.pop(p, None)
        log.info("partitions revoked: %s (held executions go to their next owner)", sorted(gone))

    def _on_assign(self, consumer: ConsumerLike, partitions: list[TopicPartition]) -> None:
        committed = retrying(
            lambda: consumer.committed(partitions, timeout=30), "committed offsets"
        )
        for tp in committed:
            self.inbox.resume(tp.partition, max(tp.offset, 0), tp.metadata)
        log.info("partitions assigned: %s", sorted(tp.partition for tp in partitions))

    # -- the loop ----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        self.subscribe()
        try:
            while not stop.is_set():
                self.turn()
            self.drain()
        finally:
            self.close()

    def subscribe(self) -> None:
        """Join the workers' group on the executions topic (partitions come and go in the
        rebalance callbacks, inside a turn's `consume`)."""
        self.consumer.subscribe(
            [self.topics.worker_executions], on_assign=self._on_assign, on_revoke=self._on_revoke
        )

    def turn(self, poll_s: float = 0.05) -> None:
        self.metrics.work.switch("read")  # the loop's CPU by kind of work (kadence/work_cpu.py)
        next_due = self.inbox.next_due_ms()
        soon = next_due is not None and next_due - self.clock.now_ms() < poll_s * 1000
        wait = min(poll_s, 0.005) if self.runs or soon else poll_s  # work at hand: spin faster
        if self.runs:  # a finished run cuts the wait short (the consumer cannot be woken)
            msgs = self.consumer.consume(num_messages=500, timeout=0)
            if not msgs:
                self.inflight.wait(wait)
        else:
            msgs = ready(self.consumer, 500, wait)  # not held back until 500 have come
        for msg in msgs:
            self._read(msg)
        self.metrics.work.switch("claim")  # and the lease records, the ended runs' outcomes
        self.backlog.settle(self.lag, self.clock.now_ms())  # the bound: streams/worker/backlog.py
        now = self.clock.now_ms()
        self.police(now)
        self.inflight.collect()
        txn = TxnWork()
        claiming: set[str] = set()
        paced = self.holdings.paced()
        for item in self.due(now, paced):
            if item.batch is not None:
                self._due_batch(item, txn, now, claiming)
                continue
            ex = item.execution
            ahead = self.holdings.starting(item)
            if ahead is not None:
                self.start(ahead)  # claimed ahead: starts at its due instant, no commit
                continue
            if ex.execution_id in self.runs or ex.execution_id in claiming:
                self.inbox.hold(item)  # a newer delivery of a run of ours that lost its lease:
                continue  # it starts once that run has ended and been reported
            claiming.add(ex.execution_id)
            if not self.deliveries.route(item, txn, now):
                txn.claims.append(claim(item, now))
        if paced and not txn.claims and not txn.deliveries:  # too soon for the next snapshot
            return
        self.holdings.claim_ahead(txn, now, self.runs, claiming)
        self.inflight.report(txn)
        self.holdings.snapshot(txn, now, self.runs.values())
        offsets = self.inbox.offsets()
        if txn.deliveries and self.deliveries.unnamed(txn, offsets):
            offsets = self.inbox.offsets()
        moved = offsets != self._last_offsets
        periodic = moved and now - self._last_commit_ms >= OFFSET_COMMIT_INTERVAL_MS
        leases = txn.claims or txn.renewals or txn.finished or txn.held is not None
        leases = leases or bool(txn.deliveries)
        if leases or self._rejects or periodic:
            self.commit(txn, now, offsets)
        self.summary.tick(now, len(self.runs))

    def _due_batch(self, head: Item, txn: TxnWork, now: int, claiming: set[str]) -> None:
        """A due batch: its executions delivered in `txn`, or all claimed in it (one that is
        ours already, or being claimed, is left out: it runs once)."""
        assert head.batch is not None
        runs = self.runs
        ours = [i for i in head.batch if (e := i.execution.execution_id) in runs or e in claiming]
        for item in ours:
            head.batch.remove(item)
            head.weight -= 1
            head.nbytes -= item.nbytes
        if not head.batch:
            return
        claiming.update(i.execution.execution_id for i in head.batch)
        if not self.deliveries.route_batch(head, txn, now):
            txn.claims += [claim(item, now) for item in head.batch]

    def due(self, now: int, paced: bool = False) -> list[Item]:
        """What may start or be claimed now: runs needing a pool thread within the free slots,
        and every run within what one lease snapshot is sure to list (`Holdings.room`; none
        while `paced`: only claims ahead start)."""
        fl, cap = self.inflight, self.settings.worker_async_max_in_flight
        free = self.settings.worker_concurrency - fl.running
        room = 0 if paced else self.holdings.room(len(self.runs))
        loose = (max(0, cap - fl.loose), fl.loose_by_tenant)
        return self.inbox.due(
            now, max(0, free), fl.by_tenant, room=room, slotless=self.invoker.slotless, loose=loose
        )

    def _read(self, msg: MessageLike) -> None:
        if not usable(msg):
            return
        partition, offset = msg.partition() or 0, msg.offset() or 0
        if not self.inbox.wanted(partition, offset):
            self.inbox.read(partition, offset)  # claimed by the previous owner: its lease covers it
            if self.codec.names(msg.value(), ExecutionRevoked):
                self._revoke_again(msg, partition, offset)
            return
        try:
            record = EXECUTIONS.decode(self.codec, msg.value())
        except DecodeError as exc:
            self._reject(msg, exc.code, str(exc))
            self.inbox.read(partition, offset)
            return
        try:
            if isinstance(record, ExecutionBatch):
                self._take_batch(msg, record, partition, offset)
            else:
                self._take(record, partition, offset, msg.value())
        except Exception as exc:  # a bug on one record must not crash-loop the worker
            log.exception("executions[%d]@%d could not be taken; rejected", partition, offset)
            self._reject(msg, "processing_error", f"{type(exc).__name__}: {exc}")
            self.inbox.read(partition, offset)

    def _revoke_again(self, msg: MessageLike, partition: int, offset: int) -> None:
        """A revocation read again that the previous owner's commit did not name held (a worker
        before 0.15.0 named none): what it revokes of what this reading took goes. Only the
        inbox is told: the previous owner dealt with its claims and runs."""
        try:
            record = EXECUTIONS.decode(self.codec, msg.value())
        except DecodeError:
            return  # rejected when it was first read
        if isinstance(record, ExecutionRevoked) and self.inbox.revoke(record, partition, offset):
            log.info("revoked again, read again after a take-over: %s", record.execution_id)

    def _take(self, record: object, partition: int, offset: int, raw: bytes | None) -> None:
        if isinstance(record, ExecutionRevoked):
            self.inbox.read(partition, offset)
            if self.inbox.revoke(record, partition, offset):
                log.info("revoked before its due time: %s", record.execution_id)
            run = self.runs.get(record.execution_id)
            if run is not None and not read_after(run.item, partition, offset):
                # %r: the reason is the caller's text; a newline in it must not forge a log line
                log.info("cancelling %s: %r", record.execution_id, record.reason)
                run.stop.set(OutcomeStatus.cancelled)
            self.holdings.revoke(record, partition, offset)
            return
        assert isinstance(record, ExecutionRequested)
        self.holdings.saw(record)
        current = self.runs.get(record.execution_id)
        if current is not None and record.delivery <= current.execution.delivery:
            self.inbox.read(partition, offset)  # this delivery (or an older one) is ours already
            return
        # A newer delivery is the reaper handing the run on (our lease expired): it must run, or
        # nobody ever claims it and it is lost. It waits in the inbox until our run has ended.
        item = self.inbox.add(
            partition, offset, record, raw, leaseless=self.deliveries.takes(record)
        )
        if item is not None and item.leaseless:
            self.deliveries.prepare(item)
        self._prepare(record)

    def _take_batch(
        self, msg: MessageLike, batch: ExecutionBatch, partition: int, offset: int
    ) -> None:
        """Hold a batch's executions as one item; an entry that is not one of them is rejected
        alone (the record on `rejected`, the entry named), the others are taken."""
        entries: list[tuple[ExecutionRequested, bytes]] = []
        seen: set[str] = set()
        for i, raw in enumerate(batch.executions):
            try:
                ex = batches.entry(self.codec, batch, i, self._entries)
            except DecodeError as exc:
                self._reject(msg, exc.code, f"entry {i}: {exc}")
                continue
            why = None
            if has_rate_limit(ex.target):
                why = f"entry {i} ({ex.execution_id}) has a rate limit; a batch's have none"
            elif ex.execution_id in seen:
                why = f"entry {i} repeats {ex.execution_id}, an earlier entry of the batch"
            if why is not None:
                self._reject(msg, "invalid_batch_entry", why)
                continue
            seen.add(ex.execution_id)
            self.holdings.saw(ex)
            current = self.runs.get(ex.execution_id)
            if current is None or ex.delivery > current.execution.delivery:
                entries.append((ex, raw))
        if not entries:
            self.inbox.read(partition, offset)
            return
        leaseless = all(self.deliveries.takes(ex) for ex, _ in entries)
        head = self.inbox.add_batch(partition, offset, entries, leaseless=leaseless)
        if head is not None and head.leaseless and head.batch is not None:
            for item in head.batch:
                self.deliveries.prepare(item)
        for ex, _ in entries:
            self._prepare(ex)

    def _prepare(self, ex: ExecutionRequested) -> None:
        """Let the target get ready while the execution waits for its due time."""
        prepare = self._preparers.get(ex.target.kind)
        if prepare is not None:
            try:
                prepare(ex)
            except Exception:  # a target bug must not kill the worker
                log.exception("target %s could not prepare %s", ex.target.kind, ex.execution_id)

    def police(self, now: int) -> None:
        """Self-fence runs whose lease ran out, stop runs past their timeout, note the renewals
        due (only runs with a deadline by `now` are looked at: InFlight.police); claims ahead
        whose lease ran out are dropped (the reaper redelivers them)."""
        self.metrics.lease_lost.inc(self.holdings.police(now))
        self.inflight.police(now)

    # -- transactions ------------------------------------------------------------------------

    def commit(self, txn: TxnWork, now: int, offsets: dict[int, tuple[int, str]]) -> None:
        police = lambda: self.police(self.clock.now_ms())  # noqa: E731 - while retrying
        self._begin()
        try:
            for partition, key, record in self.holdings.writer.records(txn, now):
                self._emit(self.topics.leases, partition, key, record)
            for run, result in txn.finished:
                self._outcome(run, result, now)
            self.metrics.work.switch("deliver")  # the tenants' records and their outcomes
            self._deliver(txn)
            self._write_queued()
        except KafkaException as exc:
            outcome = self.session.abandon(exc, police)
        else:
            self.metrics.work.switch("commit")  # and starting the runs it claimed
            moved = {p: v for p, v in offsets.items() if self._last_offsets.get(p) != v}
            send = moved or dict(list(offsets.items())[:1])  # one at least: the fencing check
            tps = [
                TopicPartition(self.topics.worker_executions, p, o, metadata=meta)
                for p, (o, meta) in send.items()
            ]
            group = self.consumer.consumer_group_metadata()
            outcome = self.session.commit(tps, group, between=police)
        if outcome is not Outcome.committed:
            self._failed(txn, outcome)
            return
        self._rejects.clear()
        self._last_offsets = offsets
        self._last_commit_ms = now
        self.holdings.committed(txn)
        fresh = {id(run) for run in [*txn.claims, *txn.ahead]}
        for run in [*txn.renewals, *(txn.held or [])]:
            run.lease_expires_ms = now + run.execution.lease_ttl_ms
            run.next_renew_ms = now + max(1, run.execution.lease_ttl_ms // 3)
            if id(run) not in fresh:
                self.metrics.renewals.inc()
            if self.inflight.alive(run):
                self.inflight.renewed(run)
        for run, result in txn.finished:
            self._ended(run, result)
        for run in txn.claims:
            self.start(run)
        self.deliveries.committed(txn.deliveries)

    def _begin(self) -> None:
        self.session.begin()
        if self.batches is not None:
            self.batches.clear()  # an abandoned transaction's: its outcomes are written again

    def _write_queued(self) -> None:
        """The open transaction's rejected records, then its outcome batches."""
        for reject in self._rejects:
            self.session.produce(*reject)
        for batch in self.batches.records() if self.batches is not None else ():
            self.session.produce(*batch)

    def _failed(self, txn: TxnWork, outcome: Outcome) -> None:
        """The transaction was aborted (or its producer replaced, which aborts it): claims go
        back to the inbox, renewals do not count, outcomes are written again next turn."""
        log.warning("transaction %s: claims not started, renewals not counted", outcome.value)
        for run in txn.claims:
            self.inbox.hold(run.item)
        self.deliveries.failed(txn.deliveries)
        self.holdings.failed(txn)

    def start(self, run: ActiveRun) -> None:
        ex = run.execution
        run.started_ms = self.clock.now_ms()  # handed to its target now (not the turn's time)
        lateness_s = max(0, run.started_ms - run.item.due_ms) / 1000
        log.debug(
            "started %s delivery %d attempt %d (%.3f s after due)",
            ex.execution_id,
            ex.delivery,
            ex.attempt,
            lateness_s,
        )
        self.metrics.started(ex.tenant, lateness_s)
        self.summary.started(lateness_s)
        self.inflight.started(run, self.invoker.begin(run))

    def _ended(self, run: ActiveRun, result: Result) -> None:
        """The outcome of `run` committed."""
        ex = run.execution
        self.inflight.ended(run)
        self.metrics.finished(ex.tenant, result.status.value)
        self.summary.finished(result.status.value)
        log.debug("finished %s delivery %d: %s", ex.execution_id, ex.delivery, result.status.value)

    # -- records -----------------------------------------------------------------------------

    def _deliver(self, txn: TxnWork) -> None:
        """Each delivery's record and its outcome, in the open transaction (delivering.py;
        a refused one's outcome here)."""
        for d in txn.deliveries:
            self.deliveries.produce(d, self.session.produce, self._delivered)
            if d.refused is not None:
                self._outcome(d.run, d.refused, d.run.started_ms)

    def _outcome(self, run: ActiveRun, result: Result, now: int) -> None:
        self._send(run, outcome_of(run, result, now, self.worker_id))

    def _send(self, run: ActiveRun, outcome: ExecutionOutcome) -> None:
        ex = run.execution
        partition = partition_for(ex.routing_key, self.settings.partitions)
        value = self.codec.encode(outcome)
        if self.batches is None or not self.batches.add(partition, value):
            headers = headers_for(outcome, self.codec.schema_fingerprint(ExecutionOutcome))
            self.session.produce(self.topics.outcomes, partition, ex.key.encode(), value, headers)

    def _delivered(self, run: ActiveRun) -> None:
        """The `succeeded` outcome of a run delivered in this transaction (outcome_bytes.py)."""
        made = self.deliveries.outcomes
        if self.batches is not None:
            found = made.value(run)
            if found is not None and self.batches.add(*found):
                return
        self.session.produce(*made.record(run))

    def _emit(self, topic: str, partition: int, key: bytes, record: WireModel) -> None:
        headers = headers_for(record, self.codec.schema_fingerprint(type(record)))
        self.session.produce(topic, partition, key, self.codec.encode(record), headers)

    def _reject(self, msg: MessageLike, code: str, reason: str) -> None:
        """Queue a `rejected` record for an unusable execution (written with the next
        transaction, with the offsets that move past it)."""
        log.warning("rejected executions[%d]@%d: %s", msg.partition(), msg.offset(), reason)
        now, to = self.clock.now_ms(), self.topics.rejected
        record = rejected(msg, code, reason, now_ms=now, codec=self.codec, to_topic=to)
        self._rejects.append((self.topics.rejected, msg.partition() or 0, *record))

    # -- shutdown ----------------------------------------------------------------------------

    def drain(self, grace: timedelta = timedelta(seconds=20)) -> None:
        """Graceful stop (streams/worker/draining.py)."""
        drain(self, grace)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        try:
            self.consumer.close()
        finally:
            self.session.close()
