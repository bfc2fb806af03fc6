"""Failover on a three-node cluster (infra/kafka/cluster.py): a steady job mix while one broker
is killed -9 and later restarted, or while the leader of `executions` partition 0 is; the chaos
checker then says whether anything was lost, doubled under another key or run early, and the
runs' lateness says how long after the kill they were back on time.

    python -m testkit.cluster_chaos            (make bench-cluster; the smoke tier is in make test)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient

from infra.kafka import cluster
from infra.kafka.config import BrokerConfig
from kadence.topics import Topics
from testkit.chaos_run import Run, now_ms
from testkit.checker import Event, Report, check
from testkit.ports import free_ports

ON_TIME_MS = 1_000


@dataclass
class Failover:
    report: Report
    killed: int
    """The node killed."""
    back_on_time_s: float | None
    """From the kill until every later run started within a second of its due time (None: they
    never were again in the run)."""
    worst_late_s: float


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
    late = lateness(events, killed_at)
    return Failover(check(events), node.node_id, *late)


def lateness(events: list[Event], since_ms: int) -> tuple[float | None, float]:
    """(seconds from `since_ms` until runs were on time again, the worst lateness in s)."""
    hits = sorted(
        (int(e["due_ms"]), int(e["at_ms"]) - int(e["due_ms"]))
        for e in events
        if e["kind"] == "hit" and int(e["attempt"]) == 1 and int(e["due_ms"]) >= since_ms
    )
    if not hits:
        return None, 0.0
    worst = max(late for _, late in hits) / 1000
    late_dues = [due for due, late in hits if late >= ON_TIME_MS]
    if not late_dues:
        return 0.0, worst
    if late_dues[-1] == hits[-1][0]:
        return None, worst
    return (late_dues[-1] - since_ms) / 1000, worst


def random_node(run: Run, nodes: list[BrokerConfig]) -> BrokerConfig:
    return run.rng.choice(nodes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cluster_chaos", description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=24)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="kadence-cluster-"))
    base = BrokerConfig.from_env(home=root / "cluster", port=free_ports(3 * cluster.SPACING))
    nodes = cluster.cluster_configs(base)
    ok = True
    try:
        bootstrap = cluster.start_cluster(nodes, quiet=True)
        for name, pick in (("node-kill", random_node), ("leader-kill", leader_of_executions)):
            run = Run(name, args.seed, bootstrap, root / name).start()
            try:
                result = failover(run, nodes, pick, jobs=args.jobs, seconds=args.seconds)
            finally:
                run.stop()
                run.cleanup()
            back = "never" if result.back_on_time_s is None else f"{result.back_on_time_s:.1f} s"
            print(f"{name}: node {result.killed} killed; back on time after {back}; worst "
                  f"lateness {result.worst_late_s:.1f} s\n{result.report.render()}")  # fmt: skip
            ok = ok and result.report.ok
    finally:
        cluster.stop_cluster(nodes)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
