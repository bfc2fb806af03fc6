"""Fetch, start, stop and inspect a local single-node Apache Kafka broker (KRaft).

The broker tarball is not reachable from every machine Kadence is built on, but Maven Central
is, and `org.apache.kafka:kafka_2.13` with its runtime dependencies *is* the broker. This module
assembles those jars with Maven once into a cache folder, formats KRaft storage once per data
directory, and runs `kafka.Kafka` as a combined broker+controller on 127.0.0.1.

Environment (all optional):
    KADENCE_BOOTSTRAP_SERVERS  an existing cluster: start nothing, only check it answers.
    KAFKA_HOME                 a Kafka install whose libs/ replace the Maven download.
    KADENCE_KAFKA_VERSION      the Kafka version fetched from Maven Central (default below).
    KADENCE_CACHE_DIR          where fetched jars live (default ~/.cache/kadence).
    KADENCE_KAFKA_DIR          broker home: config, data, log, pid (default <repo>/.run/kafka).
    KADENCE_KAFKA_PORT         client port (default 19092); the controller uses port + 1.
                               port + 2 is a second client listener that advertises port + 3,
                               where the chaos suite's network-fault proxy listens
                               (testkit/netproxy.py); nothing else uses either.

Usage: python -m infra.kafka.kafkactl {fetch,start,stop,kill,status,bootstrap} [--home DIR]
       python -m infra.kafka.kafkactl {cluster-start,cluster-stop,cluster-status} (three nodes)

This module is the command line; the parts are config.py (paths, ports, server properties),
fetch.py (the jars) and broker.py (the process). It re-exports what tests and apps.stack use.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from infra.kafka import cluster
from infra.kafka.broker import broker_answers, kill, rss_bytes, running_pid, start, stop
from infra.kafka.config import KAFKA_VERSION, BrokerConfig, BrokerError, env, server_properties
from infra.kafka.fetch import fetch

__all__ = [
    "KAFKA_VERSION",
    "BrokerConfig",
    "BrokerError",
    "broker_answers",
    "fetch",
    "kill",
    "main",
    "rss_bytes",
    "running_pid",
    "server_properties",
    "start",
    "stop",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkactl", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "command",
        choices=[
            "fetch", "start", "stop", "kill", "status", "bootstrap",
            "cluster-start", "cluster-stop", "cluster-status",
        ],
    )  # fmt: skip
    parser.add_argument("--home", type=Path, default=None, help="broker home directory")
    parser.add_argument("--port", type=int, default=None, help="client port (controller: +1)")
    args = parser.parse_args(argv)
    cfg = BrokerConfig.from_env(home=args.home, port=args.port)
    if args.command.startswith("cluster-"):
        return _cluster(args.command, args.home, args.port)
    try:
        if args.command == "fetch":
            fetch(cfg)
        elif args.command == "start":
            start(cfg)
        elif args.command == "stop":
            stop(cfg)
        elif args.command == "kill":
            return 0 if kill(cfg) else 1
        elif args.command == "bootstrap":
            print(env("KADENCE_BOOTSTRAP_SERVERS") or cfg.bootstrap)
        else:
            pid = running_pid(cfg)
            up = broker_answers(env("KADENCE_BOOTSTRAP_SERVERS") or cfg.bootstrap)
            rss = rss_bytes(cfg)
            print(
                f"broker home={cfg.home} pid={pid} bootstrap={cfg.bootstrap} answers={up}"
                + (f" rss={rss / 2**20:.0f}MiB" if rss else "")
            )
            return 0 if up else 1
    except BrokerError as exc:
        print(f"kafkactl: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _cluster(command: str, home: Path | None, port: int | None) -> int:
    """A local three-node cluster (infra/kafka/cluster.py): homes under `home` (default
    .run/cluster), client ports `port` (default 29092), +10, +20."""
    base = BrokerConfig.from_env(home=home or cluster.default_home(), port=port or 29092)
    nodes = cluster.cluster_configs(base)
    try:
        if command == "cluster-start":
            print(f"kafkactl: cluster up at {cluster.start_cluster(nodes)}")
        elif command == "cluster-stop":
            cluster.stop_cluster(nodes)
        else:
            for node in nodes:
                up = broker_answers(node.bootstrap)
                print(f"node {node.node_id} pid={running_pid(node)} {node.bootstrap} answers={up}")
    except BrokerError as exc:
        print(f"kafkactl: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
