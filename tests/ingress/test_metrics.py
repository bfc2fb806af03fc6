"""The ingress's metrics without a broker (issue 43, item 4): each record counted once, under
the tenant its topic names, accepted or rejected, when its batch's transaction commits (an
aborted batch, read again, is not counted twice); the tenant label is bounded like the other
processes' (the 101st tenant is `other`); and a hostile topic name is no label."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kadence.clock import FakeClock
from kadence.codec import Codec
from kadence.metrics import LagCollector
from kadence.settings import KadenceSettings
from kadence.target_topics import ingress_topic
from streams.ingress import loop as ingress_loop
from streams.ingress.loop import IngressLoop
from streams.ingress.metrics import IngressMetrics
from streams.ingress.route import Router
from streams.kafkaio.session import Outcome
from testkit.driver.cluster import Cluster
from testkit.driver.memkafka import MemoryClients

NS = "ns"


class Msg:
    def __init__(self, topic: str, offset: int, value: bytes) -> None:
        self._topic, self._offset, self._value = topic, offset, value

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"acme/nightly"

    def value(self) -> bytes:
        return self._value

    def headers(self) -> list[tuple[str, bytes]]:
        return []

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)


def definition(tenant: str) -> bytes:
    return json.dumps(
        {
            "tenant": tenant,
            "job_id": "nightly",
            "version": 1,
            "schedule": {"kind": "cron", "expression": "0 3 * * *"},
            "target": {"kind": "kafka", "topic": "runs"},
        }
    ).encode()


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


@pytest.fixture
def loop(monkeypatch: pytest.MonkeyPatch) -> IngressLoop:
    clock = FakeClock()
    loop = IngressLoop(KadenceSettings(namespace=NS), MemoryClients(Cluster(clock)), clock)
    loop.router = Router(loop.topics, loop.settings.partitions, Codec())  # no view: no quota
    monkeypatch.setattr(loop.session, "begin", lambda: None)
    monkeypatch.setattr(loop.session, "produce", lambda *_a: None)
    monkeypatch.setattr(loop.consumer, "consumer_group_metadata", lambda: None)
    monkeypatch.setattr(loop.consumer, "seek", lambda _tp: None)
    return loop


def batch(monkeypatch: pytest.MonkeyPatch, loop: IngressLoop, msgs: list[Any], ok: bool) -> None:
    """One turn of the loop on `msgs`, its transaction committed (`ok`) or aborted."""
    monkeypatch.setattr(ingress_loop, "ready", lambda *_a: msgs)
    outcome = Outcome.committed if ok else next(o for o in Outcome if o is not Outcome.committed)
    monkeypatch.setattr(loop.session, "commit", lambda *_a: outcome)
    loop.turn()


def test_records_are_counted_per_tenant_and_result_once_their_batch_commits(
    monkeypatch: pytest.MonkeyPatch, loop: IngressLoop
) -> None:
    acme = ingress_topic(NS, "acme", "schedules")
    msgs = [
        Msg(acme, 0, definition("acme")),  # accepted
        Msg(acme, 1, definition("globex")),  # names another tenant: rejected
        Msg(acme, 2, b"not json"),  # rejected
        Msg(f"{NS}.from.bad_topic.schedules", 0, definition("acme")),  # names no tenant
    ]
    registry = loop.metrics.registry
    name = "kadence_ingress_records_total"
    batch(monkeypatch, loop, msgs, ok=False)  # aborted: read again, so not counted yet
    assert sample(registry, name, tenant="acme", result="accepted") == 0
    assert sample(registry, "kadence_ingress_transactions_aborted_total") == 1
    batch(monkeypatch, loop, msgs, ok=True)
    assert sample(registry, name, tenant="acme", result="accepted") == 1
    assert sample(registry, name, tenant="acme", result="rejected") == 2
    assert sample(registry, name, tenant="", result="rejected") == 1
    assert {
        s.labels["tenant"]
        for f in registry.collect()
        for s in f.samples
        if s.labels.get("tenant") is not None
    } == {"acme", ""}


def test_the_tenant_label_is_bounded() -> None:
    metrics = IngressMetrics()
    metrics.committed(Counter({(f"t{i}", "accepted"): 1 for i in range(150)}), Counter())
    tenants = {
        s.labels["tenant"]
        for f in metrics.registry.collect()
        for s in f.samples
        if s.name == "kadence_ingress_records_total"
    }
    assert len(tenants) == 101 and "other" in tenants
    assert (
        sample(metrics.registry, "kadence_ingress_records_total", tenant="other", result="accepted")
        == 50
    )


def test_the_lag_is_served_with_the_ingress_group(loop: IngressLoop) -> None:
    loop.lag.per_topic = {ingress_topic(NS, "acme", "schedules"): 7}
    loop.metrics.registry.register(LagCollector(loop.lag))
    assert (
        sample(
            loop.metrics.registry,
            "kadence_consumer_lag_records",
            group=f"{NS}.ingress",
            topic=ingress_topic(NS, "acme", "schedules"),
        )
        == 7
    )
