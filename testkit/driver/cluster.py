"""The in-memory cluster's state: topics, transactions with epochs, consumer groups, faults.

The fake clients (consumer.py, producer.py) are thin: every rule a broker enforces lives here,
under one lock, so a test can also drive it directly (rebalance a group, kick a member, expire a
crashed owner's transaction, read a topic as a read_committed reader would).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException

from kadence.clock import Clock, FakeClock
from testkit.driver.faults import Faults
from testkit.driver.groups import TP, Group, GroupMetadata
from testkit.driver.log import Entry, Headers, MemoryMessage, PartitionLog


def kafka_error(code: int, reason: str, **flags: bool) -> KafkaException:
    return KafkaException(KafkaError(code, reason, **flags))


@dataclass
class Transaction:
    transactional_id: str
    epoch: int
    entries: list[Entry] = field(default_factory=list)
    partitions: set[TP] = field(default_factory=set)
    offsets: dict[str, dict[TP, tuple[int, str | None]]] = field(default_factory=dict)
    """Offsets sent with the transaction, by group: committed with it, or never."""


class Cluster:
    """Topics, transactions and groups in memory. Time (record timestamps) comes from `clock`."""

    def __init__(self, clock: Clock | None = None, *, auto_create_partitions: int = 0) -> None:
        """`auto_create_partitions`: a topic produced to before it exists is created with this
        many partitions; 0 (the default) refuses it, as a cluster without auto-creation does."""
        self.clock = clock or FakeClock()
        self.lock = threading.RLock()
        self.faults = Faults()
        self.auto_create_partitions = auto_create_partitions
        self.logs: dict[str, list[PartitionLog]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.groups: dict[str, Group] = {}
        self.epochs: dict[str, int] = {}
        """The current producer epoch of each transactional id."""
        self.transactions: dict[str, Transaction] = {}
        """Open transactions by transactional id."""

    # -- topics ------------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, config: dict[str, str] | None = None
    ) -> None:
        with self.lock:
            if name in self.logs:
                raise kafka_error(KafkaError.TOPIC_ALREADY_EXISTS, f"topic {name} exists")
            self.logs[name] = [PartitionLog(name, p) for p in range(partitions)]
            self.configs[name] = dict(config or {})

    def partitions(self, topic: str) -> int:
        return len(self._logs_of(topic))

    def log(self, topic: str, partition: int) -> PartitionLog:
        logs = self._logs_of(topic)
        if not 0 <= partition < len(logs):
            raise kafka_error(KafkaError._UNKNOWN_PARTITION, f"{topic}[{partition}] does not exist")
        return logs[partition]

    def _logs_of(self, topic: str) -> list[PartitionLog]:
        with self.lock:
            if topic not in self.logs:
                if not self.auto_create_partitions:
                    raise kafka_error(KafkaError.UNKNOWN_TOPIC_OR_PART, f"no topic {topic}")
                self.create_topic(topic, self.auto_create_partitions)
            return self.logs[topic]

    def messages(
        self, topic: str, partition: int | None = None, *, committed_only: bool = True
    ) -> list[MemoryMessage]:
        """What a reader from the beginning sees now (read_committed unless told otherwise),
        partition by partition."""
        with self.lock:
            chosen = range(self.partitions(topic)) if partition is None else [partition]
            found: list[MemoryMessage] = []
            for p in chosen:
                log = self.log(topic, p)
                entries, _ = log.read(log.low, log.high + 1, committed_only)
                found += [MemoryMessage(topic, p, e) for e in entries]
            return found

    def append(
        self,
        txn: Transaction | None,
        topic: str,
        partition: int,
        *,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
        timestamp_ms: int | None = None,
    ) -> Entry:
        with self.lock:
            log = self.log(topic, partition)
            ts = self.clock.now_ms() if timestamp_ms is None else timestamp_ms
            entry = log.append(key, value, headers, ts, pending=txn is not None)
            if txn is not None:
                txn.entries.append(entry)
                txn.partitions.add((topic, partition))
            return entry

    # -- transactions ------------------------------------------------------------------------

    def init_producer(self, transactional_id: str) -> int:
        """A producer registers its transactional id: a new epoch, which fences every older
        producer of the id and aborts the transaction it left open."""
        with self.lock:
            epoch = self.epochs.get(transactional_id, -1) + 1
            self.epochs[transactional_id] = epoch
            if transactional_id in self.transactions:
                self._end(self.transactions[transactional_id], commit=False)
            return epoch

    def fenced(self, transactional_id: str, epoch: int) -> bool:
        with self.lock:
            return self.epochs.get(transactional_id, -1) > epoch

    def begin(self, transactional_id: str, epoch: int) -> Transaction:
        with self.lock:
            txn = Transaction(transactional_id, epoch)
            self.transactions[transactional_id] = txn
            return txn

    def add_offsets(
        self,
        txn: Transaction,
        metadata: GroupMetadata,
        offsets: Iterable[tuple[TP, int, str | None]],
    ) -> None:
        """Offsets to commit with `txn`; refused (the transaction must abort) when `metadata`
        is not of a current member of the group's current generation (KIP-447)."""
        with self.lock:
            group = self.group(metadata.group_id)
            if not group.accepts(metadata):
                code = (
                    KafkaError.UNKNOWN_MEMBER_ID
                    if metadata.member_id not in group.members
                    else KafkaError.ILLEGAL_GENERATION
                )
                raise kafka_error(
                    code,
                    f"group {group.name}: generation {metadata.generation} of "
                    f"{metadata.member_id} is not current ({group.generation})",
                    txn_requires_abort=True,
                )
            pending = txn.offsets.setdefault(metadata.group_id, {})
            for tp, offset, meta in offsets:
                pending[tp] = (offset, meta)

    def end(self, txn: Transaction, *, commit: bool) -> None:
        with self.lock:
            self._end(txn, commit=commit)

    def _end(self, txn: Transaction, *, commit: bool) -> None:
        if self.transactions.get(txn.transactional_id) is txn:
            del self.transactions[txn.transactional_id]
        for entry in txn.entries:
            entry.pending = False
            entry.aborted = not commit
        for topic, partition in sorted(txn.partitions):
            self.log(topic, partition).append(None, None, None, self.clock.now_ms(), control=True)
        if commit:
            for group_id, offsets in txn.offsets.items():
                self.group(group_id).offsets.update(offsets)
        txn.entries, txn.partitions, txn.offsets = [], set(), {}

    def expire_transaction(self, transactional_id: str) -> bool:
        """The broker aborts a transaction left open past transaction.timeout.ms (its owner
        crashed or stopped); True if one was open."""
        with self.lock:
            txn = self.transactions.get(transactional_id)
            if txn is None:
                return False
            self._end(txn, commit=False)
            self.epochs[transactional_id] = self.epochs.get(transactional_id, -1) + 1
            return True

    # -- groups ------------------------------------------------------------------------------

    def group(self, name: str) -> Group:
        with self.lock:
            if name not in self.groups:
                self.groups[name] = Group(name)
            return self.groups[name]

    def rebalance(self, group: str) -> None:
        """A new generation (as when a member joins or leaves); every member's callbacks run in
        its next consume()."""
        with self.lock:
            self.group(group).rebalance(self.partitions)

    def kick(self, group: str, client_id: str) -> str:
        """Remove a member, as its session timing out does; the others rebalance. The member
        finds out in its next consume(): its partitions are revoked and it joins again."""
        with self.lock:
            g = self.group(group)
            member_id = g.member_of(client_id)
            g.leave(member_id, self.partitions)
            return member_id

    def committed(self, group: str) -> dict[TP, int]:
        """The group's committed offsets."""
        with self.lock:
            return {tp: offset for tp, (offset, _) in self.group(group).offsets.items()}
