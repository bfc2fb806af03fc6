"""B6, one tenant past its caps (issue 28, item 5): does a tenant with 10 000 per-second jobs
leave the others on time?

    python -m bench.tenant_flood                    # the three configurations below, side by side
    python -m bench.tenant_flood --configs default  # one of them

Each configuration runs on a namespace of its own, with a scheduler, a reaper and two workers:
tenant `flood` has FLOOD jobs on `* * * * * *` (overlap allowed), SMALL tenants have EACH
per-second jobs each, every job with the Kafka topic target. After the definitions are
ingested the benchmark waits WARM seconds (45: jobs that wait for the cap reserve places up to
the dispatch look-ahead, 30 s, ahead; the steady state comes after), then measures SECONDS
seconds: the small tenants'
start lateness (outcome started_at - due_at, over the runs due in the window), the runs each
side started per second, the flood's waits as the scheduler told them (`throttled` and
`coalesced` history records, and the scheduler's `kadence_scheduler_occurrences_not_run_total`
for the tenant), and the CPU seconds of each process.

Configurations: `alone` (no flood: the small tenants by themselves), `off`
(KADENCE_TENANT_FIRES_PER_S=0: no cap, as before), `default` (the defaults: 2 000 a second,
50 000 in progress), `flood=N` (the defaults, and N a second for the tenant `flood`,
KADENCE_TENANT_FIRES_PER_S_BY_TENANT), `hang` (the defaults, and the flood's jobs call an HTTP
target that never answers, with a 10-minute timeout: its runs pile up behind its running cap in
the workers, issue 29 item 4). Each also reports the workers' peak RSS (VmHWM) and, at the
window's end, their consumer lag and inbox (`kadence_worker_inbox`). Figures:
docs/benchmarks-history.md, B6.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from apps.processes import ChildProcess
from bench.cpu import cpu_seconds
from bench.execution import reader
from bench.scheduler import RESULTS, load, percentiles, wait_ingested
from kadence.codec import Codec
from kadence.models import (
    Decision,
    ExecutionOutcome,
    HistoryRecord,
    HttpTarget,
    KafkaTarget,
    ScheduleDefinition,
    entries_of,
)
from kadence.provisioning import delete_namespace, provision
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from testkit.target_server import TargetServer

CODEC = Codec()
NOT_RUN = re.compile(
    r'^kadence_scheduler_occurrences_not_run_total\{decision="(\w+)",tenant="flood"\} (\S+)$',
    re.M,
)


def definitions(
    flood: int, small: int, each: int, hang_url: str | None = None
) -> Iterator[ScheduleDefinition]:
    """`hang_url`: the flood's target, one that never answers (else the Kafka topic target)."""
    every_second = {"kind": "cron", "expression": "* * * * * *", "spread_s": 0}
    target = KafkaTarget(topic="runs")
    flood_target: KafkaTarget | HttpTarget = target
    hang: dict[str, Any] = {}
    if hang_url is not None:
        flood_target = HttpTarget(url=hang_url)
        hang = {"timeout_ms": 600_000, "retry": {"max_attempts": 1}}
    for i in range(flood):
        yield ScheduleDefinition(
            tenant="flood", job_id=f"f{i}", version=1, schedule=every_second,
            target=flood_target, overlap="allow", **hang,
        )  # fmt: skip
    for t in range(small):
        for i in range(each):
            yield ScheduleDefinition(
                tenant=f"small-{t:02d}", job_id=f"s{i}", version=1, schedule=every_second,
                target=target, overlap="allow",
            )  # fmt: skip


def read_all(settings: KadenceSettings, topic: str, idle_s: float = 3) -> list[Any]:
    """Every record of `topic` (committed), decoded, until it has been idle for `idle_s`."""
    consumer = reader(settings, topic)
    out: list[Any] = []
    quiet_since = time.monotonic()
    try:
        while time.monotonic() - quiet_since < idle_s:
            got = consumer.consume(num_messages=10_000, timeout=0.5)
            if got:
                quiet_since = time.monotonic()
            for m in got:
                if m.error() is None and m.value():
                    out += entries_of(CODEC.decode(m.value()))
    finally:
        consumer.close()
    return out


def run_one(
    config: str, bootstrap: str, root: Path, *, flood: int, small: int, each: int, warm: int,
    seconds: int,
) -> dict[str, Any]:  # fmt: skip
    caps: dict[str, Any] = {}
    if config == "alone":  # the small tenants by themselves: what "unchanged" is measured by
        flood = 0
    elif config == "off":
        caps = {"tenant_fires_per_s": 0, "tenant_max_in_flight": 0}
    elif config.startswith("flood="):
        caps = {"tenant_fires_per_s_by_tenant": {"flood": int(config.split("=", 1)[1])}}
    server = TargetServer().start() if config == "hang" else None
    settings = KadenceSettings(
        bootstrap_servers=bootstrap, namespace=f"bench-{uuid.uuid4().hex[:8]}",
        target_allow_cidrs=["127.0.0.0/8"], **caps,
    )  # fmt: skip
    provision(settings)
    here = root / config.replace("=", "-")

    def child(module: str, name: str, metrics_port: int = 0) -> ChildProcess:
        mine = settings.model_copy(
            update={"instance_id": name, "state_dir": here / name, "metrics_port": metrics_port}
        )
        return ChildProcess(module, mine, log=here / f"{name}.log")

    scheduler = child("apps.scheduler", "s", metrics_port=-1)  # a port it picks and says
    workers = [child("apps.worker", f"w{i}", metrics_port=-1) for i in range(2)]
    others = [child("apps.reaper", "r"), *workers]
    procs = [scheduler, *others]
    try:
        for proc in procs:
            proc.start()
        scheduler.wait_for(" restored: ", timeout=120)
        metrics_port = scheduler.listening("metrics", timeout=60)
        print(f"{config}: {flood} flood jobs + {small} x {each} small, every second")
        load(settings, definitions(flood, small, each, server.url + "/hang" if server else None))
        wait_ingested(settings, timeout_s=300)
        time.sleep(warm)
        cpu0 = {p.log.stem if p.log else "?": cpu_seconds(p) for p in procs}
        t0 = time.time()
        time.sleep(seconds)
        t1 = time.time()
        cpu1 = {p.log.stem if p.log else "?": cpu_seconds(p) for p in procs}
        scraped = {m[0]: float(m[1]) for m in NOT_RUN.findall(scrape(metrics_port))}
        seen = {w.log.stem if w.log else "?": worker_state(w) for w in workers}
        time.sleep(15)  # what was due in the window and is still on its way
        peaks = {w.log.stem if w.log else "?": peak_rss_mb(w) for w in workers}  # the whole run
    finally:
        for proc in procs:
            proc.stop()
        if server is not None:
            server.stop()
    topics = Topics(settings)
    outcomes = [o for o in read_all(settings, topics.outcomes) if isinstance(o, ExecutionOutcome)]
    history = [h for h in read_all(settings, topics.history) if isinstance(h, HistoryRecord)]
    delete_namespace(settings)

    def in_window(o: ExecutionOutcome) -> bool:
        return t0 <= o.due_at.timestamp() < t1

    small_out = [o for o in outcomes if o.tenant != "flood" and in_window(o)]
    flood_out = [o for o in outcomes if o.tenant == "flood" and in_window(o)]
    lateness = [(o.started_at - o.due_at).total_seconds() for o in small_out]
    due_small = small * each * seconds
    waits = [h for h in history if h.tenant == "flood" and t0 <= h.at.timestamp() < t1]
    told = {
        d.value: sum(1 for h in waits if h.decision is d)
        for d in (Decision.throttled, Decision.coalesced)
    }
    return {
        "config": config,
        "caps": caps or "defaults",
        "window_s": seconds,
        "small_runs_due": due_small,
        "small_runs_started": len({o.execution_id for o in small_out}),
        "small_start_lateness_s": percentiles(lateness),
        "small_late_over_1s": sum(1 for x in lateness if x > 1),
        "flood_runs_started_per_s": round(len(flood_out) / seconds, 1),
        "history_records_per_s": round(
            sum(1 for h in history if t0 <= h.at.timestamp() < t1) / seconds, 1
        ),
        "flood_history_in_window": told,
        "flood_metrics_not_run": scraped,
        "cpu_s": {k: round(cpu1[k] - cpu0[k], 1) for k in cpu0},
        "workers_at_window_end": seen,
        "worker_peak_rss_mb": peaks,
    }


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return str(r.read().decode())


def worker_state(worker: ChildProcess) -> dict[str, float]:
    """A worker's consumer lag on executions and its inbox, from its metrics."""
    text = scrape(worker.listening("metrics"))
    lag = re.findall(r'^kadence_consumer_lag_records\{[^}]*executions"\} (\S+)$', text, re.M)
    inbox = dict(re.findall(r'^kadence_worker_inbox\{what="(\w+)"\} (\S+)$', text, re.M))
    return {"lag": sum(map(float, lag)), **{k: float(v) for k, v in inbox.items()}}


def peak_rss_mb(child: ChildProcess) -> float | None:
    """VmHWM (the peak resident set) of a running child, from /proc (Linux)."""
    if child.proc is None:
        return None
    try:
        status = Path(f"/proc/{child.proc.pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmHWM:\s+(\d+) kB$", status, re.M)
    return round(int(found.group(1)) / 1024, 1) if found else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configs", default="alone,off,default,flood=300")
    parser.add_argument("--flood", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=20)
    parser.add_argument("--each", type=int, default=5)
    parser.add_argument("--warm", type=int, default=45)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--bootstrap", default=KadenceSettings().bootstrap_servers)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="kadence-bench-flood-"))
    results = []
    try:
        for config in args.configs.split(","):
            result = run_one(
                config, args.bootstrap, root, flood=args.flood, small=args.small,
                each=args.each, warm=args.warm, seconds=args.seconds,
            )  # fmt: skip
            print(json.dumps(result, indent=2), flush=True)
            results.append(result)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "tenant-flood.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
