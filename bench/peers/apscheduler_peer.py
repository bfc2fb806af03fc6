"""APScheduler 3 with its SQLAlchemy job store (SQLite file, committed per job) and a
64-thread pool: N `date` jobs due at T, in this process."""

from __future__ import annotations

import tempfile
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.peers.common import due_at, result, wait_until

STARTS: list[tuple[str, float]] = []
LOCK = threading.Lock()


def tick(job: str) -> None:
    now = time.time()
    with LOCK:
        STARTS.append((job, now))


def run(n: int, lead_s: int = 60, threads: int = 64) -> dict[str, Any]:
    from apscheduler.executors.pool import ThreadPoolExecutor  # noqa: PLC0415
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore  # noqa: PLC0415
    from apscheduler.schedulers.background import BackgroundScheduler  # noqa: PLC0415

    db = Path(tempfile.mkdtemp(prefix="peer-aps-")) / "jobs.sqlite"
    sched = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{db}")},
        executors={"default": ThreadPoolExecutor(threads)},
        job_defaults={"misfire_grace_time": 3600, "coalesce": False, "max_instances": 1},
        timezone="UTC",
    )
    due = due_at(lead_s)
    STARTS.clear()
    sched.start(paused=True)
    started = time.monotonic()
    for i in range(n):
        sched.add_job(tick, "date", run_date=due, args=[f"j{i}"], id=f"j{i}")
        if i % 1000 == 999:
            print(f"\r  apscheduler: {i + 1} of {n} jobs stored", end="", flush=True)
    ingest_s = time.monotonic() - started
    print(f"\n  apscheduler: {n} jobs due at {due.isoformat()} (stored in {ingest_s:.1f} s)")
    if (due.timestamp() - time.time()) < 5:
        raise RuntimeError(f"storing took too long: T passed; raise --lead above {lead_s}")
    sched.resume()
    wait_until(due)
    deadline = time.monotonic() + 120 + n / 100
    while len({j for j, _ in STARTS}) < n and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(2)
    sched.shutdown(wait=True)
    with LOCK:
        starts = list(STARTS)
    return result(
        "apscheduler",
        version("apscheduler"),
        n,
        due,
        starts,
        ingest_s=ingest_s,
        durability="SQLite job store, one transaction per job",
        notes=f"BackgroundScheduler, ThreadPoolExecutor({threads}), in-process job function",
    )
