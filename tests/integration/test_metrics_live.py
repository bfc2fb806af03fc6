"""/metrics on the live processes: late executions land in the lateness buckets (dispatch at
the scheduler, start at the worker), a missed window is counted, and consumer lag and restore
progress are exposed."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from kadence.settings import KadenceSettings
from testkit.stack import Stack, execution_settings, outcomes
from testkit.target_server import TargetServer
from tests.integration.test_execution_live import once, put

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample, labels matched exactly as given (others ignored)."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name}{labels} in:\n{text[:3000]}")


def test_late_executions_show_in_the_lateness_buckets(
    settings: KadenceSettings, tmp_path: Path
) -> None:
    s = execution_settings(settings)
    target = TargetServer().start()
    stack = Stack.start(s, tmp_path)
    try:
        # three one-off jobs due 5 s ago: dispatched and started about 5 s late
        put(s, *[once(f"late-{i}", f"{target.url}/ok", in_s=-5) for i in range(3)])
        # one due 90 s ago with missed.mode none: a missed window, not run
        put(s, once("too-late", f"{target.url}/ok", in_s=-90, missed={"mode": "none"}))
        deadline = time.monotonic() + 60
        while len({o.execution_id for o in outcomes(s)}) < 3 and time.monotonic() < deadline:
            time.sleep(0.5)
        sched = stack.metrics(stack.scheduler_metrics)
        worker = stack.metrics(stack.worker_metrics)
        name = "kadence_scheduler_dispatch_lateness_seconds_bucket"
        assert sample(sched, name, tenant="acme", le="2.0") == 0
        assert sample(sched, name, tenant="acme", le="10.0") == 3
        name = "kadence_worker_start_lateness_seconds_bucket"
        assert sample(worker, name, tenant="acme", le="2.0") == 0
        assert sample(worker, name, tenant="acme", le="10.0") == 3
        assert (
            sample(
                sched,
                "kadence_scheduler_occurrences_not_run_total",
                tenant="acme",
                decision="missed",
            )
            == 1
        )
        assert (
            sample(
                worker,
                "kadence_worker_executions_finished_total",
                tenant="acme",
                status="succeeded",
            )
            == 3
        )
        # lag is measured by each consumer's own loop every 5 s: wait for a measurement
        lag = "kadence_consumer_lag_records"
        for port, topic in [
            (stack.worker_metrics, f"{s.namespace}.executions"),
            (stack.scheduler_metrics, f"{s.namespace}.schedules"),
        ]:
            deadline = time.monotonic() + 15
            while f'topic="{topic}"' not in stack.metrics(port) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert sample(stack.metrics(port), lag, topic=topic) == 0
        assert sample(sched, "kadence_restores_completed") == 3  # one per partition
        assert sample(sched, "kadence_restore_partitions") == 0
        assert "kadence_dead_letter_depth" in sched
        assert "kadence_restore_remaining_records" in stack.metrics(stack.reaper_metrics)
    finally:
        stack.stop()
        target.stop()
