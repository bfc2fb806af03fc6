"""Every rule of infra/prometheus/alerts.yml is evaluated by promtool (Prometheus's own rule
engine) on what Kadence's processes export, and fires (issue 43, item 4): most on a live stack
(tests/chaos/test_fleet_alerts_live.py, tests/integration/test_monitoring_live.py); the three
whose fault a live stack cannot show on demand (an unexpected error inside the scheduler or the
reaper, consumer lag growing past 10 000) here, on those processes' own metrics objects driven
as the fault drives them. A rule fired by no test, or deleted from alerts.yml, fails a test."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from apps.processes import REPO
from kadence.metrics import LagCollector, LagTracker
from streams.reaper.metrics import ReaperMetrics
from streams.scheduler.metrics import SchedulerMetrics
from testkit.alert_replay import Check, Scraper, Target, evaluate, rule_exprs
from tests.chaos.test_fleet_alerts_live import NEW as FLEET_ALERTS
from tests.integration.test_monitoring_live import FIRED as LIVE_ALERTS

RULES = REPO / "infra" / "prometheus" / "alerts.yml"
IN_PROCESS = ["KadenceJobQuarantined", "KadenceInputRefusedByError", "KadenceConsumerLagGrowing"]


def test_every_alert_rule_is_fired_by_a_test() -> None:
    fired = {*FLEET_ALERTS, *LIVE_ALERTS, "KadenceProcessDown", *IN_PROCESS}
    assert set(rule_exprs(RULES)) == fired


def test_the_first_failure_and_growing_lag_fire_their_alerts(tmp_path: Path) -> None:
    """The scheduler and the reaper start with their failure counters at 0, so the first
    quarantined job or refused record is an increase the rules see (a counter born at 1 is
    not); a worker's lag past 10 000 and rising is seen by the lag rule."""
    scheduler, reaper = SchedulerMetrics(), ReaperMetrics()
    lag = LagTracker("ns.workers")
    worker = CollectorRegistry()
    worker.register(LagCollector(lag))
    exprs = rule_exprs(RULES)
    names = {
        "kadence_scheduler_failures_total",
        "kadence_reaper_failures_total",
        "kadence_consumer_lag_records",
    }
    scraper = Scraper(
        [
            Target(job, job, None)
            for job in ("kadence-scheduler", "kadence-reaper", "kadence-worker")
        ],
        names,
    )
    at: dict[str, int] = {}
    for tick in range(40):
        if tick == 10:  # one job quarantined by the scheduler, as its processor counts it
            scheduler.failures.labels("quarantined").inc()
            at["KadenceJobQuarantined"] = tick + 2
        if tick == 20:  # one lease event refused by the reaper
            reaper.failures.labels("refused").inc()
            at["KadenceInputRefusedByError"] = tick + 2
        lag.per_topic = {"ns.executions": 0 if tick < 10 else (tick - 9) * 2_000}
        scraper.record(
            {
                "kadence-scheduler": generate_latest(scheduler.registry).decode(),
                "kadence-reaper": generate_latest(reaper.registry).decode(),
                "kadence-worker": generate_latest(worker).decode(),
            }
        )
    at["KadenceConsumerLagGrowing"] = 20  # 22 000 behind, rising
    checks = [Check(name, exprs[name], 9, expect=False) for name in IN_PROCESS]
    checks += [Check(name, exprs[name], tick, expect=True) for name, tick in at.items()]
    failed = evaluate(scraper, RULES, checks, tmp_path)
    assert not failed, failed
