"""The worker's inbox is bounded under a flood (issue 29, item 4): tenant acme floods its
executions partition with 120 runs against a target that does not answer, far past the
worker's inbox bound (100) and its running cap (2 of 4 slots). Tenant initech, on the same
partition, still starts on time; the worker holds a handful of acme's runs, not 120; the rest
waits in Kafka and shows in the workers' lag. Once the target answers, every acme run runs,
each once. Real scheduler, reaper and worker processes on the real broker."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kadence.client import KadenceClient
from kadence.models import HttpTarget, ScheduleDefinition
from kadence.partitioning import execution_route, partition_for
from kadence.settings import KadenceSettings
from testkit.stack import Stack, execution_settings, outcomes
from testkit.target_server import TargetServer

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
FLOOD = 120


def once(tenant: str, job_id: str, url: str, at: datetime) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": tenant,
            "job_id": job_id,
            "version": 1,
            "schedule": {"kind": "once", "run_at": at},
            "target": HttpTarget(url=url),
            "retry": {"max_attempts": 1},
            "timeout_ms": 300_000,
        }
    )


def gauge(text: str, name: str, label: str | None) -> float:
    labels = "" if label is None else rf"\{{{label}\}}"
    found = re.findall(rf"^{name}{labels} (\S+)$", text, re.M)
    return sum(float(v) for v in found)


def test_a_flood_that_cannot_start_stays_in_kafka_and_the_others_start(
    settings: KadenceSettings, tmp_path: Path
) -> None:
    xsettings = execution_settings(
        settings,
        worker_concurrency=4,
        worker_async_max_in_flight=4,
        worker_inbox_max_executions=100,
    )  # HTTP runs go on the event loop: 2 a tenant of its 4; acme holds 4 at most
    parts = {partition_for(execution_route(t, "j", {}), 3) for t in ("acme", "initech")}
    assert len(parts) == 1  # one partition: pausing it would hold initech up too
    server = TargetServer().start()
    server.gate.clear()  # acme's target does not answer
    try:
        stack = Stack.start(xsettings, tmp_path)
        try:
            now = datetime.now(UTC)
            flood = [
                once("acme", f"f{n}", f"{server.url}/slow?s=0&gated=1", now + timedelta(seconds=4))
                for n in range(FLOOD)
            ]
            small = [
                once("initech", f"s{n}", f"{server.url}/ok", now + timedelta(seconds=10 + n))
                for n in range(8)
            ]
            with KadenceClient(xsettings) as client:
                client.put_many([*flood, *small])
            held, lag, backlog = [], [], []
            ns = xsettings.namespace
            workers_lag = f'group="{ns}.workers",topic="{ns}.executions"'
            while len(server.seen("/ok")) < len(small):
                text = stack.metrics(stack.worker_metrics)
                held.append(gauge(text, "kadence_worker_inbox", 'what="executions"'))
                lag.append(gauge(text, "kadence_consumer_lag_records", workers_lag))
                backlog.append(gauge(text, "kadence_worker_backlog_records", None))
                assert len(held) < 120, "initech's runs did not all start in 60 s"
                time.sleep(0.5)
            hanging = len(server.seen("/slow"))
            server.gate.set()  # the target answers: acme's backlog drains
            server.wait(FLOOD, "/slow", timeout_s=120)
            done = outcomes(xsettings, expect=FLOOD + len(small), timeout_s=30)
            drained = stack.metrics(stack.worker_metrics)
            for _ in range(40):  # the lag is measured every 5 s
                if gauge(drained, "kadence_worker_backlog_records", None) == 0:
                    break
                time.sleep(0.5)
                drained = stack.metrics(stack.worker_metrics)
        finally:
            server.stop()
            stack.stop()
    finally:
        server.stop()
    assert hanging == 2  # its cap
    assert max(held) <= 100, held  # the bound, whatever comes
    assert held[-1] <= 4 + 8, held  # acme at its cap holds its quota (and initech its runs)
    assert max(lag) >= FLOOD - 10, lag  # the backlog, in Kafka
    # issue 30: the backlog signal rises to the flood's runs waiting and falls to 0 once done
    assert max(backlog) >= FLOOD - 10, backlog
    assert gauge(drained, "kadence_worker_backlog_records", None) == 0
    assert gauge(drained, "kadence_worker_due_not_started", 'tenant="acme"') == 0
    late = [(o.started_at - o.due_at).total_seconds() for o in done if o.tenant == "initech"]
    assert len(late) == len(small) and max(late) < 1, late
    ids = [h.headers["kadence-execution-id"] for h in server.seen("/slow")]
    assert len(ids) == len(set(ids)) == FLOOD  # each acme run once: none lost, none twice
    assert sorted(o.execution_id for o in done if o.tenant == "acme") == sorted(ids)
