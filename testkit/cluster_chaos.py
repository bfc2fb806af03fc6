"""Failover on a three-node cluster (infra/kafka/cluster.py): a steady job mix while one broker
is killed -9 and later restarted, or while the leader of `executions` partition 0 is; the chaos
checker then says whether anything was lost, doubled under another key or run early. The smoke
tier is tests/chaos/test_cluster_failover.py; `bench.cluster` (make bench-cluster) measures it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from infra.kafka import cluster
from infra.kafka.config import BrokerConfig
from kadence.topics import Topics
from testkit.chaos_run import Run, now_ms
from testkit.checker import Event, Report, check

ON_TIME_MS = 1_000


@dataclass
class Failover:
    report: Report
    killed: int
    """The node killed."""
    killed_at_ms: int
    events: list[Event]
    """The run's history (the checker's events), for measuring lateness around the kill."""


def leader_of_executions(run: Run, nodes: list[BrokerConfig]) -> BrokerConfig:
    topic = Topics(run.settings).executions
    meta = AdminClient({"bootstrap.servers": run.bootstrap}).list_topics(topic, timeout=10)
    leader = meta.topics[topic].partitions[0].leader
    return next(n for n in nodes if n.node_id == leader)


def failover(
    run: Run,
    nodes: list[BrokerConfig],
    pick: Callable[[Run, list[BrokerConfig]], BrokerConfig],
    *,
    jobs: int = 12,
    seconds: int = 40,
    down_s: float = 10,
) -> Failover:
    """`jobs` per-second jobs for `seconds` s; a third of the way in, kill -9 the node `pick`
    chooses, restart it `down_s` s later; then quiesce and check."""
    _defs, end = run.jobs(jobs, seconds)
    run.sleep_until(end - seconds * 1000 * 2 // 3)
    node = pick(run, nodes)
    run.say(f"kill -9 broker node {node.node_id}")
    killed_at = now_ms()
    cluster.kill_node(node)
    time.sleep(down_s)
    run.say(f"restart broker node {node.node_id}")
    cluster.restart_node(node)
    events = run.quiesce(end)
    return Failover(check(events), node.node_id, killed_at, events)


def random_node(run: Run, nodes: list[BrokerConfig]) -> BrokerConfig:
    return run.rng.choice(nodes)
