"""Issue 14, item 6: one tenant cannot reach, or block, another tenant's Kafka-target topic.

Before: `<ns>.to.<tenant>.<topic>` with `.` in both parts gave tenant `acme` (topic `eu.orders`)
and tenant `acme.eu` (topic `orders`) the same topic, and since Kafka treats `.` and `_` as the
same when it checks a new name, `acme`'s `eu_orders` kept `acme.eu` from ever creating
`orders`. A name too long for Kafka was found only when the job ran.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from connectors.consumer import TopicConsumer, executions
from connectors.kafka_topic import KafkaTopicCaller
from kadence.codec import Codec
from kadence.examples import examples
from kadence.headers import headers_for
from kadence.models import ExecutionRequested, KafkaTarget, OutcomeStatus, ScheduleDefinition
from kadence.settings import KadenceSettings
from kadence.target_topics import MAX_NAMESPACE, MAX_TENANT_AND_TOPIC, MAX_TOPIC_NAME
from kadence.targets import Stop
from kadence.topics import target_topic

TENANTS = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,20}\Z")
TOPICS = st.from_regex(r"\A[A-Za-z0-9._-]{1,20}\Z")


def kafka_collides(a: str, b: str) -> bool:
    """Kafka refuses to create `b` while `a` exists when they differ only in `.` vs `_`."""
    return a.replace(".", "_") == b.replace(".", "_")


def test_a_tenant_cannot_name_another_tenants_topic() -> None:
    mine = target_topic("kadence", "acme", "eu.orders")
    theirs = target_topic("kadence", "acme.eu", "orders")
    assert mine != theirs
    assert not kafka_collides(mine, theirs)
    assert not kafka_collides(target_topic("kadence", "acme", "eu_orders"), theirs)
    assert not kafka_collides(
        target_topic("kadence", "acme_eu", "orders"), target_topic("kadence", "acme.eu", "orders")
    )


@given(TENANTS, TOPICS, TENANTS, TOPICS)
def test_two_tenants_topics_never_meet_even_with_dots_read_as_underscores(
    t1: str, p1: str, t2: str, p2: str
) -> None:
    if t1 != t2:
        assert not kafka_collides(target_topic("ns", t1, p1), target_topic("ns", t2, p2))
    elif p1 != p2:
        assert target_topic("ns", t1, p1) != target_topic("ns", t2, p2)


@pytest.mark.parametrize(
    ("tenant", "name"),
    [
        ("acme", "kadence.to.acme.orders"),
        ("acme-corp", "kadence.to.acme-corp.orders"),
        ("Acme2", "kadence.to.Acme2.orders"),
        ("acme.eu", "kadence.to.acme--2eeu.orders"),
        ("acme_eu", "kadence.to.acme--5feu.orders"),
        ("a--b", "kadence.to.a--2d--2db.orders"),
    ],
)
def test_plain_tenants_keep_their_topic_names(tenant: str, name: str) -> None:
    assert target_topic("kadence", tenant, "orders") == name
    assert re.fullmatch(r"[A-Za-z0-9._-]+", name)


def definition(tenant: str, topic: str) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "job_id": "to-kafka",
        "version": 1,
        "schedule": {"kind": "cron", "expression": "* * * * *"},
        "target": {"kind": "kafka", "topic": topic},
    }


def test_a_topic_name_kafka_would_refuse_is_refused_when_the_job_is_written() -> None:
    with pytest.raises(ValidationError, match="249 characters"):
        ScheduleDefinition.model_validate(definition("a" * 100, "b" * 100))
    # the escaped tenant counts: 60 dots take 240 characters in the name
    with pytest.raises(ValidationError, match=r"the tenant as `a--2e"):
        ScheduleDefinition.model_validate(definition("a" + "." * 60, "orders"))


def test_the_longest_accepted_pair_fits_under_the_longest_namespace() -> None:
    topic = "b" * (MAX_TENANT_AND_TOPIC - len("acme."))
    ok = ScheduleDefinition.model_validate(definition("acme", topic))
    assert isinstance(ok.target, KafkaTarget)
    assert len(target_topic("n" * MAX_NAMESPACE, "acme", topic)) == MAX_TOPIC_NAME
    with pytest.raises(ValidationError):
        ScheduleDefinition.model_validate(definition("acme", topic + "b"))
    with pytest.raises(ValidationError):  # the settings cannot make the namespace longer
        KadenceSettings(namespace="n" * (MAX_NAMESPACE + 1))


def execution(tenant: str, topic: str = "orders", **kw: Any) -> ExecutionRequested:
    example = examples()["ExecutionRequested"]
    assert isinstance(example, ExecutionRequested)
    return example.model_copy(
        update={
            "tenant": tenant,
            "target": KafkaTarget(topic=topic),
            "execution_id": f"{tenant}/nightly-report@2026-03-29T00:30:00.000Z",
            **kw,
        }
    )


class Msg:
    """A consumed record as the consumer sees it."""

    def __init__(
        self, ex: ExecutionRequested, headers: list[tuple[str, str | bytes | None]] | None = None
    ) -> None:
        codec = Codec()
        self._value = codec.encode(ex)
        self._key = ex.key.encode()
        own = headers_for(ex, codec.schema_fingerprint(ExecutionRequested))
        self._headers = own if headers is None else headers

    def value(self) -> bytes | None:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def headers(self) -> list[tuple[str, str | bytes | None]] | None:
        return self._headers


def test_the_consumer_refuses_another_tenants_executions() -> None:
    consumer = TopicConsumer("127.0.0.1:9", "kadence.to.acme.orders", "acme", tenant="acme")
    intruder = execution("acme.eu")  # what the old names put on acme's topic
    assert consumer.accept(Msg(intruder)) is None
    spoofed = Msg(execution("acme"), headers=[("Kadence-Tenant", b"globex")])
    assert consumer.accept(spoofed) is None
    assert consumer.refusals.count("foreign_tenant") == 2
    own = execution("acme")
    accepted = consumer.accept(Msg(own))
    assert accepted is not None
    assert accepted.execution_id == own.execution_id
    consumer.consumer.close()


def test_the_async_adapter_refuses_another_tenants_executions() -> None:
    raw = [Codec().encode(execution(t)) for t in ("acme.eu", "acme")]

    async def stream() -> AsyncIterator[bytes]:
        for value in raw:
            yield value

    async def collect() -> list[str]:
        return [e.tenant async for e in executions(stream(), tenant="acme")]

    assert asyncio.run(collect()) == ["acme"]


@pytest.mark.slow
def test_a_tenant_cannot_block_another_tenants_topic_on_a_real_broker(
    settings: KadenceSettings,
) -> None:
    caller = KafkaTopicCaller(settings.bootstrap_servers, settings.namespace, 1, Codec())
    try:
        first = caller(execution("acme", "eu_orders"), Stop(), time.monotonic() + 30)
        assert first.status is OutcomeStatus.succeeded
        # before: kadence.to.acme.eu.orders, which Kafka refused as colliding with acme's
        # kadence.to.acme.eu_orders, so every run of acme.eu's job failed
        second = caller(execution("acme.eu", "orders"), Stop(), time.monotonic() + 30)
        assert second.status is OutcomeStatus.succeeded, second.error
    finally:
        caller.close()  # both records were acknowledged: nothing left to flush
    topics = (
        AdminClient({"bootstrap.servers": settings.bootstrap_servers})
        .list_topics(timeout=10)
        .topics
    )
    assert target_topic(settings.namespace, "acme", "eu_orders") in topics
    assert target_topic(settings.namespace, "acme.eu", "orders") in topics
