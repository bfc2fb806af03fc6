"""infra/: the Prometheus scrape config, alert rules and Grafana dashboard parse, and every
metric they query is one Kadence exports (a renamed metric breaks this, not a silent panel)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import yaml
from prometheus_client import CollectorRegistry

from kadence.metrics import LagTracker
from kadence.settings import KadenceSettings
from streams.reaper.metrics import ReaperMetrics
from streams.reaper.pool_watch import PoolMetrics
from streams.runtime.metrics import RuntimeCollector
from streams.scheduler.metrics import SchedulerCollector, SchedulerMetrics
from streams.worker.metrics import WorkerMetrics

REPO = Path(__file__).resolve().parents[1]
COLLECTED = {  # gauges yielded by collectors at scrape time (they need a live process)
    "kadence_dead_letter_depth",
    "kadence_scheduler_partitions",
    "kadence_job_partitions",
    "kadence_standby_partitions",
    "kadence_standby_lag_records",
    "kadence_consumer_lag_records",
    "kadence_restore_partitions",
    "kadence_restore_remaining_records",
    "kadence_restores_completed",
}


def collected() -> set[str]:
    """What the scrape-time collectors yield, from the collectors themselves."""
    runner = SimpleNamespace(
        lag=LagTracker("g"), restoring={}, standbys=None, stats=SimpleNamespace(restores=[])
    )
    families = [
        *SchedulerCollector(lambda: 0, lambda: 0, job_partitions=12).collect(),
        *RuntimeCollector(runner).collect(),  # type: ignore[arg-type]
    ]
    return {f.name for f in families}


def test_the_collected_list_is_what_the_collectors_yield() -> None:
    assert collected() == COLLECTED


def pool_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    PoolMetrics(registry)
    return registry


def exported() -> set[str]:
    names = set(COLLECTED)
    for registry in (
        SchedulerMetrics().registry,
        WorkerMetrics().registry,
        ReaperMetrics().registry,
        pool_registry(),
    ):
        assert isinstance(registry, CollectorRegistry)
        for family in registry.collect():
            suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
            names |= {family.name + s for s in suffixes.get(family.type, [""])}
    return names


def queried(text: str) -> set[str]:
    return set(re.findall(r"\bkadence_[a-z_]+", text))


def test_alert_rules_parse_and_query_exported_metrics() -> None:
    rules = yaml.safe_load((REPO / "infra/prometheus/alerts.yml").read_text())
    alerts = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    assert {
        "KadenceDispatchLatenessP99Over1s",
        "KadenceStartLatenessP99Over1s",
        "KadenceDeadLettersGrowing",
        "KadenceMissedWindows",
        "KadenceJobQuarantined",
        "KadenceInputRefusedByError",
        "KadenceProcessDown",
        "KadenceSchedulerPartitionsUnowned",
        "KadenceRestoreInProgress",
        "KadenceStandbyLagging",
        "KadenceRebalancesLooping",
        "KadencePoolWithoutWorkers",
    } <= set(alerts)
    assert "> 1" in alerts["KadenceDispatchLatenessP99Over1s"]["expr"]
    names = set().union(*(queried(r["expr"]) for r in alerts.values()))
    assert names, "no metric queried"
    assert names <= exported(), names - exported()


def test_scrape_config_and_dashboard_query_exported_metrics() -> None:
    scrape = yaml.safe_load((REPO / "infra/prometheus/prometheus.yml").read_text())
    jobs = {c["job_name"] for c in scrape["scrape_configs"]}
    assert {"kadence-scheduler", "kadence-worker", "kadence-reaper", "kadence-api"} <= jobs
    assert scrape["rule_files"] == ["alerts.yml"]
    dash = json.loads((REPO / "infra/grafana/kadence-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 8
    names = set().union(*(queried(e) for e in exprs))
    assert names <= exported(), names - exported()


def test_the_autoscaling_examples_scale_the_workers_on_the_backlog_metric() -> None:
    """Issue 30, item 4: the KEDA and HPA examples scale the workers' Deployment on
    `kadence_worker_backlog_records`, a metric the worker exports, within the partitions."""
    keda = yaml.safe_load((REPO / "infra/k8s/autoscaling/keda-scaledobject.yaml").read_text())
    hpa = yaml.safe_load((REPO / "infra/k8s/autoscaling/hpa.yaml").read_text())
    assert keda["kind"] == "ScaledObject" and hpa["kind"] == "HorizontalPodAutoscaler"
    assert keda["spec"]["scaleTargetRef"]["name"] == hpa["spec"]["scaleTargetRef"]["name"]
    [trigger] = keda["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    assert queried(trigger["metadata"]["query"]) == {"kadence_worker_backlog_records"}
    [metric] = hpa["spec"]["metrics"]
    assert metric["external"]["metric"]["name"] == "kadence_worker_backlog_records"
    assert "kadence_worker_backlog_records" in exported()
    partitions = KadenceSettings().execution_partitions  # more workers than that sit idle
    assert keda["spec"]["maxReplicaCount"] == hpa["spec"]["maxReplicas"] == partitions
