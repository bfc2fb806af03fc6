"""The one transactional session: what the processor runtime and the worker both commit through.

A transaction, every time:
1. `begin()`, then `produce(...)` the transaction's records (a full local queue is waited out
   by polling: back-pressure, never an error);
2. `commit(offsets, group_metadata)`: the consumer positions go in with the group metadata, so
   a process that lost its partitions in a rebalance is fenced here and commits nothing
   (KIP-447); then `commit_transaction`: records and offsets become visible together.
Through a broker outage every call is made again while it fails retriably (`between` runs in
the pauses: the worker polices its leases there). What cannot go on ends as one of:
- `aborted`: the error requires an abort (or is one this module does not know): the
  transaction is aborted, nothing it held is visible;
- `replaced`: the producer is unusable (fatal error, fenced), stuck (a call that ignores its
  timeout) or still failing after `Timeouts.give_up_after_s`: a new producer with the same
  transactional id takes over, which fences the old one and aborts its open transaction.
Either way the caller redoes the transaction's work (reads its inputs again, holds its claims).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from streams.kafkaio.clients import Clients
from streams.kafkaio.errors import (
    HUNG_AFTER_S,
    OFFSETS_CALL_TIMEOUT_S,
    ProducerStuckError,
    error_of,
    fatal,
    requires_abort,
    retriable,
    until_done,
)
from streams.kafkaio.ports import DeliveryCallback, ProducerLike, RecordHeaders

log = logging.getLogger(__name__)
BACK_PRESSURE_POLL_S = 0.05


def _nothing() -> None:
    pass


class Outcome(enum.Enum):
    committed = "committed"
    aborted = "aborted"
    replaced = "replaced"


@dataclass(frozen=True, slots=True)
class Timeouts:
    """One set of timeouts for every transaction of every process.

    A call that times out retriably is simply made again, so the per-call timeouts bound how
    long one attempt blocks, not how long an outage may last: 10 s per commit and abort
    attempt (the worker's former figures, where the runtime had 60 s and 30 s) keeps the
    pauses in which `between` runs short enough for the worker to self-fence a run whose lease
    expires during an outage, and costs the runtime nothing but a log line per 10 s of outage.
    """

    init_s: float = 30.0
    """init_transactions, per attempt (retried while retriable)."""
    offsets_call_s: float = OFFSETS_CALL_TIMEOUT_S
    """send_offsets_to_transaction, per attempt."""
    hung_after_s: float = HUNG_AFTER_S
    """An offsets attempt that has not returned after this long ignores its timeout (a
    librdkafka hang): the producer is replaced."""
    give_up_after_s: float = 30.0
    """Sending offsets still fails retriably after this long: the producer is replaced."""
    commit_s: float = 10.0
    abort_s: float = 10.0
    close_flush_s: float = 10.0


class TransactionalSession:
    """Transactions of one transactional id. Not thread-safe: the loop thread owns it."""

    def __init__(
        self,
        clients: Clients,
        transactional_id: str,
        *,
        timeouts: Timeouts | None = None,
        producer_options: dict[str, Any] | None = None,
    ) -> None:
        """`producer_options`: librdkafka options for this session's producers (tuning)."""
        self.clients = clients
        self.transactional_id = transactional_id
        self.timeouts = timeouts or Timeouts()
        self._options = producer_options or {}
        self.open = False
        """A transaction is open (begun, neither committed nor aborted)."""
        self.replacements = 0
        self.producer = self._new_producer()

    def _new_producer(self) -> ProducerLike:
        """A new producer for the id; its init_transactions fences every older one."""
        producer = self.clients.transactional_producer(self.transactional_id, **self._options)
        init_s = self.timeouts.init_s
        until_done(lambda: producer.init_transactions(init_s), "initialising transactions")
        return producer

    def _replace(self, why: str) -> Outcome:
        log.error("%s: replacing the transactional producer", why)
        self.open = False
        self.replacements += 1
        self.producer = self._new_producer()
        return Outcome.replaced

    def begin(self) -> None:
        self.producer.begin_transaction()
        self.open = True

    def produce(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: RecordHeaders,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Queue a record in the open transaction; waits (polling) while the queue is full."""
        kwargs: dict[str, Any] = {"key": key, "value": value}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        if on_delivery is not None:
            kwargs["on_delivery"] = on_delivery
        while True:
            try:
                self.producer.produce(topic, **kwargs)
                return
            except BufferError:
                self.producer.poll(BACK_PRESSURE_POLL_S)

    def commit(
        self,
        offsets: list[TopicPartition],
        group_metadata: Any,
        between: Callable[[], None] = _nothing,
    ) -> Outcome:
        """Send `offsets` with the consumer's group metadata (whenever there are any: even a
        transaction with no new input re-sends them, so a zombie is fenced), then commit."""
        t = self.timeouts
        producer = self.producer
        try:
            if offsets:
                until_done(
                    lambda: producer.send_offsets_to_transaction(
                        offsets, group_metadata, t.offsets_call_s
                    ),
                    "sending offsets",
                    between=between,
                    give_up_after_s=t.give_up_after_s,
                    attempt_timeout_s=t.hung_after_s,
                )
            until_done(
                lambda: producer.commit_transaction(t.commit_s), "committing", between=between
            )
        except (KafkaException, ProducerStuckError) as exc:
            return self.abandon(exc, between)
        self.open = False
        return Outcome.committed

    def abandon(
        self, exc: KafkaException | ProducerStuckError, between: Callable[[], None] = _nothing
    ) -> Outcome:
        """End the open transaction after `exc` (from producing or committing it): abort, or
        replace the producer when it is stuck, unusable or still failing retriably."""
        if isinstance(exc, ProducerStuckError):
            return self._replace(str(exc))
        log.error("transaction failed: %s", error_of(exc))
        if requires_abort(exc):
            return self.abort(between)
        if fatal(exc) or retriable(exc):  # unusable, or still failing after give_up_after_s
            return self._replace(f"producer error {error_of(exc)}")
        return self.abort(between)

    def abort(self, between: Callable[[], None] = _nothing) -> Outcome:
        """Abort the open transaction, through an outage; a producer that turns out unusable
        is replaced (which aborts the transaction as well). A non-fatal error that is not
        retriable is raised: the producer is in a state this module does not know."""
        try:
            until_done(
                lambda: self.producer.abort_transaction(self.timeouts.abort_s),
                "aborting",
                between=between,
            )
        except KafkaException as exc:
            if not fatal(exc):
                raise
            return self._replace(f"fatal producer error {error_of(exc)} while aborting")
        finally:
            self.open = False
        return Outcome.aborted

    def close(self) -> None:
        """Abort what is open and deliver what is queued."""
        try:
            if self.open:
                self.abort()
        finally:
            self.producer.flush(self.timeouts.close_flush_s)
