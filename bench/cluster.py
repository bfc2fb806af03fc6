"""B4 on a three-node cluster: the same steady load as bench.failover while one node, then the
leader of `executions` partition 0, is killed -9 and restarted; measured as B4 measures it
(`bench.failover.measure`: start lateness before and from the kill, the time from the kill to
the last start later than 1 s, the checker's counts).

    python -m bench.cluster [--jobs 24] [--seconds 60] [--seed 1]   (make bench-cluster)
    python -m bench.cluster --fault node-kill --runs 3   # one fault, three runs (seeds 1, 2, 3)

The cluster is started for the run (three local KRaft nodes on free ports, infra/kafka/
cluster.py) and stopped after it; results go to bench/results/cluster-<fault>.json, and the
checker's events to cluster-<fault>-history.jsonl (to look into a finding); with --runs, every
run's figures are appended to cluster-<fault>-runs.jsonl.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench.failover import measure
from bench.scheduler import RESULTS
from infra.kafka import cluster
from infra.kafka.config import BrokerConfig
from testkit import history_io
from testkit.chaos_run import Run
from testkit.cluster_chaos import failover, leader_of_executions, random_node
from testkit.ports import free_ports

FAULTS = {"node-kill": random_node, "leader-kill": leader_of_executions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.cluster", description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--fault", choices=[*FAULTS, "both"], default="both")
    parser.add_argument("--runs", type=int, default=1, help="runs of each fault, one cluster")
    args = parser.parse_args(argv)
    faults = list(FAULTS) if args.fault == "both" else [args.fault]
    root = Path(tempfile.mkdtemp(prefix="kadence-cluster-"))
    base = BrokerConfig.from_env(home=root / "cluster", port=free_ports(3 * cluster.SPACING))
    nodes = cluster.cluster_configs(base)
    args.results.mkdir(parents=True, exist_ok=True)
    failed = 0
    try:
        bootstrap = cluster.start_cluster(nodes, quiet=True)
        for i, name in ((i, name) for i in range(args.runs) for name in faults):
            run = Run(name, args.seed + i, bootstrap, root / f"{name}-{i}").start()
            try:
                result = failover(run, nodes, FAULTS[name], jobs=args.jobs, seconds=args.seconds)
            finally:
                run.stop()
                run.cleanup()
            figures = {"fault": name, "seed": args.seed + i, "node": result.killed}
            figures |= measure(result.events, result.killed_at_ms)
            figures["checker_ok"] = result.report.ok
            if args.runs > 1:
                with (args.results / f"cluster-{name}-runs.jsonl").open("a") as runs:
                    runs.write(json.dumps(figures) + "\n")
            (args.results / f"cluster-{name}.json").write_text(json.dumps(figures, indent=2))
            history_io.write(args.results / f"cluster-{name}-history.jsonl", result.events)
            print(json.dumps(figures, indent=2), result.report.render(), sep="\n", flush=True)
            failed += not result.report.ok
    finally:
        cluster.stop_cluster(nodes)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
