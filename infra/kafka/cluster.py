"""A local cluster of three KRaft nodes (each broker and controller) from the same jars, for
failover tests and benchmarks: node i listens on `port + 10 * i` (and the next two ports, as a
single broker does), all nodes vote, they share one cluster id, and the brokers' own topics
are replicated 3 times with 2 in sync.

    python -m infra.kafka.kafkactl cluster-start     (make cluster)
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from infra.kafka.broker import kill, launch, running_pid, stop, wait_up
from infra.kafka.config import BrokerConfig
from infra.kafka.fetch import fetch

NODES = 3
SPACING = 10
"""Ports between two nodes' client ports (each node takes port .. port + 4)."""


def cluster_configs(base: BrokerConfig, nodes: int = NODES) -> list[BrokerConfig]:
    """The nodes of a cluster homed under `base.home`, ports from `base.port` up."""
    ports = [base.port + SPACING * i for i in range(nodes)]
    voters = tuple((i + 1, port + 1) for i, port in enumerate(ports))
    cluster_id = hashlib.sha256(str(base.home).encode()).hexdigest()[:22]
    return [
        replace(
            base,
            home=base.home / f"node{i + 1}",
            port=port,
            node_id=i + 1,
            voters=voters,
            cluster_id=cluster_id,
        )
        for i, port in enumerate(ports)
    ]


def bootstrap(nodes: list[BrokerConfig]) -> str:
    return ",".join(n.bootstrap for n in nodes)


def start_cluster(nodes: list[BrokerConfig], wait_s: float = 120.0, quiet: bool = False) -> str:
    """Start every node that is not running, then wait until each answers (a node cannot
    answer before a quorum of them runs, so they start together, not one after another)."""
    fetch(nodes[0], quiet=quiet)
    started = [(n, launch(n)) for n in nodes if running_pid(n) is None]
    for node, proc in started:
        wait_up(node, proc, wait_s, quiet)
    return bootstrap(nodes)


def stop_cluster(nodes: list[BrokerConfig]) -> None:
    for node in nodes:
        stop(node, quiet=True)


def kill_node(node: BrokerConfig) -> bool:
    return kill(node)


def restart_node(node: BrokerConfig, wait_s: float = 120.0) -> str:
    """Start one stopped node of a running cluster and wait until it answers."""
    return wait_up(node, launch(node), wait_s, quiet=True)


def default_home() -> Path:
    return Path(__file__).resolve().parents[2] / ".run" / "cluster"
