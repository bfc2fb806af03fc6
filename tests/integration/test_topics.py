"""Topic provisioning against a real broker: creates, verifies, and refuses mismatches."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.cimpl import NewTopic

from kadence.errors import TopicError, TopicMismatchError
from kadence.provisioning import delete_namespace, provision
from kadence.settings import KadenceSettings
from kadence.topics import ALL_TOPICS, SCHEDULES, partitions_of


def _settings(bootstrap: str, **kw: int) -> KadenceSettings:
    ns = f"prov-{uuid.uuid4().hex[:8]}"
    return KadenceSettings(bootstrap_servers=bootstrap, namespace=ns, **kw)  # type: ignore[arg-type]


def test_provision_creates_every_topic_with_its_policy(kafka_bootstrap: str) -> None:
    s = _settings(kafka_bootstrap, partitions=4, execution_partitions=2)
    try:
        created = provision(s)
        assert sorted(created) == sorted(spec.name(s.namespace) for spec in ALL_TOPICS)
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        meta = admin.list_topics(timeout=10).topics
        resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in created]
        configs = {r.name: f.result() for r, f in admin.describe_configs(resources).items()}
        for spec in ALL_TOPICS:
            name = spec.name(s.namespace)
            assert len(meta[name].partitions) == partitions_of(spec, s)
            for key, value in spec.config().items():
                assert configs[name][key].value == value, (name, key)
            assert configs[name]["min.insync.replicas"].value == "1"  # one broker: 1 copy
            assert all(len(p.replicas) == 1 for p in meta[name].partitions.values())
        assert configs[SCHEDULES.name(s.namespace)]["cleanup.policy"].value == "compact"
        assert provision(s) == []  # idempotent
    finally:
        delete_namespace(s)


def test_more_copies_than_brokers_is_a_clear_error_not_a_half_made_namespace(
    kafka_bootstrap: str,
) -> None:
    s = _settings(kafka_bootstrap, replication_factor=3)
    try:
        with pytest.raises(TopicError, match=r"needs 3 brokers and the cluster .* has 1 broker"):
            provision(s)
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        mine = [t for t in admin.list_topics(timeout=10).topics if t.startswith(s.namespace)]
        assert mine == []  # refused before anything was created
    finally:
        delete_namespace(s)


def test_partition_count_mismatch_is_refused(kafka_bootstrap: str) -> None:
    s = _settings(kafka_bootstrap, partitions=3, execution_partitions=3)
    try:
        provision(s)
        with pytest.raises(TopicMismatchError) as err:
            provision(s.model_copy(update={"execution_partitions": 6}))
        message = str(err.value)
        assert f"{s.namespace}.executions has 3 partitions, Kadence needs 6" in message
        assert "Fix:" in message
    finally:
        delete_namespace(s)


def test_cleanup_policy_mismatch_is_refused(kafka_bootstrap: str) -> None:
    s = _settings(kafka_bootstrap, partitions=2, execution_partitions=2)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    name = SCHEDULES.name(s.namespace)
    wrong = NewTopic(
        name, num_partitions=2, replication_factor=1, config={"cleanup.policy": "delete"}
    )
    for f in admin.create_topics([wrong]).values():
        f.result()
    try:
        with pytest.raises(TopicMismatchError, match=f"{name} has cleanup.policy=delete"):
            provision(s)
    finally:
        delete_namespace(s)
