"""B7 webhook burst: N one-off jobs with the HTTP target, all due at the same second T, against
a loopback sink that answers each request D ms late (bench/http_sink.py), real scheduler,
reaper and workers (bench/execution.py's stack).

    python -m bench.webhooks [--jobs 10000] [--delay-ms 200] [--workers 2] [--lead 60]
        (make bench-webhooks)

Measured at the sink: each request's lateness as received (its arrival minus its due time)
p50/p90/p99/max, and the most requests it held at once; from the outcomes: how many
succeeded, lost, duplicated, and the last outcome after T. Before the HTTP target ran on the
worker's event loop (64 threads per worker), 10 000 against a 200 ms sink arrived with p99
21.9 s; the goal is under 1 s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apps.processes import ChildProcess
from bench.execution import jobs, succeeded
from bench.http_sink import summary_of
from bench.pyspy import Sampler
from bench.scheduler import RESULTS, load, percentiles, wait_ingested
from bench.stack import Stack
from kadence.models import ExecutionOutcome, HttpTarget
from kadence.provisioning import delete_namespace, provision
from kadence.settings import KadenceSettings


def burst(
    settings: KadenceSettings,
    n: int,
    delay_ms: int,
    workers: int,
    lead_s: int,
    *,
    profile: bool = False,
    logs: Path | None = None,
) -> dict[str, Any]:
    root = logs or Path(tempfile.mkdtemp(prefix="kadence-bench-webhooks-"))
    sampler = None
    profiled = None
    sink = ChildProcess("bench.http_sink", settings, BENCH_SINK_DELAY_MS=delay_ms).start()
    try:
        url = f"http://127.0.0.1:{sink.listening('http sink')}/hook"
        stack = Stack(settings, root, workers).start()
        try:
            due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=lead_s)
            print(f"webhooks: {n} due at {due.isoformat()}, the sink answers {delay_ms} ms late")
            load(settings, iter(jobs(n, due, lambda _i: HttpTarget(url=url))))
            wait_ingested(settings, timeout_s=300)
            if profile:  # the burst only: from a second before T
                time.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds() - 1))
                sampler = Sampler(root / "profile", {"workers": stack.pids()["workers"]}).start()
            wait_s = (due - datetime.now(UTC)).total_seconds() + 120
            got = succeeded(settings, n, timeout_s=wait_s)
            profiled = sampler.stop(len(got)) if sampler else None
        finally:
            stack.stop()
    finally:
        sink.stop()
        if logs is None:
            shutil.rmtree(root, ignore_errors=True)
    at_sink = summary_of(sink.output())
    first: dict[str, ExecutionOutcome] = {}
    for o in got:
        first.setdefault(o.execution_id, o)
    ends = [o.finished_at for o in first.values()]
    started = [(o.started_at - o.due_at).total_seconds() for o in first.values()]
    return {
        "jobs": n,
        "sink_delay_ms": delay_ms,
        "workers": workers,
        "worker_concurrency": settings.worker_concurrency,
        "worker_async_max_in_flight": settings.worker_async_max_in_flight,
        "received_after_due_s": at_sink.get("lateness_as_received_s"),
        "started_after_due_s": percentiles(started),
        "sink_most_held_at_once": at_sink.get("most_held_at_once"),
        "sink_requests": at_sink.get("requests"),
        "sink_connections": at_sink.get("connections"),
        "sink_connections_opened_before_due": at_sink.get("connections_opened_before_due"),
        "last_outcome_after_due_s": round((max(ends) - due).total_seconds(), 2) if ends else None,
        "succeeded": len(first),
        "lost": n - len(first),
        "duplicated_outcomes": len(got) - len(first),
        **({"py_spy": profiled} if profiled else {}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.webhooks", description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--delay-ms", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--max-in-flight", type=int, default=KadenceSettings().worker_async_max_in_flight
    )
    parser.add_argument("--lead", type=int, default=60, help="seconds from start to T")
    parser.add_argument("--bootstrap", default=KadenceSettings().bootstrap_servers)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--profile", action="store_true", help="sample the workers with py-spy")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs in this folder")
    args = parser.parse_args(argv)
    settings = KadenceSettings(
        bootstrap_servers=args.bootstrap,
        namespace=f"bench-{uuid.uuid4().hex[:8]}",
        worker_concurrency=args.concurrency,
        worker_async_max_in_flight=args.max_in_flight,
        target_allow_cidrs=["127.0.0.1/32"],
    )
    provision(settings)
    try:
        result = burst(
            settings,
            args.jobs,
            args.delay_ms,
            args.workers,
            args.lead,
            profile=args.profile,
            logs=args.logs,
        )
    finally:
        delete_namespace(settings)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "webhooks.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
