"""A destination's rate limit under a burst (issue 42): `--jobs` one-off runs (10 000) due at the
same second against one receiver limited to `--limit` per second (100, burst `--burst`), and
another tenant's run due then. Prints the runs per second as the receiver counted them and as
the workers started them, the largest second of each, how long the burst took, and how late the
other tenant's run arrived. `python -m bench.rate_limit` (a broker at the default address)."""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kadence.client import KadenceClient
from kadence.models import HttpTarget, RateLimit, ScheduleDefinition
from kadence.provisioning import delete_namespace, provision
from kadence.settings import KadenceSettings
from testkit.stack import Stack, execution_settings, outcomes, until
from testkit.target_server import TargetServer


def _job(
    tenant: str, n: int, url: str, run_at: datetime, limit: RateLimit | None
) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": tenant,
            "job_id": f"j{n}",
            "version": 1,
            "schedule": {"kind": "once", "run_at": run_at},
            "target": HttpTarget(url=url, rate_limit=limit),
        }
    )


def _per_second(times: list[float]) -> list[int]:
    first = min(times)
    counts = Counter(math.floor(t - first) for t in times)
    return [counts.get(s, 0) for s in range(max(counts) + 1)]


def burst(settings: KadenceSettings, jobs: int, limit: RateLimit, lead_s: int) -> dict[str, Any]:
    server = TargetServer(keep_alive=True).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stack = Stack.start(settings, Path(tmp))
            try:
                run_at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=lead_s)
                with KadenceClient(settings) as client:
                    client.put_many(
                        [
                            _job("acme", n, f"{server.url}/limited", run_at, limit)
                            for n in range(jobs)
                        ]
                    )
                    client.put_many([_job("globex", 0, f"{server.url}/other", run_at, None)])
                timeout = jobs / limit.per_second * 2 + 120
                server.wait(jobs, "/limited", timeout_s=timeout)
                until(lambda: len(outcomes(settings, jobs + 1)) >= jobs + 1, 120, "every outcome")
            finally:
                stack.stop()
        hits = server.seen("/limited")
        received = _per_second([h.at for h in hits])
        done = [o for o in outcomes(settings, jobs + 1) if o.tenant == "acme"]
        started = _per_second([o.started_at.timestamp() for o in done])
        [other] = server.seen("/other")
        return {
            "jobs": jobs,
            "limit_per_second": limit.per_second,
            "burst": limit.burst,
            "received_per_second": received,
            "received_max_second": max(received),
            "started_per_second": started,
            "started_max_second": max(started),
            "spread_s": round(max(h.at for h in hits) - min(h.at for h in hits), 3),
            "distinct_runs": len({h.headers["kadence-execution-id"] for h in hits}),
            "outcomes": len(done),
            "throttled_max_s": max(o.throttled_ms for o in done) / 1000,
            "other_tenant_late_s": round(other.at - run_at.timestamp(), 3),
        }
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.rate_limit", description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--limit", type=float, default=100.0)
    parser.add_argument("--burst", type=int, default=10)
    parser.add_argument("--lead", type=int, default=60, help="seconds from start to the burst")
    parser.add_argument("--bootstrap", default=KadenceSettings().bootstrap_servers)
    args = parser.parse_args(argv)
    settings = execution_settings(
        KadenceSettings(bootstrap_servers=args.bootstrap, namespace=f"bench-{uuid.uuid4().hex[:8]}")
    )
    provision(settings)
    try:
        result = burst(
            settings, args.jobs, RateLimit(per_second=args.limit, burst=args.burst), args.lead
        )
    finally:
        delete_namespace(settings)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
