"""Tenant side of the Kafka topic target: consume `<namespace>.to.<tenant>.<topic>` and run
each execution once per key.

    from connectors.consumer import TopicConsumer

    def handle(execution): ...          # raise to have the record read again
    TopicConsumer(bootstrap, "kadence.to.acme.orders", group="acme-orders").run(handle, stop)

Delivery is at least once: an offset is committed only after `handle` returned for the record
and everything before it on the partition. Duplicates (a redelivered execution, a re-read after
a crash) carry the same `execution_id`; the consumer skips ids it has handled recently, and the
handler should make the rest harmless (an idempotency key in the target's own store).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterable, AsyncIterator, Callable

from confluent_kafka import Consumer, KafkaError, TopicPartition

from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.models import ExecutionRequested

log = logging.getLogger(__name__)


class RecentIds:
    """The last `size` execution ids seen: enough to drop redeliveries that arrive close."""

    def __init__(self, size: int = 100_000) -> None:
        self.size = size
        self._ids: OrderedDict[str, None] = OrderedDict()

    def first_time(self, execution_id: str) -> bool:
        if execution_id in self._ids:
            self._ids.move_to_end(execution_id)
            return False
        self._ids[execution_id] = None
        if len(self._ids) > self.size:
            self._ids.popitem(last=False)
        return True


def decode(codec: Codec, value: bytes | None) -> ExecutionRequested | None:
    """The execution in a target-topic record; None (logged) for anything else."""
    try:
        return codec.decode_as(value, ExecutionRequested)
    except DecodeError as exc:
        log.warning("not a Kadence execution, skipped: %s", exc)
        return None


class TopicConsumer:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.topic = topic
        self.codec = Codec()
        self.recent = RecentIds()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )

    def run(self, handle: Callable[[ExecutionRequested], None], stop: threading.Event) -> None:
        self.consumer.subscribe([self.topic])
        try:
            while not stop.is_set():
                msg = self.consumer.poll(0.2)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        log.warning("consumer error: %s", err)
                    continue
                ex = decode(self.codec, msg.value())
                if ex is not None and self.recent.first_time(ex.execution_id):
                    handle(ex)  # an exception propagates: the offset is not committed
                tp = TopicPartition(
                    msg.topic() or "", msg.partition() or 0, (msg.offset() or 0) + 1
                )
                self.consumer.commit(offsets=[tp], asynchronous=False)
        finally:
            self.consumer.close()


async def executions(
    records: AsyncIterable[bytes], recent: RecentIds | None = None
) -> AsyncIterator[ExecutionRequested]:
    """For faust-streaming (or any asyncio consumer) agents on a target topic with raw values:

        @app.agent(app.topic("kadence.to.acme.orders", value_serializer="raw"))
        async def orders(stream):
            async for execution in executions(stream):
                ...

    Decodes each record and drops execution ids already seen recently.
    """
    codec = Codec()
    seen = recent or RecentIds()
    async for value in records:
        ex = decode(codec, value)
        if ex is not None and seen.first_time(ex.execution_id):
            yield ex
