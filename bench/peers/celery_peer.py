"""Celery beat with RedBeat (schedules in Redis) and two Celery workers (64 threads each) on a
local Redis (Debian's redis-server, append-only file fsynced every second): N crontab entries
that fire at T, the top of a minute."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.peers.common import due_at, result, wait_until

PORT = 6399


def run(n: int, lead_s: int = 90, threads: int = 64) -> dict[str, Any]:
    server = shutil.which("redis-server")
    if server is None:
        raise RuntimeError("needs Debian's redis-server: apt-get install -y redis-server")
    root = Path(tempfile.mkdtemp(prefix="peer-celery-"))
    url = f"redis://127.0.0.1:{PORT}/0"
    env = {**os.environ, "PEER_REDIS_URL": url}
    procs = [
        subprocess.Popen(
            [
                server,
                "--port",
                str(PORT),
                "--dir",
                str(root),
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
            ],
            stdout=subprocess.DEVNULL,
        )
    ]
    try:
        time.sleep(1)
        import redis  # noqa: PLC0415
        from celery.schedules import crontab  # noqa: PLC0415
        from redbeat import RedBeatSchedulerEntry  # noqa: PLC0415

        from bench.peers.celery_app import app  # noqa: PLC0415

        r = redis.Redis.from_url(url)
        r.flushall()
        due = due_at(lead_s)
        started = time.monotonic()
        cron = crontab(
            minute=due.minute, hour=due.hour, day_of_month=due.day, month_of_year=due.month
        )
        for i in range(n):
            RedBeatSchedulerEntry(f"j{i}", "peer.tick", cron, args=[f"j{i}"], app=app).save()
        ingest_s = time.monotonic() - started
        print(f"  celery: {n} RedBeat entries due at {due.isoformat()} ({ingest_s:.1f} s)")
        celery = [sys.executable, "-m", "celery", "-A", "bench.peers.celery_app"]
        for w in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        *celery,
                        "worker",
                        "-P",
                        "threads",
                        "-c",
                        str(threads),
                        "-n",
                        f"w{w}@%h",
                        "--without-gossip",
                        "--without-mingle",
                        "-l",
                        "warning",
                    ],
                    env=env,
                    stdout=(root / f"w{w}.log").open("w"),
                    stderr=subprocess.STDOUT,
                )
            )
        procs.append(
            subprocess.Popen(
                [
                    *celery,
                    "beat",
                    "-S",
                    "redbeat.RedBeatScheduler",
                    "--max-interval",
                    "1",
                    "-l",
                    "warning",
                ],
                env=env,
                stdout=(root / "beat.log").open("w"),
                stderr=subprocess.STDOUT,
            )
        )
        wait_until(due)
        deadline = time.monotonic() + 120 + n / 100
        while r.llen("peer:starts") < n and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)
        starts = []
        for raw in r.lrange("peer:starts", 0, -1):
            job, t = (raw.decode() if isinstance(raw, bytes) else str(raw)).split()
            starts.append((job, float(t)))
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(root, ignore_errors=True)
    return result(
        "celery-redbeat",
        f"celery {version('celery')}, celery-redbeat {version('celery-redbeat')}",
        n,
        due,
        starts,
        ingest_s=ingest_s,
        durability="Redis, append-only file fsynced every second",
        notes=f"celery beat (RedBeat, max-interval 1 s), 2 workers x {threads} threads, acks_late",
    )
