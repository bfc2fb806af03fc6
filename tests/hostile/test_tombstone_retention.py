"""Issue 14, item 12: a delete on `schedules` (and on the changelogs) outlives a reader's outage.

Before: the broker default `delete.retention.ms` (one day) applied, so a query view or a
restoring processor down for longer read past a compacted-away tombstone and kept the job.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.cimpl import NewTopic

from kadence.provisioning import delete_namespace, provision
from kadence.settings import KadenceSettings
from kadence.topics import (
    ALL_TOPICS,
    CHANGELOG_COMPACTION,
    DAY_MS,
    SCHEDULES,
    TOMBSTONE_RETENTION_MS,
)
from testkit.stack import until

WEEK_MS = 7 * DAY_MS


def test_every_compacted_topic_keeps_deletes_for_a_week() -> None:
    assert TOMBSTONE_RETENTION_MS >= WEEK_MS
    for spec in ALL_TOPICS:
        if spec.cleanup == "compact":
            assert int(spec.config()["delete.retention.ms"]) >= WEEK_MS, spec.suffix


def delete_retention(admin: AdminClient, topic: str) -> int | None:
    """The topic's delete.retention.ms; None while the broker does not know the topic yet."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    [future] = admin.describe_configs([resource]).values()
    try:
        return int(future.result(timeout=30)["delete.retention.ms"].value)
    except KafkaException:
        return None


@pytest.fixture
def namespace(kafka_bootstrap: str) -> Iterator[KadenceSettings]:
    s = KadenceSettings(
        bootstrap_servers=kafka_bootstrap,
        namespace=f"test-{uuid.uuid4().hex[:10]}",
        partitions=1,
        execution_partitions=1,
    )
    yield s
    delete_namespace(s)


def test_a_provisioned_schedules_topic_keeps_deletes_for_a_week(
    namespace: KadenceSettings,
) -> None:
    provision(namespace)
    admin = AdminClient({"bootstrap.servers": namespace.bootstrap_servers})
    assert delete_retention(admin, SCHEDULES.name(namespace.namespace)) == WEEK_MS
    changelog = f"{namespace.namespace}.scheduler-changelog"  # created with its compaction
    for key, value in CHANGELOG_COMPACTION:
        assert topic_config(admin, changelog, key) == value, key


def test_provisioning_raises_it_on_an_existing_topic_and_never_lowers_it(
    namespace: KadenceSettings,
) -> None:
    admin = AdminClient({"bootstrap.servers": namespace.bootstrap_servers})
    ns = namespace.namespace
    schedules = SCHEDULES.name(ns)
    changelog = f"{ns}.scheduler-changelog"
    longer = 30 * DAY_MS
    made = admin.create_topics(
        [  # as an older Kadence made them: the broker's one-day default / an operator's choice
            NewTopic(schedules, 1, 1, config={"cleanup.policy": "compact"}),
            NewTopic(
                changelog,
                1,
                1,
                config={"cleanup.policy": "compact", "delete.retention.ms": str(longer)},
            ),
        ]
    )
    for future in made.values():
        future.result(timeout=30)
    until(lambda: delete_retention(admin, schedules) == DAY_MS, 30, "the old topic")
    provision(namespace)
    # the broker applies an altered config a moment after it acknowledged it
    until(lambda: delete_retention(admin, schedules) == WEEK_MS, 30, "the raised retention")
    assert delete_retention(admin, changelog) == longer


def topic_config(admin: AdminClient, topic: str, key: str) -> str | None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    [future] = admin.describe_configs([resource]).values()
    try:
        return str(future.result(timeout=30)[key].value)
    except KafkaException:
        return None


def test_changelogs_roll_segments_so_compaction_happens_on_new_and_existing_topics(
    namespace: KadenceSettings,
) -> None:
    """Issue 30: with the broker's 1 GiB / 7 day segments a 10 M job changelog partition never
    closed its first segment, so it was never compacted. Provisioning sets the compaction
    settings on a changelog it creates and on one an older Kadence created; an operator's own
    value stays."""
    admin = AdminClient({"bootstrap.servers": namespace.bootstrap_servers})
    ns = namespace.namespace
    reaper = f"{ns}.reaper-changelog"
    scheduler = f"{ns}.scheduler-changelog"
    made = admin.create_topics(
        [  # as an older Kadence made it (broker defaults), and one an operator tuned
            NewTopic(reaper, 1, 1, config={"cleanup.policy": "compact"}),
            NewTopic(scheduler, 1, 1, config={"cleanup.policy": "compact", "segment.ms": "600000"}),
        ]
    )
    for future in made.values():
        future.result(timeout=30)
    until(lambda: topic_config(admin, reaper, "segment.bytes") == str(2**30), 30, "old topic")
    provision(namespace)
    wanted = dict(CHANGELOG_COMPACTION)
    until(
        lambda: all(topic_config(admin, reaper, k) == v for k, v in wanted.items()),
        30,
        "the reaper changelog's compaction settings",
    )
    assert topic_config(admin, scheduler, "segment.ms") == "600000"  # the operator's
    assert topic_config(admin, scheduler, "segment.bytes") == wanted["segment.bytes"]
    assert [s.suffix for s in ALL_TOPICS if s.compaction] == [
        "scheduler-changelog",
        "reaper-changelog",
        "connections",  # a rotated or deleted secret's old sealed value is compacted away
    ]
