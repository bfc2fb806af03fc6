"""One tenant cannot hold every worker slot (issue 14, item 7): tenant acme floods a worker
with runs against a target that never answers (long timeouts), and another tenant's job still
runs on time, with nothing configured (the default per-tenant cap is half the slots, and half
the runs in flight without a thread: HTTP runs are on the worker's event loop and take no slot,
so the test makes that bound as small as the slots). Real scheduler, reaper and worker processes
on the real broker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kadence.client import KadenceClient
from kadence.models import HttpTarget, ScheduleDefinition
from kadence.settings import KadenceSettings
from testkit.stack import Stack, execution_settings
from testkit.target_server import TargetServer

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def once(tenant: str, job_id: str, url: str, in_s: float, **kw: object) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": tenant,
            "job_id": job_id,
            "version": 1,
            "schedule": {"kind": "once", "run_at": datetime.now(UTC) + timedelta(seconds=in_s)},
            "target": HttpTarget(url=url),
            "retry": {"max_attempts": 1},
            **kw,
        }
    )


def test_hanging_runs_of_one_tenant_leave_slots_for_the_others(
    settings: KadenceSettings, tmp_path: Path
) -> None:
    xsettings = execution_settings(  # no tenant cap configured
        settings, worker_concurrency=4, worker_async_max_in_flight=4
    )
    server = TargetServer().start()
    try:
        stack = Stack.start(xsettings, tmp_path)
        try:
            flood = [
                once("acme", f"hang-{n}", f"{server.url}/hang", 2, timeout_ms=600_000)
                for n in range(8)
            ]
            with KadenceClient(xsettings) as client:
                client.put_many([*flood, once("globex", "small", f"{server.url}/ok", 6)])
            server.wait(1, "/ok", timeout_s=60)  # without a cap: 4 hanging runs, /ok waits
            hanging = len(server.seen("/hang"))
        finally:
            server.stop()  # the hanging runs end, so the worker stops promptly
            stack.stop()
    finally:
        server.stop()
    assert hanging == 2  # half of the 4 runs in flight, the rest left to the other tenants
