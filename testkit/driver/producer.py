"""Producers and an admin client of the in-memory cluster, with confluent_kafka's methods.

A transactional producer follows librdkafka's state rules: an error that requires an abort
leaves it able to do nothing but `abort_transaction`; a fatal one (fenced by a newer producer
of its transactional id, or injected) leaves it unusable for good. Records take their offsets
when produced; delivery reports are served by `poll`, `flush` and `commit_transaction`.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kadence.partitioning import partition_for
from streams.kafkaio.ports import DeliveryCallback
from testkit.driver.cluster import Cluster, Transaction, kafka_error
from testkit.driver.groups import GroupMetadata
from testkit.driver.log import Headers, MemoryMessage
from testkit.driver.metadata import cluster_metadata

Report = tuple[DeliveryCallback, KafkaError | None, MemoryMessage]
_ALLOWED_WHEN_ABORTABLE = frozenset({"abort_transaction"})


def _bytes(data: str | bytes | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _headers(headers: Any) -> Headers | None:
    if not headers:
        return None
    pairs = headers.items() if isinstance(headers, dict) else headers
    return [(str(k), _bytes(v)) for k, v in pairs]


class MemoryProducer:
    def __init__(self, cluster: Cluster, config: dict[str, Any]) -> None:
        self.cluster = cluster
        self.config = config
        self.transactional_id: str | None = config.get("transactional.id")
        self.name: str = self.transactional_id or config.get("client.id", "rdkafka")
        """What a fault is aimed at: the transactional id, else the client id."""
        self.epoch = -1
        self.txn: Transaction | None = None
        self._reports: list[Report] = []
        self._fatal: KafkaError | None = None
        self._abortable: KafkaError | None = None
        self._next_partition = 0

    def _gate(self, method: str) -> None:
        """Faults first (a hang may end with this producer fenced), then the state rules."""
        error = self.cluster.faults.check(method, self.name)
        tid = self.transactional_id
        if tid is not None and self.epoch >= 0 and self.cluster.fenced(tid, self.epoch):
            self._fatal = self._fatal or KafkaError(
                KafkaError._FENCED, f"{tid} epoch {self.epoch} fenced by a newer one", fatal=True
            )
        if error is not None:
            if error.code() == KafkaError._QUEUE_FULL and method == "produce":
                raise BufferError("Local: Queue full")
            if error.fatal():
                self._fatal = error
            elif error.txn_requires_abort():
                self._abortable = error
            raise KafkaException(error)
        if self._fatal is not None:
            raise KafkaException(self._fatal)
        if self._abortable is not None and method not in _ALLOWED_WHEN_ABORTABLE:
            raise KafkaException(self._abortable)

    def _open(self, method: str) -> Transaction:
        if self.txn is None:
            raise kafka_error(KafkaError._STATE, f"{method}: no transaction in progress")
        return self.txn

    # -- transactions --------------------------------------------------------------------------

    def init_transactions(self, timeout: float = -1) -> None:
        self._gate("init_transactions")
        if self.transactional_id is None:
            raise kafka_error(KafkaError._NOT_CONFIGURED, "no transactional.id")
        self.epoch = self.cluster.init_producer(self.transactional_id)
        self.txn = None

    def begin_transaction(self) -> None:
        self._gate("begin_transaction")
        if self.epoch < 0 or self.transactional_id is None:
            raise kafka_error(KafkaError._STATE, "init_transactions first")
        if self.txn is not None:
            raise kafka_error(KafkaError._STATE, "a transaction is already in progress")
        self.txn = self.cluster.begin(self.transactional_id, self.epoch)

    def send_offsets_to_transaction(
        self, positions: list[TopicPartition], group_metadata: Any, timeout: float = -1
    ) -> None:
        self._gate("send_offsets_to_transaction")
        txn = self._open("send_offsets_to_transaction")
        if not isinstance(group_metadata, GroupMetadata):
            raise TypeError(f"expected a consumer's group metadata, got {group_metadata!r}")
        offsets = [((tp.topic, tp.partition), tp.offset, tp.metadata) for tp in positions]
        try:
            self.cluster.add_offsets(txn, group_metadata, offsets)
        except KafkaException as exc:
            self._abortable = exc.args[0]
            raise

    def commit_transaction(self, timeout: float = -1) -> None:
        self._gate("commit_transaction")
        txn = self._open("commit_transaction")
        self._serve()
        self.cluster.end(txn, commit=True)
        self.txn = None

    def abort_transaction(self, timeout: float = -1) -> None:
        self._gate("abort_transaction")
        txn = self._open("abort_transaction")
        self.cluster.end(txn, commit=False)
        self.txn, self._abortable = None, None
        purged = KafkaError(KafkaError._PURGE_QUEUE, "purged: the transaction was aborted")
        reports, self._reports = self._reports, []
        for callback, _, msg in reports:
            callback(purged, msg)

    # -- records -------------------------------------------------------------------------------

    def produce(  # noqa: PLR0917 - confluent_kafka's own signature
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        partition: int = -1,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Any = None,
        callback: DeliveryCallback | None = None,
    ) -> None:
        self._gate("produce")
        txn = self._open("produce") if self.transactional_id is not None else None
        key_bytes = _bytes(key)
        if partition < 0:
            count = self.cluster.partitions(topic)
            if key_bytes is not None:
                partition = partition_for(key_bytes, count)
            else:
                partition = self._next_partition % count
                self._next_partition += 1
        entry = self.cluster.append(
            txn,
            topic,
            partition,
            key=key_bytes,
            value=_bytes(value),
            headers=_headers(headers),
            timestamp_ms=timestamp or None,
        )
        report = on_delivery or callback
        if report is not None:
            self._reports.append((report, None, MemoryMessage(topic, partition, entry)))

    def _serve(self) -> int:
        reports, self._reports = self._reports, []
        for callback, error, msg in reports:
            callback(error, msg)
        return len(reports)

    def poll(self, timeout: float = -1) -> int:
        self.cluster.faults.check("poll", self.name)
        return self._serve()

    def flush(self, timeout: float = -1) -> int:
        self.cluster.faults.check("flush", self.name)
        self._serve()
        return 0

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self._gate("list_topics")
        return cluster_metadata(self.cluster, topic)

    def __len__(self) -> int:
        return len(self._reports)


class MemoryAdmin:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.cluster.faults.check("list_topics", "admin")
        return cluster_metadata(self.cluster, topic)

    def create_topics(self, new_topics: list[Any], **kwargs: Any) -> dict[str, Any]:
        """Futures by topic name, as AdminClient's: `.result()` raises if not created."""
        self.cluster.faults.check("create_topics", "admin")
        futures: dict[str, Future[None]] = {}
        for new in new_topics:
            future: Future[None] = Future()
            try:
                self.cluster.create_topic(new.topic, new.num_partitions, dict(new.config or {}))
                future.set_result(None)
            except KafkaException as exc:
                future.set_exception(exc)
            futures[new.topic] = future
        return dict(futures)
