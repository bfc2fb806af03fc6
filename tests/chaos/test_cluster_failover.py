"""Failover on a local three-node cluster (issue 18, item 3), the smoke tier: one broker
killed -9 and restarted while a steady job mix runs; the chaos checker finds nothing lost,
doubled under another key or early. `make bench-cluster` (bench/cluster.py) runs it longer,
and also kills a random node."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from infra.kafka import cluster
from infra.kafka.config import BrokerConfig
from kadence.topics import Topics
from testkit.chaos_run import Run
from testkit.cluster_chaos import failover, leader_of_executions
from testkit.ports import free_ports


@pytest.fixture
def nodes(kafka_bootstrap: str, tmp_path: Path) -> Iterator[list[BrokerConfig]]:
    """Three nodes of their own; all stopped afterwards, also when their start fails."""
    base = BrokerConfig.from_env()
    home = BrokerConfig(
        home=tmp_path / "cluster",
        port=free_ports(3 * cluster.SPACING),
        cache_dir=base.cache_dir,
        kafka_home=base.kafka_home,
        kafka_version=base.kafka_version,
        heap="384m",
    )
    members = cluster.cluster_configs(home)
    try:
        cluster.start_cluster(members, quiet=True)
        yield members
    finally:
        cluster.stop_cluster(members)


@pytest.mark.slow
def test_the_leader_of_executions_killed_and_restarted_loses_nothing(
    nodes: list[BrokerConfig], tmp_path: Path
) -> None:
    run = Run("cluster-leader-kill", 7, cluster.bootstrap(nodes), tmp_path / "run").start()
    try:
        topic = Topics(run.settings).executions
        meta = AdminClient({"bootstrap.servers": run.bootstrap}).list_topics(topic, timeout=10)
        assert {len(p.replicas) for p in meta.topics[topic].partitions.values()} == {3}
        result = failover(run, nodes, leader_of_executions, jobs=8, seconds=30, down_s=8)
    finally:
        run.stop()
    print(result.report.render())
    assert result.report.ok, result.report.render()
    assert result.report.expected > 100
    assert result.report.kafka_records > 20  # with Kafka-topic jobs, read back exactly once
    run.cleanup()
