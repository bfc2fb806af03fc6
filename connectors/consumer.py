"""Tenant side of the Kafka topic target: consume `<namespace>.to.<tenant>.<topic>` and run
each execution once per key.

    from connectors.consumer import TopicConsumer

    def handle(execution): ...          # raise to have the record read again
    TopicConsumer.for_target(bootstrap, "kadence", "acme", "orders").run(handle, stop)

Its consumer group is `kadence.to.acme.orders` (`tenant_group`): a tenant's principal may use
only groups under its own prefix `<namespace>.to.<tenant part>.` (kadence/acls.py); name
another with `group="reports"` (`kadence.to.acme.reports`). docs/kafka.md is the guide.

Delivery is at least once: an offset is committed only after `handle` returned for the record
and everything before it on the partition. Duplicates (a redelivered execution, a re-read after
a crash) carry the same `execution_id`; the consumer skips ids it has handled recently, and the
handler should make the rest harmless (an idempotency key in the target's own store).

Only the tenant's own executions are delivered: a record whose tenant (in the execution, its
`kadence-tenant` header or its key) is another tenant's is refused, logged and counted in
`kadence_target_records_refused_total{reason}`, never handed to `handle`. Kadence writes only
the tenant's own executions there; anything else came from another writer (or from the old,
ambiguous naming, docs/decisions/0007-kafka-target-topic-names.md).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping, Sequence
from typing import Protocol

from confluent_kafka import Consumer, KafkaError, TopicPartition
from prometheus_client import CollectorRegistry, Counter

from kadence.codec import Codec
from kadence.errors import DecodeError, InvalidInputError
from kadence.headers import TENANT
from kadence.kafka_options import KafkaOptions, kafka_config
from kadence.models import ExecutionRequested
from kadence.target_topics import target_prefix, tenant_part
from kadence.topics import target_topic

RecordHeaders = Mapping[str, str | bytes | None] | Sequence[tuple[str, str | bytes | None]]


class _Record(Protocol):
    """What `accept` reads of a consumed message (confluent_kafka.Message has it)."""

    def value(self) -> bytes | None: ...
    def key(self) -> bytes | None: ...
    def headers(self) -> RecordHeaders | None: ...


log = logging.getLogger(__name__)
GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
"""The part of a consumer group a tenant chooses (after its prefix)."""


def tenant_group(namespace: str, tenant: str, name: str) -> str:
    """`<namespace>.to.<tenant part>.<name>`: a consumer group the tenant's ACLs allow (they
    grant groups under the same prefix as its target topics, kadence/acls.py)."""
    if not GROUP_NAME.match(name):
        raise InvalidInputError(
            f"bad consumer group name {name[:200]!r}",
            ["group: 1 to 128 of letters, digits, '.', '_', '-', starting with a letter or digit"],
        )
    return f"{target_prefix(namespace)}{tenant_part(tenant)}.{name}"


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


class Refusals:
    """Records not delivered, by reason: logged, and counted on `registry` (pass the registry
    your process exports) as `kadence_target_records_refused_total{reason}`."""

    NAME = "kadence_target_records_refused"

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.counter = Counter(
            self.NAME,
            "Records on a tenant's target topic not delivered to its handler",
            ["reason"],
            registry=self.registry,
        )

    def __call__(self, reason: str, detail: str) -> None:
        log.warning("record refused (%s): %s", reason, detail)
        self.counter.labels(reason).inc()

    def count(self, reason: str) -> float:
        value = self.registry.get_sample_value(f"{self.NAME}_total", {"reason": reason})
        return value or 0.0


def decode(
    codec: Codec, value: bytes | None, refusals: Refusals | None = None
) -> ExecutionRequested | None:
    """The execution in a target-topic record; None (logged, counted) for anything else."""
    try:
        return codec.decode_as(value, ExecutionRequested)
    except DecodeError as exc:
        (refusals or Refusals())("not_an_execution", f"not a Kadence execution: {exc}")
        return None


def foreign(
    ex: ExecutionRequested,
    tenant: str,
    headers: RecordHeaders | None = None,
    key: bytes | None = None,
) -> str | None:
    """Why this execution is not `tenant`'s, or None when the record agrees everywhere (the
    execution, every `kadence-tenant` header, the key's `tenant/` prefix)."""
    if ex.tenant != tenant:
        return f"{ex.execution_id} is tenant {ex.tenant!r}'s, this topic is {tenant!r}'s"
    pairs = headers.items() if isinstance(headers, Mapping) else headers or []
    for name, value in pairs:
        said = value.encode() if isinstance(value, str) else value
        if name.strip().lower() == TENANT and said != tenant.encode():
            shown = (said or b"")[:200]
            return f"{ex.execution_id} has header {TENANT}={shown!r}, this topic is {tenant!r}'s"
    if key is not None and key.split(b"/", 1)[0] != tenant.encode():
        return f"{ex.execution_id} has key {key[:200]!r}, this topic is {tenant!r}'s"
    return None


class TopicConsumer:
    """Consume one target topic of `tenant`; deliver its own executions, each once. `kafka`
    is the bootstrap address, or the librdkafka options every client shares (security...)."""

    def __init__(
        self,
        kafka: str | KafkaOptions,
        topic: str,
        group: str,
        *,
        tenant: str,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.topic = topic
        self.tenant = tenant
        self.group = group
        self.codec = Codec()
        self.recent = RecentIds()
        self.refusals = Refusals(registry)
        self.consumer = Consumer(
            kafka_config(
                kafka,
                {"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"},
            )
        )

    @classmethod
    def for_target(
        cls,
        kafka: str | KafkaOptions,
        namespace: str,
        tenant: str,
        topic: str,
        *,
        group: str | None = None,
        registry: CollectorRegistry | None = None,
    ) -> TopicConsumer:
        """The consumer of the topic a job of `tenant` names `topic` (KafkaTarget(topic=...)),
        in the group `tenant_group(namespace, tenant, group)`, by default named after the topic."""
        name = target_topic(namespace, tenant, topic)
        chosen = tenant_group(namespace, tenant, topic if group is None else group)
        return cls(kafka, name, chosen, tenant=tenant, registry=registry)

    def accept(self, msg: _Record) -> ExecutionRequested | None:
        """The record's execution if it is this tenant's and not seen recently, else None."""
        ex = decode(self.codec, msg.value(), self.refusals)
        if ex is None:
            return None
        why = foreign(ex, self.tenant, msg.headers(), msg.key())
        if why is not None:
            self.refusals("foreign_tenant", f"{self.topic}: {why}")
            return None
        return ex if self.recent.first_time(ex.execution_id) else None

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
                ex = self.accept(msg)
                if ex is not None:
                    handle(ex)  # an exception propagates: the offset is not committed
                tp = TopicPartition(
                    msg.topic() or "", msg.partition() or 0, (msg.offset() or 0) + 1
                )
                self.consumer.commit(offsets=[tp], asynchronous=False)
        finally:
            self.consumer.close()


async def executions(
    records: AsyncIterable[bytes],
    recent: RecentIds | None = None,
    *,
    tenant: str,
    refusals: Refusals | None = None,
) -> AsyncIterator[ExecutionRequested]:
    """For faust-streaming (or any asyncio consumer) agents on a target topic with raw values:

        @app.agent(app.topic("kadence.to.acme.orders", value_serializer="raw"))
        async def orders(stream):
            async for execution in executions(stream, tenant="acme"):
                ...

    Decodes each record, refuses another tenant's executions (raw values carry no headers:
    the execution's own tenant decides) and drops execution ids already seen recently.
    """
    codec = Codec()
    seen = recent or RecentIds()
    refused = refusals or Refusals()
    async for value in records:
        ex = decode(codec, value, refused)
        if ex is None:
            continue
        why = foreign(ex, tenant)
        if why is not None:
            refused("foreign_tenant", why)
        elif seen.first_time(ex.execution_id):
            yield ex
