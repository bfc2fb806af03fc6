"""Cold restore of the scheduler's store from its changelog, in process, against the broker.

    python -m bench.restore --jobs 1000000 [--rewrites 1] [--partitions 12]

Writes the changelog of N daily cron jobs (B5's definitions: 1 000 tenants, `m h * * *` UTC,
a Kafka target) straight onto a fresh `scheduler-changelog` topic: each job's state and its
definition (`~def/<job>`), the bytes the scheduler itself writes for such a job (taken from a
scheduler processor that admitted a sample of them). `--rewrites K` writes each job's state K
times, as firings do before compaction catches up. Then restores every partition into a
fresh RocksDB, together, as a scheduler given all of them does, and prints seconds,
records and bytes read per second, and the live state against the bytes read. Without the
scheduler processes, the loader and the SDK: what is timed is the restore alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.scheduler import RESULTS
from kadence.codec import Codec
from kadence.models import CronSchedule, KafkaTarget, ScheduleDefinition
from kadence.partitioning import partition_for
from kadence.provisioning import delete_namespace, provision
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.kafkaio.clients import KafkaClients
from streams.runtime.records import InputRecord
from streams.runtime.restore import restore_all
from streams.runtime.store import MemoryStore, RocksStore
from streams.runtime.task import Task
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor

SAMPLES = 1_440
T0 = 1_796_112_000_000  # 2026-12-01T08:00Z


def definition(i: int) -> ScheduleDefinition:
    return ScheduleDefinition(
        tenant=f"tenant-{i % 1000}",
        job_id=f"job-{i}",
        version=1,
        schedule=CronSchedule(expression=f"{i % 60} {i // 60 % 24} * * *", timezone="UTC"),
        target=KafkaTarget(topic="out"),
    )


def samples(settings: KadenceSettings) -> list[dict[bytes, bytes]]:
    """What the scheduler writes to its changelog for each of SAMPLES jobs, key -> value."""
    codec, topics = Codec(), Topics(settings)
    cfg = SchedulerConfig(topics, 1, settings.execution_partitions, "2025b")
    proc = SchedulerProcessor(cfg, codec)
    out: list[dict[bytes, bytes]] = []
    for i in range(SAMPLES):
        task = Task(0, MemoryStore(), T0, 60_000)
        written: dict[bytes, bytes] = {}
        task.changelog = "changelog"
        task._emit = partial(_changelog_only, written)
        d = definition(i)
        record = InputRecord(topics.schedules, 0, 0, d.key.encode(), codec.encode(d), [], T0)
        assert task.attempt(lambda r=record, t=task: proc.process(t, r, T0), _raise)  # type: ignore[misc]
        task.changelog_records()
        out.append(written)
    return out


def _changelog_only(
    written: dict[bytes, bytes], topic: str, _p: int, key: bytes, value: bytes, _h: object
) -> None:
    if topic == "changelog":
        written[key] = value


def _raise(exc: Exception) -> None:
    raise exc


def write_changelog(
    settings: KadenceSettings, jobs: int, rewrites: int, sample: list[dict[bytes, bytes]]
) -> tuple[int, int]:
    """The changelog of `jobs` jobs; returns (records, bytes) written."""
    topic = Topics(settings).scheduler_changelog
    producer = Producer(
        {
            "bootstrap.servers": settings.bootstrap_servers,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "lz4",  # as the scheduler's own producer writes it
        }
    )
    records = size = 0
    for i in range(jobs):
        d = definition(i)
        key = d.key.encode()
        partition = partition_for(key, settings.partitions)
        for k, v in sample[i % SAMPLES].items():
            real = key if not k.startswith(b"~def/") else b"~def/" + key
            for _ in range(rewrites if real == key else 1):
                while True:
                    try:
                        producer.produce(topic, v, real, partition=partition)
                        break
                    except BufferError:
                        producer.poll(0.05)
                records += 1
                size += len(real) + len(v)
        if i % 50_000 == 0:
            producer.poll(0)
            print(f"\r  written {i} jobs", end="", flush=True)
    producer.flush(120)
    print()
    return records, size


def timed_restore(settings: KadenceSettings, root: Path) -> dict[str, Any]:
    clients = KafkaClients(settings)
    topic = Topics(settings).scheduler_changelog
    started = time.monotonic()

    def reopen(p: int, wipe: bool) -> RocksStore:
        if wipe:
            RocksStore.wipe(root / str(p))
        return RocksStore(root / str(p))

    stores = {p: reopen(p, False) for p in range(settings.partitions)}
    done = restore_all(stores, reopen, clients, topic)  # as a scheduler given all of them
    records = sum(r.records for _, r in done.values())
    for store, _ in done.values():
        store.close()
    seconds = time.monotonic() - started
    disk = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    return {"seconds": round(seconds, 2), "records": records, "rocksdb_mib": round(disk / 2**20)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.restore", description=__doc__)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--rewrites", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=1, help="restores of the same changelog")
    parser.add_argument("--bootstrap", default=KadenceSettings().bootstrap_servers)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    settings = KadenceSettings(
        bootstrap_servers=args.bootstrap,
        partitions=args.partitions,
        namespace=f"bench-{uuid.uuid4().hex[:8]}",
    )
    provision(settings)
    try:
        sample = samples(settings)
        started = time.monotonic()
        records, size = write_changelog(settings, args.jobs, args.rewrites, sample)
        print(
            f"wrote {records} records, {size / 2**20:.0f} MiB in {time.monotonic() - started:.0f} s"
        )
        runs = []
        for _ in range(args.repeat):
            root = Path(tempfile.mkdtemp(prefix="kadence-bench-restore-"))
            try:
                run = timed_restore(settings, root)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            run["records_per_s"] = round(records / run["seconds"])
            run["mib_read_per_s"] = round(size / 2**20 / run["seconds"], 1)
            print(json.dumps(run))
            runs.append(run)
    finally:
        delete_namespace(settings)
    result = {
        "jobs": args.jobs,
        "rewrites": args.rewrites,
        "partitions": args.partitions,
        "changelog_records": records,
        "changelog_mib": round(size / 2**20),
        "runs": runs,
    }
    print(json.dumps(result, indent=2))
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "restore.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
