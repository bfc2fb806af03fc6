"""infra/: the Prometheus scrape config, alert rules and Grafana dashboard parse, and every
metric they query is one Kadence exports (a renamed metric breaks this, not a silent panel)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from kadence.metrics import LagTracker
from kadence.settings import KadenceSettings
from kadence.work_cpu import WorkCpu
from streams.ingress.metrics import IngressMetrics
from streams.reaper.metrics import ReaperMetrics
from streams.reaper.pool_watch import PoolMetrics
from streams.runtime.metrics import RuntimeCollector
from streams.scheduler.metrics import SchedulerCollector, SchedulerMetrics
from streams.views.metrics import ViewCollector
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
    "kadence_view_records",
    "kadence_view_caught_up",
    "kadence_view_store_keys",
    "kadence_view_store_bytes",
    "kadence_work_cpu_seconds",  # a counter: served with _total
}


def collected() -> set[str]:
    """What the scrape-time collectors yield, from the collectors themselves."""
    runner = SimpleNamespace(
        lag=LagTracker("g"),
        work=WorkCpu(),
        restoring={},
        standbys=None,
        stats=SimpleNamespace(restores=[]),
    )
    db = SimpleNamespace(property_int_value=lambda _name: 1)
    view = SimpleNamespace(
        applied=0, refused=0, skipped=0, failed=0, ready=True, lag=LagTracker("g"),
        store=SimpleNamespace(db=db),
    )  # fmt: skip
    families = [
        *SchedulerCollector(lambda: 0, lambda: 0, job_partitions=12).collect(),
        *RuntimeCollector(runner).collect(),  # type: ignore[arg-type]
        *ViewCollector(view).collect(),  # type: ignore[arg-type]
    ]
    return {f.name for f in families}


def test_the_collected_list_is_what_the_collectors_yield() -> None:
    assert collected() == COLLECTED


def pool_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    PoolMetrics(registry)
    return registry


def exported() -> set[str]:
    names = set(COLLECTED) | {"kadence_view_records_total", "kadence_work_cpu_seconds_total"}
    for registry in (
        SchedulerMetrics().registry,
        WorkerMetrics().registry,
        ReaperMetrics().registry,
        IngressMetrics().registry,
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


# Issue 43, item 4: every job name the alerts, the dashboard or KEDA query is one that each
# scrape configuration produces (local, Prometheus Operator, plain Prometheus on Kubernetes).
JOBS = {
    "apps.scheduler": "kadence-scheduler",
    "apps.reaper": "kadence-reaper",
    "apps.worker": "kadence-worker",
    "apps.views": "kadence-view",
    "apps.ingress": "kadence-ingress",
    "apps.api": "kadence-api",
}
SCRAPED_PORTS = {"metrics", "http", "view-metrics"}


def queries() -> list[str]:
    rules = yaml.safe_load((REPO / "infra/prometheus/alerts.yml").read_text())
    dash = json.loads((REPO / "infra/grafana/kadence-dashboard.json").read_text())
    keda = yaml.safe_load((REPO / "infra/k8s/autoscaling/keda-scaledobject.yaml").read_text())
    return [
        *(r["expr"] for g in rules["groups"] for r in g["rules"]),
        *(t["expr"] for p in dash["panels"] for t in p["targets"]),
        *(t["metadata"]["query"] for t in keda["spec"]["triggers"]),
    ]


def unscraped(exprs: list[str], jobs: set[str]) -> list[str]:
    """The job matchers in `exprs` that no job of `jobs` satisfies (`job="x"`: x is one;
    `job=~"re"`: every job matches, as KadenceProcessDown means every process)."""
    missing = []
    for op, value in re.findall(r'\bjob\s*(=~|=)\s*"([^"]*)"', "\n".join(exprs)):
        if op == "=" and value not in jobs:
            missing.append(f'job="{value}"')
        if op == "=~" and not all(re.fullmatch(value, j) for j in jobs):
            missing.append(f'job=~"{value}"')
    return missing


def local_jobs() -> set[str]:
    """infra/prometheus/prometheus.yml's jobs; each scrapes the port `make run` serves on."""
    from apps.stack import METRICS_PORTS  # noqa: PLC0415

    scrape = yaml.safe_load((REPO / "infra/prometheus/prometheus.yml").read_text())
    ports = {**METRICS_PORTS, "apps.api": KadenceSettings().api_port}
    for c in scrape["scrape_configs"]:
        [target] = [t for s in c["static_configs"] for t in s["targets"]]
        module = next(m for m, job in JOBS.items() if job == c["job_name"])
        assert target == f"127.0.0.1:{ports[module]}", c
    return {c["job_name"] for c in scrape["scrape_configs"]}


def pod_ports() -> list[tuple[dict[str, str], dict[str, Any], dict[str, str]]]:
    """(pod labels, container port, the container's env) for each named port in infra/k8s."""
    from tests.test_k8s_manifests import config, containers, workloads  # noqa: PLC0415

    out = []
    for w in workloads().values():
        labels = w["spec"]["template"]["metadata"]["labels"]
        for c in containers(w):
            env = {**config(), **{e["name"]: e.get("value", "") for e in c.get("env", [])}}
            out += [(labels, p, env) for p in c.get("ports", []) if "name" in p]
    return out


def pod_monitor_jobs() -> set[str]:
    """The jobs infra/k8s/monitoring.yaml's PodMonitor gives, as the Prometheus Operator
    names them: the pod's `jobLabel` label, unless the endpoint's relabelings set `job`."""
    [monitor] = yaml.safe_load_all((REPO / "infra/k8s/monitoring.yaml").read_text())
    spec = monitor["spec"]
    endpoints = {e["port"]: e for e in spec["podMetricsEndpoints"]}
    jobs = set()
    for labels, port, _env in pod_ports():
        selected = spec["selector"]["matchLabels"].items() <= labels.items()
        if not selected or port["name"] not in endpoints:
            continue
        job = labels[spec["jobLabel"]]
        for r in endpoints[port["name"]].get("relabelings", []):
            if r["targetLabel"] == "job":
                job = r["replacement"]
        jobs.add(job)
    return jobs


def relabel(labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, str] | None:
    """Prometheus's `keep` and `replace` relabeling (None: the target is dropped)."""
    for r in rules:
        value = ";".join(labels.get(s, "") for s in r.get("source_labels", []))
        match = re.fullmatch(r.get("regex", "(.*)"), value)
        if r.get("action", "replace") == "keep":
            if match is None:
                return None
        elif match is not None:
            labels[r["target_label"]] = match.expand(
                r.get("replacement", "$1").replace("$1", r"\1")
            )
    return labels


def kubernetes_jobs() -> set[str]:
    """The jobs infra/prometheus/kubernetes.yml gives the pods of infra/k8s."""
    scrape = yaml.safe_load((REPO / "infra/prometheus/kubernetes.yml").read_text())
    assert scrape["rule_files"] == ["alerts.yml"]
    [c] = scrape["scrape_configs"]
    assert c["kubernetes_sd_configs"] == [{"role": "pod"}]
    jobs = set()
    for labels, port, _env in pod_ports():
        meta = {
            "job": c["job_name"],
            "__meta_kubernetes_pod_container_port_name": port["name"],
            "__meta_kubernetes_pod_name": "pod-0",
            **{
                "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", k): v
                for k, v in labels.items()
            },
        }
        target = relabel(meta, c["relabel_configs"])
        if target is not None:
            jobs.add(target["job"])
    return jobs


@pytest.mark.parametrize("produced", [local_jobs, pod_monitor_jobs, kubernetes_jobs])
def test_each_scrape_configuration_names_every_process_as_the_queries_expect(
    produced: Callable[[], set[str]],
) -> None:
    from apps.stack import PROCESSES  # noqa: PLC0415

    assert set(JOBS) == set(PROCESSES)  # a new process needs a job name
    jobs = produced()
    assert jobs == set(JOBS.values())
    assert unscraped(queries(), jobs) == []
    assert any('job="kadence-worker"' in q for q in queries())  # KEDA's query is read


def test_a_job_no_configuration_scrapes_is_found() -> None:
    """The check above can fail: KEDA asking for a job nobody scrapes, or a process whose job
    the fleet alert's pattern misses."""
    jobs = set(JOBS.values())
    assert unscraped(['sum(x{job="kadence-workers"})'], jobs) == ['job="kadence-workers"']
    assert unscraped(['up{job=~"kadence-s.*"} == 0'], jobs) == ['job=~"kadence-s.*"']


def test_scraped_ports_are_where_the_processes_serve_metrics() -> None:
    """A `metrics` or `view-metrics` port is the KADENCE_METRICS_PORT its container gets (two
    containers of one pod cannot share one); the processes with metrics all have one."""
    seen = set()
    for labels, port, env in pod_ports():
        if port["name"] in ("metrics", "view-metrics"):
            assert port["containerPort"] == int(env["KADENCE_METRICS_PORT"]), labels
            seen.add(
                port["name"] if port["name"] == "view-metrics" else labels["app.kubernetes.io/name"]
            )
    assert seen == {
        "kadence-scheduler",
        "kadence-reaper",
        "kadence-worker",
        "kadence-ingress",
        "view-metrics",
    }


def test_every_dashboard_query_is_one_prometheus_can_be_sent() -> None:
    """The live test sends each panel's query to Prometheus with Grafana's variables filled
    in (testkit/prometheus_server.py); a variable it has no value for fails here, naming it."""
    from testkit.prometheus_server import grafana_expr, panel_queries  # noqa: PLC0415

    queries = panel_queries(REPO / "infra/grafana/kadence-dashboard.json")
    assert len(queries) >= 13 and all("$" not in q for _, q in queries)
    assert grafana_expr("rate(x[$__rate_interval])") == "rate(x[1m])"
    assert grafana_expr('x{tenant=~"${tenant}"}') == 'x{tenant=~".*"}'
    with pytest.raises(ValueError, match=r"\$cluster"):
        grafana_expr('up{cluster="$cluster"}')
