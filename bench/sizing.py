"""Sizing at N jobs: what one scheduler and one query view need, measured on the local broker.

    python -m bench.sizing --jobs 1000000 [--view-only] [--broker-dir DIR]

(--broker-dir: the local broker's KADENCE_KAFKA_DIR, whose segment files are measured; this
checkout's .run/kafka by default, as `make broker` runs it.)

In a namespace of its own (deleted at the end), N of B5's daily cron definitions
(bench/scheduler.py, `daily_jobs`: 1 000 tenants) are written onto `schedules` with no process
running: the bytes, key, partition and headers the SDK writes for each (`load_raw`: spliced
from 36 000 encoded ones, checked against the codec before), faster than the SDK validates
them. Then, each in turn:
- one scheduler started and timed from its start to its group's lag at 0 (its ingest of the N
  definitions, as `bench.scheduler ingest` times it); its RSS and peak RSS (VmHWM), its state
  directory (RocksDB) on disk, the namespace's topics on the broker's disk
  (`scheduler-changelog`, `schedules`: the segment files, found under --broker-dir, as
  bench/scheduler.py reads them);
- the query view (`python -m apps.views`, as infra/k8s/api.yaml runs it) started on an empty
  store and timed until its /ready says ready (every input read to its end as it was at
  start: the rebuild an emptyDir makes on every pod restart); its peak RSS, its RSS then and
  its store on disk; then stopped and started again on the same store (the warm restart of a
  view with a persistent volume), timed the same way, with what it applied then;
- the scheduler's cold restore (state directory deleted: rebuilt from the changelog) and warm
  restore (RocksDB kept), each timed to every partition restored, and its RSS after each.
Each stage's figures are printed as they come (a stopped run still says what it got to), then
all of them as JSON and one markdown table row. Times depend on the CPU the run had; sizes
and memory do not. `--view-only` leaves the scheduler out (the view's figures alone).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from pydantic import SecretStr

from apps.processes import ChildProcess
from apps.scheduler import APP as SCHEDULER
from apps.views import APP as VIEWS
from bench.restore import definition
from bench.scheduler import RESULTS, Scheduler, broker_disk_mib, daily_jobs, wait_ingested
from kadence.codec import Codec
from kadence.headers import JOB, Headers, headers_for
from kadence.models import ScheduleDefinition
from kadence.partitioning import partition_for
from kadence.provisioning import delete_namespace, provision
from kadence.settings import KadenceSettings
from kadence.topics import Topics

VIEW_TOKEN = "bench-sizing-view-token"  # noqa: S105 - the bench view's own, on loopback
VIEW_ID = "bench-view"
TEMPLATES = 36_000  # daily_jobs repeats its tenant (i % 1 000) and minute (i % 1 440) together


Written = tuple[bytes, bytes, int, Headers]
"""A definition as the SDK writes it: value, key, partition, headers."""


class RawDefinitions:
    """`daily_jobs(n)` as the SDK writes them, without building and validating each one: job
    i is template i % TEMPLATES with its job id (an Avro string, its length first) swapped."""

    def __init__(self, settings: KadenceSettings) -> None:
        self.codec, self.partitions = Codec(), settings.partitions
        self.templates = [self.written(d) for d in daily_jobs(TEMPLATES)]

    def written(self, d: ScheduleDefinition) -> Written:
        fingerprint = self.codec.schema_fingerprint(ScheduleDefinition)
        partition = partition_for(d.routing_key, self.partitions)
        return self.codec.encode(d), d.key.encode(), partition, headers_for(d, fingerprint)

    def __call__(self, i: int) -> Written:
        j = i % TEMPLATES
        if i == j:
            return self.templates[j]
        value, key, _p, headers = self.templates[j]
        old, new = f"job-{j}".encode(), f"job-{i}".encode()
        value = value.replace(bytes([2 * len(old)]) + old, bytes([2 * len(new)]) + new, 1)
        key = key.replace(old, new)
        # the routing key is the job key (no concurrency key), so the partition is the key's
        headers = [(h, new if h == JOB else v) for h, v in headers]
        return value, key, partition_for(key.decode(), self.partitions), headers

    def check(self, n: int) -> None:
        """The spliced records equal the codec's: each template's once, and the longest id's."""
        for i in {*range(TEMPLATES, min(n, 2 * TEMPLATES)), n - 1, n // 2}:
            d = definition(i)  # daily_jobs' i-th
            if self(i) != self.written(d):
                raise AssertionError(f"the spliced record of job-{i} is not the codec's")


def load_raw(settings: KadenceSettings, n: int) -> float:
    """Write `daily_jobs(n)` onto `schedules` (the SDK's producer settings); returns seconds."""
    raw = RawDefinitions(settings)
    raw.check(n)
    topic = Topics(settings).schedules
    producer = Producer(
        {**settings.kafka_common(), "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    started = time.monotonic()
    for i in range(n):
        value, key, partition, headers = raw(i)
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 50_000 == 0:
            producer.poll(0)
            print(f"\r  written {i}", end="", flush=True)
    if producer.flush(300) != 0:
        raise RuntimeError("the definitions were not all acknowledged")
    print(f"\r  written {n}", flush=True)
    return time.monotonic() - started


def status_mib(pid: int, field: str) -> float:
    """A /proc/<pid>/status memory field (VmRSS, VmHWM) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def dir_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


class View(ChildProcess):
    def __init__(self, settings: KadenceSettings, log: Path) -> None:
        mine = settings.model_copy(
            update={"instance_id": VIEW_ID, "view_port": 0, "view_token": SecretStr(VIEW_TOKEN)}
        )
        super().__init__("apps.views", mine, log=log)
        self.store = settings.state_dir / settings.namespace / VIEWS / VIEW_ID

    def ready(self, port: int) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/ready", headers={"X-Kadence-View-Token": VIEW_TOKEN}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
            body: dict[str, Any] = json.loads(answer.read())
            return body

    def start_timed(self, timeout_s: float) -> tuple[float, dict[str, Any]]:
        """Start; returns seconds until /ready said ready (from the process's start), and what
        /ready said then."""
        started = time.monotonic()
        self.start()
        port = self.listening("view", timeout=120)
        shown = started
        while time.monotonic() - started < timeout_s:
            state = self.ready(port)
            if state["ready"]:
                return time.monotonic() - started, state
            if state["stopped_by"]:
                raise RuntimeError(f"the view stopped: {state['stopped_by']}")
            if time.monotonic() - shown >= 30:  # a run stopped midway still says how it went
                shown = time.monotonic()
                assert self.proc is not None
                print(
                    f"  view at {shown - started:.0f} s: {state['applied']} applied,"
                    f" peak RSS {status_mib(self.proc.pid, 'VmHWM'):.0f} MiB,"
                    f" store {dir_mib(self.store):.0f} MiB",
                    flush=True,
                )
            time.sleep(0.5)
        raise TimeoutError(f"the view was not ready in {timeout_s} s")


def stage(result: dict[str, Any], path: Path, **figures: Any) -> None:
    """Add a stage's figures, print them and keep what the run got to so far on disk."""
    result.update(figures)
    print(json.dumps(figures), flush=True)
    path.write_text(json.dumps(result, indent=2) + "\n")


def sizing(
    settings: KadenceSettings, n: int, state_dir: Path, out: Path, view_only: bool
) -> dict[str, Any]:
    result: dict[str, Any] = {"jobs": n}
    timeout = max(3600.0, n / 500)
    print(f"sizing: {n} daily jobs")
    load_s = load_raw(settings, n)
    stage(result, out, load_s=round(load_s, 1))
    if not view_only:
        sched = Scheduler(settings, state_dir)
        try:
            sched.start_timed()  # its (empty) partitions restored
            started = time.monotonic()
            wait_ingested(settings, timeout_s=timeout, poll_s=0.5)
            ingest_s = time.monotonic() - started
            assert sched.proc is not None
            stage(
                result,
                out,
                ingest_s=round(ingest_s, 1),
                ingest_defs_per_s=round(n / ingest_s),
                scheduler_rss_mib=round(sched.rss_mib()),
                scheduler_peak_rss_mib=round(status_mib(sched.proc.pid, "VmHWM")),
                broker_disk_mib_by_topic=broker_disk_mib(settings),
            )
        finally:
            sched.stop()
        state = state_dir / settings.namespace / SCHEDULER
        stage(result, out, scheduler_state_mib=round(dir_mib(state)))
    else:
        stage(result, out, broker_disk_mib_by_topic=broker_disk_mib(settings))

    view = View(settings, state_dir / "view-bench.log")
    try:
        cold_s, cold = view.start_timed(timeout)
        assert view.proc is not None
        stage(
            result,
            out,
            view_rebuild_s=round(cold_s, 1),
            view_rebuild_applied=cold["applied"],
            view_rss_mib=round(view.rss_mib()),
            view_peak_rss_mib=round(status_mib(view.proc.pid, "VmHWM")),
        )
        view.stop()
        stage(result, out, view_store_mib=round(dir_mib(view.store)))
        warm_s, warm = view.start_timed(timeout)
        assert view.proc is not None
        stage(
            result,
            out,
            view_restart_s=round(warm_s, 1),
            view_restart_applied=warm["applied"],
            view_restart_peak_rss_mib=round(status_mib(view.proc.pid, "VmHWM")),
        )
    finally:
        view.stop()

    if not view_only:
        shutil.rmtree(state_dir / settings.namespace / SCHEDULER)
        for name in ("cold", "warm"):
            sched = Scheduler(settings, state_dir)
            try:
                seconds = sched.start_timed()
                assert sched.proc is not None
                stage(
                    result,
                    out,
                    **{
                        f"scheduler_{name}_restore_s": round(seconds, 1),
                        f"scheduler_rss_mib_after_{name}": round(sched.rss_mib()),
                        f"scheduler_peak_rss_mib_{name}": round(
                            status_mib(sched.proc.pid, "VmHWM")
                        ),
                    },
                )
            finally:
                sched.stop()
    return result


def row(r: dict[str, Any]) -> str:
    topics = r.get("broker_disk_mib_by_topic", {})
    cells = [
        f"{r['jobs']:,}".replace(",", " "),
        f"{r.get('ingest_s', '-')} s ({r.get('ingest_defs_per_s', '-')}/s)",
        f"{r.get('scheduler_peak_rss_mib', '-')} MiB",
        f"{r.get('scheduler_state_mib', '-')} MiB",
        f"{topics.get('scheduler-changelog', 0)} MiB",
        f"{topics.get('schedules', 0)} MiB",
        f"{r.get('scheduler_cold_restore_s', '-')} s",
        f"{r.get('scheduler_warm_restore_s', '-')} s",
        f"{r.get('view_rebuild_s', '-')} s",
        f"{r.get('view_peak_rss_mib', '-')} MiB",
        f"{r.get('view_store_mib', '-')} MiB",
        f"{r.get('view_restart_s', '-')} s",
    ]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.sizing", description=__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--bootstrap", default=KadenceSettings().bootstrap_servers)
    parser.add_argument(
        "--broker-dir", type=Path, help="the broker's directory (KADENCE_KAFKA_DIR), for its disk"
    )
    parser.add_argument("--view-only", action="store_true", help="leave the scheduler out")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if not 1 <= args.jobs <= 100_000_000:
        parser.error("--jobs takes 1 to 100 000 000")
    if args.broker_dir is not None:
        os.environ["KADENCE_KAFKA_DIR"] = str(args.broker_dir)  # this process's own
    settings = KadenceSettings(
        bootstrap_servers=args.bootstrap, namespace=f"bench-{uuid.uuid4().hex[:8]}"
    )
    args.results.mkdir(parents=True, exist_ok=True)
    out = args.results / f"sizing-{args.jobs}.json"
    provision(settings)
    state_dir = Path(tempfile.mkdtemp(prefix="kadence-bench-sizing-"))
    settings = settings.model_copy(update={"state_dir": state_dir})
    try:
        result = sizing(settings, args.jobs, state_dir, out, args.view_only)
    finally:
        delete_namespace(settings)
        shutil.rmtree(state_dir, ignore_errors=True)
    print(json.dumps(result, indent=2))
    print(
        "| jobs | scheduler ingest | scheduler peak RSS | scheduler state | changelog | schedules"
        " | cold restore | warm restore | view rebuild | view peak RSS | view store"
        " | view restart |"
    )
    print(row(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
