"""The connections topic read whole (streams/connections.py) against the broker: the latest
record of each connection, deletes remembered, and records that are not the API's (garbage, a
record keyed as another tenant's, JSON) skipped without stopping the reader."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from confluent_kafka import Producer

from kadence.codec import Codec
from kadence.connections import CREDENTIAL, seal
from kadence.sealing import Keyring, new_key
from kadence.settings import KadenceSettings
from kadence.topics import CONNECTIONS
from streams.connections import ConnectionStore
from streams.kafkaio.clients import KafkaClients

pytestmark = pytest.mark.kafka
T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def test_the_store_keeps_the_latest_skips_forgeries_and_remembers_deletes(
    settings: KadenceSettings,
) -> None:
    keyring = Keyring.from_settings({"k1": new_key()}, None)
    assert keyring is not None
    codec = Codec()
    topic = CONNECTIONS.name(settings.namespace)
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers})

    def record(tenant: str, name: str, version: int, token: str) -> bytes:
        cred = CREDENTIAL.validate_python({"kind": "bearer", "token": token})
        made = seal(keyring, cred, tenant=tenant, name=name, version=version, changed_at=T)
        return codec.encode(made)

    producer.produce(topic, key=b"acme/svc", value=record("acme", "svc", 1, "one"), partition=0)
    producer.produce(topic, key=b"acme/svc", value=b"\x00garbage", partition=0)
    producer.produce(topic, key=b"acme/other", value=record("globex", "other", 1, "x"), partition=0)
    producer.produce(topic, key=b"acme/json", value=b'{"tenant": "acme"}', partition=0)
    producer.produce(topic, key=b"acme/svc", value=record("acme", "svc", 2, "two"), partition=0)
    producer.produce(topic, key=b"acme/gone", value=record("acme", "gone", 1, "g"), partition=0)
    producer.produce(topic, key=b"acme/gone", value=None, partition=0)
    assert producer.flush(30) == 0

    store = ConnectionStore(KafkaClients(settings), settings.namespace, "test").start()
    try:
        assert store.wait_ready(30)  # what was there at start, all read
        svc = store.get("acme", "svc")
        assert svc is not None and svc.version == 2
        assert store.skipped == 3  # garbage, another tenant's record under acme's key, JSON
        assert store.get("acme", "other") is None
        assert store.get("acme", "gone") is None and store.deleted_at("acme", "gone") is not None
        assert [r.name for r in store.of_tenant("acme")] == ["svc"]
        assert store.of_tenant("globex") == []
        producer.produce(topic, key=b"acme/new", value=record("acme", "new", 1, "n"), partition=0)
        producer.flush(30)
        assert store.wait_for(7, 30)  # written after start: read as it comes
        assert store.get("acme", "new") is not None
    finally:
        store.close()
