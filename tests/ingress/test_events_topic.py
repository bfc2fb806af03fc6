"""The ingress tells a tenant its events on the tenant's events topic, made at its first event.
A topic the ingress may not make (the ACLs grant it only the listed tenants') costs one try and
one log line per tenant a minute, not one per event."""

from __future__ import annotations

import pytest

from kadence.clock import FakeClock
from kadence.errors import TopicError
from kadence.settings import KadenceSettings
from streams.ingress import loop as ingress_loop
from streams.ingress.events import TenantEvent
from streams.ingress.loop import UNMADE_RETRY_MS, IngressLoop
from streams.runtime.records import InputRecord
from testkit.driver.cluster import Cluster
from testkit.driver.memkafka import MemoryClients


def test_a_tenant_whose_events_topic_cannot_be_made_is_tried_once_a_minute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    cluster = Cluster(clock)
    loop = IngressLoop(KadenceSettings(namespace="ns"), MemoryClients(cluster), clock)
    tried: list[str] = []

    def refused(_settings: KadenceSettings, tenant: str) -> None:
        tried.append(tenant)
        raise TopicError(f"not authorized to create ns.to.{tenant}.kadence-events")

    monkeypatch.setattr(ingress_loop, "provision_events", refused)
    event = TenantEvent("unlisted", b"k", b"v")
    monkeypatch.setattr(loop.events, "of", lambda _record: event)
    record = InputRecord("ns.rejected", 0, 0, b"k", b"v", [], 0)
    for _ in range(50):
        loop._tell(record)
    assert (tried, loop.stats.untold, loop.stats.told) == (["unlisted"], 50, 0)
    clock.advance(UNMADE_RETRY_MS + 1)
    loop._tell(record)
    assert tried == ["unlisted", "unlisted"]
