"""Scheduler benchmarks against the local broker (real Kafka, real processes, RocksDB).

    make bench-burst     # 100 000 one-off jobs due in the same second
    make bench-restore   # restore time and RSS with 1 000 000 jobs

burst:   loads N jobs due at T (beforehand), then measures, per execution, the dispatch offset
         (dispatched_at - due, stamped by the scheduler) and the visible offset (when a
         read_committed consumer received it - due; negative: on the topic before it was due),
         p50/p99/max, the lateness (offsets below zero count as on time), the share visible
         within 1 s of due, the drain time (first to last received), and the lost and doubled
         counts. --ahead sets KADENCE_DISPATCH_AHEAD_MS (0: dispatch at the due time).
restore: loads N jobs, stops the scheduler, then times a cold restore (state deleted: rebuilt
         from the changelog) and a warm one (RocksDB kept), and the scheduler's RSS after each.
ingest:  loads N daily jobs with no scheduler running, then starts one and times it from its
         partitions' (empty) restore to its group's lag at 0: definitions per second into one
         scheduler, the load's CPU kept out of it. --profile samples it with py-spy meanwhile.
Figures go to bench/results/scheduler-<mode>.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from apps.processes import ChildProcess
from bench.pyspy import Sampler
from infra.kafka.config import BrokerConfig
from kadence.batches import executions_in
from kadence.client import KadenceClient
from kadence.codec import Codec
from kadence.models import CronSchedule, KafkaTarget, OnceSchedule, ScheduleDefinition
from kadence.provisioning import delete_namespace, provision
from kadence.settings import KadenceSettings
from kadence.topics import Topics

RESULTS = Path(__file__).resolve().parent / "results"


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    s = sorted(values)

    def at(q: float) -> float:
        return s[min(len(s) - 1, int(q * len(s)))]

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "max": s[-1]}


class Scheduler(ChildProcess):
    def __init__(self, settings: KadenceSettings, state_dir: Path) -> None:
        mine = settings.model_copy(update={"instance_id": "bench", "state_dir": state_dir})
        # settings_env passes every field, the look-ahead included
        super().__init__("apps.scheduler", mine, log=state_dir / "scheduler-bench.log")
        self.partitions = settings.partitions

    def start_timed(self) -> float:
        """Start; returns seconds until every partition was restored."""
        self.start()
        return self.wait_for(" restored: ", timeout=3600, count=self.partitions)


def load(settings: KadenceSettings, defs: Iterator[ScheduleDefinition], chunk: int = 5000) -> float:
    """Write all definitions with the SDK; returns definitions per second."""
    started, n = time.monotonic(), 0
    batch: list[ScheduleDefinition] = []
    with KadenceClient(settings) as client:
        for d in defs:
            batch.append(d)
            if len(batch) == chunk:
                client.put_many(batch)
                n += len(batch)
                batch = []
                print(f"\r  loaded {n}", end="", flush=True)
        if batch:
            client.put_many(batch)
            n += len(batch)
    print(f"\r  loaded {n}", flush=True)
    return n / (time.monotonic() - started)


def wait_ingested(settings: KadenceSettings, timeout_s: float, poll_s: float = 1.0) -> float:
    """Seconds until the scheduler group has committed every schedules record."""
    started = time.monotonic()
    topic = Topics(settings).schedules
    group = f"{settings.namespace}.scheduler"
    c = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": group})
    try:
        tps = [TopicPartition(topic, p) for p in range(settings.partitions)]
        while time.monotonic() - started < timeout_s:
            ends = [c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
            done = [max(0, tp.offset) for tp in c.committed(tps, timeout=10)]
            lag = sum(e - d for e, d in zip(ends, done, strict=True))
            print(f"\r  scheduler ingest lag {lag:>9}", end="", flush=True)
            if lag == 0:
                print()
                return time.monotonic() - started
            time.sleep(poll_s)
    finally:
        c.close()
    raise RuntimeError("the scheduler did not ingest the definitions in time")


def burst(settings: KadenceSettings, n: int, lead_s: int, state_dir: Path) -> dict[str, Any]:
    sched = Scheduler(settings, state_dir)
    sched.start_timed()
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=lead_s)
    print(f"burst: {n} one-off jobs due at {due.isoformat()}")
    jobs = (
        ScheduleDefinition(
            tenant=f"tenant-{i % 100}",
            job_id=f"burst-{i}",
            version=1,
            schedule=OnceSchedule(run_at=due),
            target=KafkaTarget(topic="out"),
        )
        for i in range(n)
    )
    rate = load(settings, jobs)
    ingest_s = wait_ingested(settings, timeout_s=lead_s * 3)
    slack = (due - datetime.now(UTC)).total_seconds()
    print(f"  ingested; {slack:.1f} s before the burst")
    codec = Codec()
    c = Consumer(
        {
            "bootstrap.servers": settings.bootstrap_servers,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    topic = Topics(settings).executions
    c.assign([TopicPartition(topic, p, 0) for p in range(settings.execution_partitions)])
    seen: dict[str, int] = {}
    dispatch, visible, received_at = [], [], []
    deadline = time.monotonic() + max(0.0, slack) + 300
    try:
        while len(seen) < n and time.monotonic() < deadline:
            for msg in c.consume(num_messages=5000, timeout=0.5):
                if msg.error() is not None:
                    continue
                received = datetime.now(UTC)
                for ex in executions_in(codec, codec.decode(msg.value())):  # a batch: each
                    eid = ex.execution_id
                    seen[eid] = seen.get(eid, 0) + 1
                    if seen[eid] == 1:
                        dispatch.append((ex.dispatched_at - ex.due_at).total_seconds())
                        visible.append((received - ex.due_at).total_seconds())
                        received_at.append(received)
        time.sleep(3)
        for msg in c.consume(num_messages=100_000, timeout=2):
            if msg.error() is None:
                for ex in executions_in(codec, codec.decode(msg.value())):
                    seen[ex.execution_id] = seen.get(ex.execution_id, 0) + 1
    finally:
        c.close()
        rss = sched.rss_mib()
        sched.stop()
    late = [max(0.0, v) for v in visible]
    return {
        "jobs": n,
        "dispatch_ahead_ms": settings.dispatch_ahead_ms,
        "load_defs_per_s": round(rate),
        "ingest_wait_s": round(ingest_s, 1),
        "dispatch_offset_s": percentiles(dispatch),
        "visible_offset_s": percentiles(visible),
        "visible_lateness_s": percentiles(late),
        "within_1s_pct": round(100 * sum(v <= 1.0 for v in visible) / max(1, len(visible)), 2),
        "drain_s": round((max(received_at) - min(received_at)).total_seconds(), 2)
        if received_at
        else None,
        "lost": n - len(seen),
        "doubled": sum(1 for v in seen.values() if v > 1),
        "scheduler_rss_mib": round(rss),
    }


def broker_disk_mib(settings: KadenceSettings) -> dict[str, int]:
    """MiB of records the local broker holds for each of the namespace's topics (the segment
    files in its log directory; empty for a broker this checkout does not run)."""
    data = BrokerConfig.from_env().data_dir
    sizes: dict[str, int] = {}
    for part in data.glob(f"{settings.namespace}.*-*"):
        topic = part.name.rsplit("-", 1)[0].removeprefix(settings.namespace + ".")
        size = sum(f.stat().st_size for f in part.glob("*.log"))  # indexes are preallocated
        sizes[topic] = sizes.get(topic, 0) + size
    return {topic: round(size / 2**20) for topic, size in sorted(sizes.items()) if size >= 2**20}


def daily_jobs(n: int) -> Iterator[ScheduleDefinition]:
    """B5's definitions: N daily cron jobs spread over the day, 1 000 tenants."""
    return (
        ScheduleDefinition(
            tenant=f"tenant-{i % 1000}",
            job_id=f"job-{i}",
            version=1,
            schedule=CronSchedule(expression=f"{i % 60} {i // 60 % 24} * * *", timezone="UTC"),
            target=KafkaTarget(topic="out"),
        )
        for i in range(n)
    )


def ingest_bench(
    settings: KadenceSettings, n: int, state_dir: Path, profile: bool
) -> dict[str, Any]:
    print(f"ingest: {n} daily jobs, loaded before the scheduler starts")
    load_rate = load(settings, daily_jobs(n))
    sched = Scheduler(settings, state_dir)
    sched.start_timed()
    sampler = None
    if profile:
        assert sched.proc is not None
        sampler = Sampler(state_dir / "profile", {"scheduler": [sched.proc.pid]}).start()
    ingest_s = wait_ingested(settings, timeout_s=max(3600, n / 500), poll_s=0.2)
    profiled = sampler.stop(n) if sampler is not None else None
    rss = sched.rss_mib()
    sched.stop()
    return {
        "jobs": n,
        "load_defs_per_s": round(load_rate),
        "ingest_s": round(ingest_s, 1),
        "ingest_defs_per_s": round(n / ingest_s),
        "rss_mib_after_ingest": round(rss),
        **({"py_spy_us_per_definition": profiled} if profiled else {}),
    }


def restore_bench(settings: KadenceSettings, n: int, state_dir: Path) -> dict[str, Any]:
    sched = Scheduler(settings, state_dir)
    sched.start_timed()
    print(f"restore: {n} daily jobs")
    started = time.monotonic()
    rate = load(settings, daily_jobs(n))
    load_s = time.monotonic() - started
    ingest_s = wait_ingested(settings, timeout_s=max(3600, n / 500))
    rss_loaded = sched.rss_mib()
    topics_mib = broker_disk_mib(settings)
    sched.stop()
    shutil.rmtree(state_dir / settings.namespace)
    cold = Scheduler(settings, state_dir)
    cold_s = cold.start_timed()
    rss_cold = cold.rss_mib()
    cold.stop()
    warm = Scheduler(settings, state_dir)
    warm_s = warm.start_timed()
    rss_warm = warm.rss_mib()
    warm.stop()
    disk = sum(f.stat().st_size for f in (state_dir / settings.namespace).rglob("*") if f.is_file())
    return {
        "jobs": n,
        "load_defs_per_s": round(rate),
        "load_s": round(load_s, 1),
        "ingest_s_after_load": round(ingest_s, 1),
        "ingest_defs_per_s_overall": round(n / (load_s + ingest_s)),
        "broker_disk_mib_by_topic": topics_mib,
        "rss_mib_after_ingest": round(rss_loaded),
        "cold_restore_s": round(cold_s, 1),
        "rss_mib_after_cold_restore": round(rss_cold),
        "warm_restore_s": round(warm_s, 1),
        "rss_mib_after_warm_restore": round(rss_warm),
        "rocksdb_disk_mib": round(disk / 2**20),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["burst", "restore", "ingest"])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--lead", type=int, default=150, help="burst: seconds from start to T")
    parser.add_argument("--bootstrap", default=KadenceSettings().bootstrap_servers)
    parser.add_argument(
        "--ahead",
        type=int,
        default=KadenceSettings().dispatch_ahead_ms,
        help="burst: look-ahead ms",
    )
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--profile", action="store_true", help="ingest: py-spy the scheduler")
    args = parser.parse_args(argv)
    settings = KadenceSettings(
        bootstrap_servers=args.bootstrap,
        namespace=f"bench-{uuid.uuid4().hex[:8]}",
        dispatch_ahead_ms=args.ahead,
    )
    provision(settings)
    state_dir = Path(tempfile.mkdtemp(prefix="kadence-bench-"))
    try:
        if args.mode == "burst":
            result = burst(settings, args.jobs, args.lead, state_dir)
        elif args.mode == "ingest":
            result = ingest_bench(settings, args.jobs, state_dir, args.profile)
        else:
            result = restore_bench(settings, args.jobs, state_dir)
    finally:
        delete_namespace(settings)
        shutil.rmtree(state_dir, ignore_errors=True)
    args.results.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=2) + "\n"
    (args.results / f"scheduler-{args.mode}.json").write_text(text)
    (args.results / f"scheduler-{args.mode}-{args.jobs}-ahead{args.ahead}.json").write_text(text)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
