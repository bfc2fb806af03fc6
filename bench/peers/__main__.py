"""`python -m bench.peers {apscheduler,celery,temporal,dbscheduler,all} --jobs N`
(`make bench-peers`). Results in bench/results/peer-<peer>-<N>.json; Kadence's own figure for
the same workload comes from `python -m bench.execution throughput --jobs N`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from bench.peers import apscheduler_peer, celery_peer, dbscheduler_peer, temporal_peer
from bench.peers.common import save

PEERS: dict[str, Callable[[int], dict[str, Any]]] = {
    "apscheduler": apscheduler_peer.run,
    "celery": celery_peer.run,
    "temporal": temporal_peer.run,
    "dbscheduler": dbscheduler_peer.run,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.peers", description=__doc__)
    parser.add_argument("peer", choices=[*PEERS, "all"])
    parser.add_argument("--jobs", type=int, default=10_000)
    args = parser.parse_args(argv)
    for name in PEERS if args.peer == "all" else [args.peer]:
        print(f"== {name}: {args.jobs} jobs due at the same second")
        save(PEERS[name](args.jobs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
