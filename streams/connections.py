"""The connections topic held whole in memory: what the API lists and the workers use.

A thread reads the topic's one partition from its start, with no consumer group, and keeps the
latest record of each `tenant/name` (a tombstone deletes it and is remembered, so a run of a
deleted connection says so). Until it has read what was there when it started (`ready`), a run
that names a connection waits for it rather than fail for want of a record it will read in a
moment. A record that does not decode, or whose key is not its own tenant and name, is skipped
and counted: only the API writes here (ACLs), so such a record is a forgery or a bug, and no
record can stop the reader.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from kadence.codec import Codec
from kadence.errors import KadenceError
from kadence.log_limit import LogLimit
from kadence.models.connections import ConnectionRecord, connection_key
from kadence.topics import CONNECTIONS, connections_group
from streams.kafkaio.clients import Clients
from streams.kafkaio.ports import ConsumerLike
from streams.kafkaio.reading import ready

log = logging.getLogger(__name__)
POLL_S = 0.2


class ConnectionStore:
    def __init__(self, clients: Clients, namespace: str, client_id: str) -> None:
        self.topic = CONNECTIONS.name(namespace)
        self._namespace = namespace
        self._clients = clients
        self._client_id = client_id
        self._codec = Codec()
        self._records: dict[str, ConnectionRecord] = {}
        self._deleted: dict[str, datetime] = {}
        self._position = 0
        """The offset of the next record to read."""
        self._end_at_start: int | None = None
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.skipped = 0
        self._log_limit = LogLimit()

    # -- what the targets and the API ask ------------------------------------------------------

    def get(self, tenant: str, name: str) -> ConnectionRecord | None:
        return self._records.get(connection_key(tenant, name))

    def deleted_at(self, tenant: str, name: str) -> datetime | None:
        return self._deleted.get(connection_key(tenant, name))

    def ready(self) -> bool:
        end = self._end_at_start
        return end is not None and self._position >= end

    def of_tenant(self, tenant: str) -> list[ConnectionRecord]:
        return sorted(
            (r for r in list(self._records.values()) if r.tenant == tenant), key=lambda r: r.name
        )

    def wait_for(self, offset: int, timeout_s: float) -> bool:
        """Whether the record at `offset` has been read within `timeout_s` (read-your-writes)."""
        until = time.monotonic() + timeout_s
        with self._changed:
            while self._position <= offset:
                left = until - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def wait_ready(self, timeout_s: float) -> bool:
        until = time.monotonic() + timeout_s
        with self._changed:
            while not self.ready():
                left = until - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    # -- the reader ----------------------------------------------------------------------------

    def start(self) -> ConnectionStore:
        self._thread = threading.Thread(target=self._run, name="connections", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        consumer = self._clients.consumer(
            connections_group(self._namespace),  # never joined or committed: assign() only
            self._client_id,
        )
        try:
            consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            while not self._stopping.is_set():
                if self._end_at_start is None:
                    self._learn_end(consumer)
                for msg in ready(consumer, 1_000, POLL_S):
                    error = msg.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            self._warn("error", f"{error}")
                        continue
                    self._apply(msg.key(), msg.value(), msg.offset() or 0)
                if self.ready():
                    with self._changed:
                        self._changed.notify_all()
        except Exception:  # the reader must not die silently: say why, then stop reading
            log.exception("connections: the reader stopped")
            raise
        finally:
            consumer.close()

    def _learn_end(self, consumer: ConsumerLike) -> None:
        try:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(self.topic, 0), timeout=5, cached=False
            )
        except Exception as exc:  # a broker not there yet: try again next turn
            self._warn("end", f"cannot learn the topic's end yet: {exc}")
            return
        self._end_at_start = max(0, high)
        with self._changed:
            self._changed.notify_all()

    def _warn(self, key: str, line: str) -> None:
        if self._log_limit.allow(key):
            held = self._log_limit.take_held_back()
            log.warning("connections: %s%s", line, f" ({held} more held back)" if held else "")

    def _apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        text = (key or b"").decode(errors="replace")
        try:
            if value is None:
                self._records.pop(text, None)
                self._deleted[text] = datetime.now(UTC)
            else:
                record = CONNECTIONS.decode(self._codec, value)
                if not isinstance(record, ConnectionRecord):
                    raise KadenceError("not a connection record")
                if connection_key(record.tenant, record.name) != text:
                    raise KadenceError(f"keyed {text!r}, not by its own tenant and name")
                self._records[text] = record
                self._deleted.pop(text, None)
        except KadenceError as exc:
            self.skipped += 1
            self._warn("skip", f"skipped the record at offset {offset}: {exc}")
        with self._changed:
            self._position = offset + 1
            self._changed.notify_all()
