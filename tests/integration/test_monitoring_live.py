"""Issue 43, item 4: the alerts and the Grafana dashboard evaluated on a live stack's metrics.

Scheduler, reaper, a worker, the query view and the ingress run as real processes on the real
broker, scraped four times a second (testkit/alert_replay.py) and, at once, by a real Prometheus
server (testkit/prometheus_server.py) under the job names infra/prometheus/prometheus.yml uses.
One scenario makes each per-tenant alert's condition happen for tenant `acme`: runs started 5 s
late, a missed window, 60 runs whose target fails (each dead-lettered, the tenant's circuit
opening, more than half its runs failing), all due at once over the tenant's cap of 10 a second
(throttled), a run for a worker pool no worker serves; the tenant writes to its ingress topic;
then the view and the ingress are stopped. promtool evaluates every alert of alerts.yml named in
FIRED on the record: none holds before the scenario, each holds after it. Each dashboard panel's
query, sent to the Prometheus server while the stack runs, returns series.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pydantic import SecretStr

from apps.processes import REPO, ChildProcess
from kadence.metrics import ANY_PORT
from kadence.models import HttpTarget
from kadence.provisioning import delete_namespace, provision, provision_ingress
from kadence.settings import KadenceSettings
from kadence.target_topics import ingress_topic
from testkit.alert_replay import Check, Scraper, Target, evaluate, rule_exprs
from testkit.prometheus_server import PrometheusServer, panel_queries
from testkit.stack import Stack, execution_settings
from testkit.target_server import TargetServer
from tests.integration.test_execution_live import once, put

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RULES = REPO / "infra" / "prometheus" / "alerts.yml"
DASHBOARD = REPO / "infra" / "grafana" / "kadence-dashboard.json"
FAILING = 60
"""Failing runs: more than 0.05 a second over the failure-rate alert's 10 minutes."""
FIRED = [
    "KadenceDispatchLatenessP99Over1s",
    "KadenceStartLatenessP99Over1s",
    "KadenceDeadLettersGrowing",
    "KadenceMissedWindows",
    "KadenceTenantDeadLetters",
    "KadenceTenantFailureRateHigh",
    "KadenceTenantCircuitOpened",
    "KadenceTenantThrottled",
    "KadencePoolWithoutWorkers",
]
"""The alerts this scenario fires (and KadenceProcessDown for the view and the ingress)."""
DOWN = ["kadence-view", "kadence-ingress"]


@dataclass
class Observed:
    scraper: Scraper
    quiet: int
    """A tick with every process up, before the scenario."""
    done: int
    """A tick after the scenario, every process still up."""
    down: dict[str, int]
    """Per job stopped at the end, a tick at which it did not answer."""
    panels: list[tuple[str, str, int]]
    """(panel title, query, series returned) from the Prometheus server, the stack live."""
    jobs_up: dict[str, int]
    namespace: str


def settings_for(bootstrap: str, tmp: Path) -> KadenceSettings:
    base = KadenceSettings(
        bootstrap_servers=bootstrap,
        namespace=f"test-{uuid.uuid4().hex[:10]}",
        partitions=3,
        execution_partitions=3,
        pools=["gpu"],
    )
    provision(base)
    return execution_settings(base).model_copy(
        update={
            "state_dir": tmp / "state",
            "view_token": SecretStr("monitoring-live-view-token"),
            "tenant_fires_per_s_by_tenant": {"acme": 10},
            "breaker_min_attempts": 3,
        }
    )


def last(scraper: Scraper, instance: str, name: str) -> float:
    """The sum of `name`'s series in `instance`'s last answered scrape (0: none); `name` may
    name labels too (`name{label="value",...}`): then only the series that have them."""
    metric, _, wanted = name.partition("{")
    labels = set(re.findall(r'\w+="[^"]*"', wanted))
    for tick in reversed(scraper.ticks):
        scrape = tick.get(instance)
        if scrape is not None:
            return sum(
                v
                for k, v in scrape.items()
                if k.startswith(metric + "{") and labels <= set(re.findall(r'\w+="[^"]*"', k))
            )
    return 0.0


def wait(what: str, done: Any, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def produce(settings: KadenceSettings, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers})
    for v in values:
        producer.produce(topic, v, b"acme/from-kafka")
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def observed(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    tmp = tmp_path_factory.mktemp("monitoring")
    s = settings_for(kafka_bootstrap, tmp)
    exprs = rule_exprs(RULES)
    names = {n for e in [*exprs.values(), *(q for _, q in panel_queries(DASHBOARD))] for n in
             re.findall(r"\bkadence_[a-z_]+\b", e)} | {"kadence_view_caught_up",
             "kadence_ingress_records_total", "kadence_scheduler_dead_letters_total",
             "kadence_view_records_total", "kadence_view_store_keys"}  # fmt: skip
    with ExitStack() as cleanup:
        cleanup.callback(delete_namespace, s)
        provision_ingress(s, "acme")
        target = TargetServer().start()
        cleanup.callback(target.stop)
        stack = Stack.start(s, tmp)
        cleanup.callback(stack.stop)
        view = ChildProcess(
            "apps.views",
            s.model_copy(update={"instance_id": "v", "view_port": 0, "metrics_port": ANY_PORT}),
            log=tmp / "views.log",
        )
        cleanup.callback(view.stop)
        view_port = view.start().listening("view", timeout=60)
        ingress = ChildProcess(
            "apps.ingress",
            s.model_copy(
                update={
                    "instance_id": "i",
                    "view_url": f"http://127.0.0.1:{view_port}",
                    "metrics_port": ANY_PORT,
                }
            ),
            log=tmp / "ingress.log",
        )
        cleanup.callback(ingress.stop)
        ingress.start().ready_when("ingress assigned", timeout=60)
        processes = {
            "kadence-scheduler": stack.scheduler,
            "kadence-reaper": stack.reaper,
            "kadence-worker": stack.workers[0],
            "kadence-view": view,
            "kadence-ingress": ingress,
        }
        scraper = Scraper([Target(job, job, p) for job, p in processes.items()], names)
        scraper.start()
        cleanup.callback(scraper.stop)
        prometheus = PrometheusServer(
            {j: [f"127.0.0.1:{p.listening('metrics')}"] for j, p in processes.items()},
            tmp / "prometheus",
            rule_file=RULES,
        ).start()
        cleanup.callback(prometheus.stop)

        def all_up() -> bool:
            tick = scraper.ticks[-1] if scraper.ticks else {}
            return all(tick.get(j) is not None for j in processes)

        wait("every process answering, the view caught up", lambda: all_up() and last(
            scraper, "kadence-view", "kadence_view_caught_up") == 1)  # fmt: skip
        quiet = scraper.now() - 1

        url = target.url
        put(s, *[once(f"late-{i}", f"{url}/ok", in_s=-5) for i in range(3)])
        put(s, once("too-late", f"{url}/ok", in_s=-90, missed={"mode": "none"}))
        gpu = HttpTarget(url=f"{url}/ok", secret_ref="test", pool="gpu")
        put(s, once("on-gpu", f"{url}/ok", in_s=1, target=gpu))
        fail = [once(f"fail-{i}", f"{url}/fail", retry={"max_attempts": 1}) for i in range(FAILING)]
        put(s, *fail)
        definition = {
            "tenant": "acme", "job_id": "from-kafka", "version": 1,
            "schedule": {"kind": "cron", "expression": "0 0 1 1 *"},
            "target": {"kind": "kafka", "topic": "out"},
        }  # fmt: skip
        produce(s, ingress_topic(s.namespace, "acme", "schedules"),
                [json.dumps(definition).encode(), b"not json"])  # fmt: skip

        sched, worker = "kadence-scheduler", "kadence-worker"
        for what, instance, name, at_least in [
            ("every failing run dead-lettered", sched, "kadence_scheduler_dead_letters_total",
             FAILING),
            ("the circuit opened", sched,
             'kadence_scheduler_tenant_circuit_changes_total{change="opened"}', 1),
            ("runs throttled", sched,
             'kadence_scheduler_occurrences_not_run_total{decision="throttled"}', 1),
            ("the late runs finished", worker, "kadence_worker_executions_finished_total",
             FAILING + 3),
            ("the gpu run waiting", "kadence-reaper", "kadence_pool_backlog_records", 1),
            ("the ingress's two records", "kadence-ingress", "kadence_ingress_records_total", 2),
        ]:  # fmt: skip
            wait(what, lambda i=instance, n=name, a=at_least: last(scraper, i, n) >= a)
        time.sleep(3)  # a few more scrapes by the server: rates need two samples
        done = scraper.now() - 1
        panels = [(title, q, len(prometheus.query(q))) for title, q in panel_queries(DASHBOARD)]
        jobs_up = prometheus.scrapes()

        down: dict[str, int] = {}
        for job, proc in [("kadence-view", view), ("kadence-ingress", ingress)]:
            proc.stop()
            wait(f"{job} seen down", lambda j=job: scraper.ticks[-1].get(j) is None, 30)
            down[job] = scraper.now() - 1
        scraper.stop()
        yield Observed(scraper, quiet, done, down, panels, jobs_up, s.namespace)


def test_every_alert_holds_after_its_fault_and_none_before(
    observed: Observed, tmp_path: Path
) -> None:
    exprs = rule_exprs(RULES)
    checks = [Check(name, exprs[name], observed.quiet, expect=False) for name in FIRED]
    checks += [Check(name, exprs[name], observed.done, expect=True) for name in FIRED]
    process_down = exprs["KadenceProcessDown"]
    checks.append(Check("KadenceProcessDown", process_down, observed.quiet, expect=False))
    for job, tick in observed.down.items():  # that job's own series, not another's
        only = f'({process_down}) and on (job) up{{job="{job}"}}'
        checks.append(Check(f"KadenceProcessDown {job}", only, tick, expect=True))
        checks.append(Check(f"KadenceProcessDown {job}", only, observed.done, expect=False))
    failed = evaluate(observed.scraper, RULES, checks, tmp_path)
    assert not failed, f"quiet tick {observed.quiet}, done {observed.done}:\n{failed}"


def test_every_dashboard_panel_returns_series_from_a_real_prometheus(observed: Observed) -> None:
    assert observed.jobs_up == {
        "kadence-scheduler": 1,
        "kadence-reaper": 1,
        "kadence-worker": 1,
        "kadence-view": 1,
        "kadence-ingress": 1,
    }
    empty = [f"{title}: {query}" for title, query, n in observed.panels if n == 0]
    assert not empty, "panels whose query returned nothing:\n" + "\n".join(empty)
    assert len(observed.panels) == len(panel_queries(DASHBOARD))


def test_the_view_and_the_ingress_serve_their_metrics(observed: Observed) -> None:
    """What the view and the ingress served once the scenario was over: the tenant's two
    ingress records, one accepted and one rejected; the view's records applied, its store
    holding the jobs, its lag read to the end."""
    scrape = observed.scraper.ticks[observed.done]
    ingress, view = scrape["kadence-ingress"], scrape["kadence-view"]
    assert ingress is not None and view is not None
    where = 'instance="kadence-ingress",job="kadence-ingress"'
    records = "kadence_ingress_records_total"
    assert ingress[f'{records}{{{where},result="accepted",tenant="acme"}}'] == 1
    assert ingress[f'{records}{{{where},result="rejected",tenant="acme"}}'] == 1
    assert (
        last(observed.scraper, "kadence-view", 'kadence_view_records_total{result="applied"}')
        > FAILING
    )
    assert last(observed.scraper, "kadence-view", "kadence_view_store_keys") > FAILING
    lag = f'kadence_consumer_lag_records{{group="{observed.namespace}.views"}}'
    assert f'group="{observed.namespace}.views"' in "".join(view), sorted(view)
    assert last(observed.scraper, "kadence-view", lag) == 0
