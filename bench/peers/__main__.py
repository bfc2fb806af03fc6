"""`python -m bench.peers {apscheduler,celery,temporal,dbscheduler,all} --jobs N`
(`make bench-peers`). Results in bench/results/peer-<peer>-<N>.json; Kadence's own figure for
the same workload comes from `python -m bench.execution throughput --jobs N`.

`python -m bench.peers dbscheduler-sustained --rates 500,1000,2000 --seconds 60 [--poll-ms 500]`
(`make bench-peers-sustained`): db-scheduler under B2's open-loop load, judged as
`python -m bench.sustained` judges Kadence; results in
bench/results/peer-dbscheduler-sustained-poll<ms>.json."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.peers import (
    apscheduler_peer,
    celery_peer,
    dbscheduler_peer,
    dbscheduler_sustained,
    temporal_peer,
)
from bench.peers.common import save
from bench.scheduler import RESULTS

PEERS: dict[str, Callable[[int], dict[str, Any]]] = {
    "apscheduler": apscheduler_peer.run,
    "celery": celery_peer.run,
    "temporal": temporal_peer.run,
    "dbscheduler": dbscheduler_peer.run,
}
SUSTAINED = "dbscheduler-sustained"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.peers", description=__doc__)
    parser.add_argument("peer", choices=[*PEERS, "all", SUSTAINED])
    parser.add_argument("--jobs", type=int, default=10_000)
    sustained = parser.add_argument_group(SUSTAINED)
    sustained.add_argument("--rates", default="500,1000,2000")
    sustained.add_argument("--seconds", type=int, default=60)
    sustained.add_argument("--poll-ms", type=int, default=500)
    sustained.add_argument("--threads", type=int, default=64)
    sustained.add_argument("--grace", type=float, default=None, help="s after the window")
    sustained.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.peer == SUSTAINED:
        rates = [int(r) for r in args.rates.split(",")]
        res = dbscheduler_sustained.run(
            rates, args.seconds, threads=args.threads, poll_ms=args.poll_ms, grace_s=args.grace
        )
        args.results.mkdir(parents=True, exist_ok=True)
        path = args.results / f"peer-dbscheduler-sustained-poll{args.poll_ms}.json"
        path.write_text(json.dumps(res, indent=2) + "\n")
        print(f"knee (db-scheduler, poll {args.poll_ms} ms): {res['knee_per_s']}/s -> {path}")
        return 0
    for name in PEERS if args.peer == "all" else [args.peer]:
        print(f"== {name}: {args.jobs} jobs due at the same second")
        save(PEERS[name](args.jobs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
