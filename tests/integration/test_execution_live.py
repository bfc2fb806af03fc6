"""The execution path against the real broker: real scheduler, reaper and worker processes, a
real HTTP target on loopback, real signals."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from apps.processes import ChildProcess
from kadence.client import KadenceClient
from kadence.fired_series import runs_of
from kadence.metrics import ANY_PORT
from kadence.models import (
    CancelRun,
    Decision,
    HandlerTarget,
    HttpTarget,
    KafkaTarget,
    OnceSchedule,
    OutcomeStatus,
    ReplayDeadLetter,
    ScheduleDefinition,
)
from kadence.provisioning import delete_namespace
from kadence.settings import KadenceSettings
from testkit.scheduler_process import SchedulerProcess
from testkit.stack import (
    SECRET,
    ReaperProcess,
    Stack,
    WorkerProcess,
    applied_successes,
    dead_letters,
    execution_settings,
    history,
    outcomes,
    runs_started,
    until,
)
from testkit.target_server import TargetServer


@pytest.fixture
def server() -> Iterator[TargetServer]:
    srv = TargetServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def xsettings(settings: KadenceSettings) -> KadenceSettings:
    return execution_settings(settings)


def once(job_id: str, url: str, in_s: float = 2, **kw: Any) -> ScheduleDefinition:
    run_at = datetime.now(UTC) + timedelta(seconds=in_s)
    return ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": job_id,
            "version": 1,
            "schedule": {"kind": "once", "run_at": run_at},
            "target": HttpTarget(url=url, secret_ref="test"),
            "lease_ttl_ms": 3_000,
            **kw,
        }
    )


def put(settings: KadenceSettings, *jobs: ScheduleDefinition) -> None:
    with KadenceClient(settings) as client:
        client.put_many(list(jobs))


@pytest.mark.slow
def test_happy_path_a_cron_job_runs_against_a_signed_webhook(
    xsettings: KadenceSettings, server: TargetServer, tmp_path: Path
) -> None:
    stack = Stack.start(xsettings, tmp_path)
    try:
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
        job = ScheduleDefinition(
            tenant="acme",
            job_id="every-second",
            version=1,
            schedule={
                "kind": "cron",
                "expression": "* * * * * *",
                "start_at": start,
                "end_at": start + timedelta(seconds=2),
            },
            target=HttpTarget(url=f"{server.url}/ok", secret_ref="test"),
            payload=b'{"hello":"world"}',
            overlap="allow",
        )
        put(xsettings, job)
        hits = server.wait(3, "/ok", timeout_s=60)
        done = until(
            lambda: [o for o in outcomes(xsettings) if o.status is OutcomeStatus.succeeded][2:],
            30,
            "three succeeded outcomes",
        )
        assert done
        succeeded = until(lambda: applied_successes(xsettings, "every-second")[2:], 30, "history")
        assert succeeded
        metrics = stack.metrics(stack.worker_metrics)
    finally:
        stack.stop()
    keys = [h.headers["idempotency-key"] for h in hits]
    assert len(set(keys)) == 3  # three occurrences, three keys: the next one was scheduled
    assert all(k.startswith("acme/every-second@") for k in keys)
    for hit in hits:
        assert hit.body == b'{"hello":"world"}'
        assert hit.headers["webhook-id"] == hit.headers["idempotency-key"]
        signed = f"{hit.headers['webhook-id']}.{hit.headers['webhook-timestamp']}.".encode()
        key = base64.b64decode(SECRET.removeprefix("whsec_"))
        mac = hmac.new(key, signed + hit.body, hashlib.sha256).digest()
        assert hit.headers["webhook-signature"] == "v1," + base64.b64encode(mac).decode()
        assert (hit.headers["kadence-attempt"], hit.headers["kadence-delivery"]) == ("1", "1")
        due = datetime.fromisoformat(hit.headers["kadence-due-at"].replace("Z", "+00:00"))
        assert hit.at >= due.timestamp()  # never early, though dispatched ahead
    records = [run for h in history(xsettings) for run in runs_of(h)]  # a series: one per run
    fired = [str(h.execution_id) for h in records if h.decision is Decision.fired]
    assert sorted(fired) == sorted(keys)
    assert 'kadence_worker_executions_started_total{tenant="acme"} 3.0' in metrics
    assert (
        'kadence_worker_executions_finished_total{status="succeeded",tenant="acme"} 3.0' in metrics
    )
    assert 'kadence_worker_start_lateness_seconds_count{tenant="acme"} 3.0' in metrics
    assert 'kadence_worker_start_lateness_seconds_bucket{le="1.0",tenant="acme"} 3.0' in metrics


@pytest.mark.slow
def test_kill_9_a_worker_mid_run_redelivers_the_same_execution(
    xsettings: KadenceSettings, server: TargetServer, tmp_path: Path
) -> None:
    stack = Stack.start(xsettings, tmp_path)
    try:
        put(xsettings, once("ten-seconds", f"{server.url}/slow?s=10", timeout_ms=60_000))
        [first] = server.wait(1, "/slow", timeout_s=60)
        time.sleep(1)
        stack.workers[0].signal(signal.SIGKILL)
        stack.workers.append(WorkerProcess(xsettings, "w-next", tmp_path).start())
        second = server.wait(2, "/slow", timeout_s=90)[1]
        until(lambda: applied_successes(xsettings, "ten-seconds"), 60, "the success")
        time.sleep(2)
    finally:
        stack.stop()
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    assert (first.headers["kadence-delivery"], second.headers["kadence-delivery"]) == ("1", "2")
    assert len(server.seen("/slow")) == 2  # the key twice at most
    assert len(applied_successes(xsettings, "ten-seconds")) == 1
    [redelivered] = [h for h in history(xsettings) if h.decision is Decision.redelivered]
    assert redelivered.delivery == 2


@pytest.mark.slow
def test_a_worker_paused_past_its_lease_cannot_overwrite_the_newer_delivery(
    xsettings: KadenceSettings, server: TargetServer, tmp_path: Path
) -> None:
    stack = Stack.start(xsettings, tmp_path, workers=2)
    try:
        put(xsettings, once("paused-worker", f"{server.url}/slow?s=6", timeout_ms=60_000))
        server.wait(1, "/slow", timeout_s=60)  # delivery 1 runs: its worker counted it
        paused = until(
            lambda: next((w for w in stack.workers if runs_started(w)), None), 10, "holder"
        )
        others = [w for w in stack.workers if w is not paused]
        paused.signal(signal.SIGSTOP)
        second = server.wait(2, "/slow", timeout_s=60)[1]  # redelivered to the other worker
        time.sleep(8)  # the other worker finishes delivery 2
        paused.signal(signal.SIGCONT)
        until(lambda: applied_successes(xsettings, "paused-worker"), 60, "success")
        time.sleep(5)  # the woken worker reports (or is fenced); nothing more is invoked
    finally:
        stack.stop()
    assert others
    assert second.headers["kadence-delivery"] == "2"
    assert len(server.seen("/slow")) == 2  # the woken worker invoked nothing more
    results = [o for o in outcomes(xsettings) if o.job_id == "paused-worker"]
    by_delivery = {o.delivery: o.status for o in results}
    assert by_delivery[2] is OutcomeStatus.succeeded
    assert by_delivery.get(1, OutcomeStatus.lease_lost) is OutcomeStatus.lease_lost
    assert len(applied_successes(xsettings, "paused-worker")) == 1


@pytest.mark.slow
def test_a_failing_target_is_retried_with_backoff_then_dead_lettered_and_replayed(
    xsettings: KadenceSettings, server: TargetServer, tmp_path: Path
) -> None:
    retry = {"max_attempts": 3, "initial_backoff_ms": 1_000, "multiplier": 2, "jitter": "none"}
    stack = Stack.start(xsettings, tmp_path)
    try:
        put(xsettings, once("flaky", f"{server.url}/fail", retry=retry))
        [dead] = dead_letters(xsettings, 1, timeout_s=60)
        attempts = server.seen("/fail")
        until(
            lambda: "kadence_dead_letter_depth 1.0" in stack.metrics(stack.scheduler_metrics),
            10,
            "the dead letter counted",
        )
        with KadenceClient(xsettings) as client:
            client.send(
                ReplayDeadLetter(
                    tenant="acme",
                    job_id="flaky",
                    request_id="replay-1",
                    issued_at=datetime.now(UTC),
                )
            )
        server.wait(4, "/fail", timeout_s=30)  # the replay runs it again
        depth = stack.metrics(stack.scheduler_metrics)
        reaper_metrics = stack.metrics(stack.reaper_metrics)
    finally:
        stack.stop()
    assert [h.headers["kadence-attempt"] for h in attempts] == ["1", "2", "3"]  # never above
    assert len({h.headers["idempotency-key"] for h in attempts}) == 1
    gaps = [b.at - a.at for a, b in itertools.pairwise(attempts)]
    assert gaps[0] >= 1.0 and gaps[1] >= 2.0, gaps  # spaced at least by the backoff
    assert dead.reason == "retries_exhausted"
    assert dead.last_error is not None
    assert dead.last_error.code == "503"
    assert "target is down" in dead.last_error.message
    assert dead.execution.execution_id == attempts[0].headers["idempotency-key"]
    assert "kadence_dead_letter_depth 0.0" in depth  # replayed: no longer dead
    assert "kadence_reaper_lease_expiries_total 0.0" in reaper_metrics
    replayed = server.seen("/fail")[3]
    assert replayed.headers["idempotency-key"] == dead.execution.execution_id


@pytest.mark.slow
def test_a_job_that_kills_its_worker_is_dead_lettered_after_the_redelivery_cap(
    settings: KadenceSettings, tmp_path: Path
) -> None:
    xsettings = execution_settings(settings, redelivery_cap=2)
    stack = Stack.start(xsettings, tmp_path)
    job = once("poison", "http://unused.example/", lease_ttl_ms=3_000)
    job = job.model_copy(update={"target": HandlerTarget(name="crash")})
    try:
        put(xsettings, job)
        deadline = time.monotonic() + 120
        restarts = 0
        while time.monotonic() < deadline and not dead_letters(xsettings, 1, timeout_s=0.5):
            if not stack.workers[-1].running:  # it died running the poison job: a new one
                restarts += 1
                stack.workers.append(WorkerProcess(xsettings, f"w{restarts}", tmp_path).start())
            time.sleep(0.5)
        [dead] = dead_letters(xsettings, 1, timeout_s=5)
    finally:
        stack.stop()
    assert restarts == 2  # delivery 1 and 2 each killed a worker; then the reaper gave up
    assert dead.reason == "redelivery_cap"
    assert dead.last_error is not None
    assert dead.last_error.type == "RedeliveryCap"


@pytest.mark.slow
def test_cancel_stops_a_run_in_flight_and_a_timeout_ends_a_hanging_target(
    xsettings: KadenceSettings, server: TargetServer, tmp_path: Path
) -> None:
    stack = Stack.start(xsettings, tmp_path)
    try:
        put(
            xsettings,
            once("cancel-me", f"{server.url}/slow?s=60", timeout_ms=120_000),
            once("hangs", f"{server.url}/hang", timeout_ms=3_000, retry={"max_attempts": 1}),
        )
        [hit] = server.wait(1, "/slow", timeout_s=60)
        with KadenceClient(xsettings) as client:
            client.send(
                CancelRun(
                    tenant="acme",
                    job_id="cancel-me",
                    request_id="stop-it",
                    issued_at=datetime.now(UTC),
                    execution_id=hit.headers["idempotency-key"],
                )
            )
        sent = time.monotonic()
        cancelled = until(
            lambda: [o for o in outcomes(xsettings) if o.job_id == "cancel-me"], 30, "cancelled"
        )
        took = time.monotonic() - sent
        timed_out = until(
            lambda: [o for o in outcomes(xsettings) if o.job_id == "hangs"], 30, "timed out"
        )
    finally:
        stack.stop()
    assert [o.status for o in cancelled] == [OutcomeStatus.cancelled]
    assert took < 15  # not the 60 s the target would have taken
    assert [o.status for o in timed_out] == [OutcomeStatus.timed_out]
    duration = (timed_out[0].finished_at - timed_out[0].started_at).total_seconds()
    assert 2.5 <= duration < 10
    assert [d.reason for d in dead_letters(xsettings, 1, timeout_s=10)] == ["retries_exhausted"]


@pytest.mark.slow
def test_private_targets_are_refused_with_a_clear_error(
    settings: KadenceSettings, server: TargetServer, tmp_path: Path
) -> None:
    strict = execution_settings(settings, target_allow_cidrs=[])
    stack = Stack.start(strict, tmp_path)
    try:
        put(strict, once("ssrf", f"{server.url}/ok"))
        [dead] = dead_letters(strict, 1, timeout_s=60)
    finally:
        stack.stop()
    assert server.seen() == []
    assert dead.reason == "not_retryable"
    assert dead.last_error is not None
    assert dead.last_error.type == "AddressRefused"
    assert "127.0.0.1" in dead.last_error.message
    assert "loopback" in dead.last_error.message


@pytest.mark.slow
def test_the_kafka_topic_target_reaches_the_tenant_consumer(
    xsettings: KadenceSettings, tmp_path: Path
) -> None:
    from connectors.consumer import TopicConsumer  # noqa: PLC0415
    from connectors.kafka_topic import target_topic  # noqa: PLC0415

    stack = Stack.start(xsettings, tmp_path)
    got: list[str] = []
    stop = threading.Event()
    try:
        job = once("to-kafka", "http://unused.example/", in_s=12)
        put(xsettings, job.model_copy(update={"target": KafkaTarget(topic="orders")}))
        topic = target_topic(xsettings.namespace, "acme", "orders")
        admin = AdminClient({"bootstrap.servers": xsettings.bootstrap_servers})
        until(lambda: topic in admin.list_topics(timeout=5).topics, 10, "the prepared topic")
        assert isinstance(job.schedule, OnceSchedule)
        assert datetime.now(UTC) < job.schedule.run_at  # created ahead, while the run waited
        until(lambda: applied_successes(xsettings, "to-kafka"), 60, "the success")
        consumer = TopicConsumer(
            xsettings.bootstrap_servers, topic, group="acme-orders", tenant="acme"
        )
        thread = threading.Thread(
            target=consumer.run, args=(lambda ex: got.append(ex.execution_id), stop)
        )
        thread.start()
        until(lambda: got, 30, "the tenant consumer")
    finally:
        stop.set()
        stack.stop()
    [received] = got
    assert received.startswith("acme/to-kafka@")
    delete_namespace(xsettings)  # the tenant's target topics go with the namespace
    until(lambda: topic not in admin.list_topics(timeout=5).topics, 30, "the topic deleted")


def test_more_kafka_runs_due_at_once_than_one_transaction_delivers_arrive_once_each(
    xsettings: KadenceSettings, tmp_path: Path
) -> None:
    """Twelve runs due at one instant, a worker that delivers four per transaction: each turn
    takes four from its inbox and leaves the rest held (Inbox.max_leaseless); a read_committed
    tenant consumer sees all twelve, each once."""
    from connectors.consumer import TopicConsumer  # noqa: PLC0415
    from connectors.kafka_topic import target_topic  # noqa: PLC0415

    settings = xsettings.model_copy(update={"worker_deliveries_per_transaction": 4})
    stack = Stack.start(settings, tmp_path)
    got: list[str] = []
    stop = threading.Event()
    try:
        due = datetime.now(UTC) + timedelta(seconds=8)
        jobs = [
            once(f"batch-{n}", "http://unused.example/").model_copy(
                update={"schedule": OnceSchedule(run_at=due), "target": KafkaTarget(topic="b")}
            )
            for n in range(12)
        ]
        put(settings, *jobs)
        topic = target_topic(settings.namespace, "acme", "b")
        consumer = TopicConsumer(settings.bootstrap_servers, topic, group="acme-b", tenant="acme")
        thread = threading.Thread(
            target=consumer.run, args=(lambda ex: got.append(ex.execution_id), stop)
        )
        thread.start()
        until(lambda: len(got) >= 12, 60, "twelve records")
        time.sleep(2)  # a duplicate would come meanwhile
    finally:
        stop.set()
        stack.stop()
    assert len(got) == len(set(got)) == 12
    assert {g.split("@")[0] for g in got} == {f"acme/batch-{n}" for n in range(12)}


@pytest.mark.slow
def test_a_stopped_worker_finishes_its_run_first(
    xsettings: KadenceSettings, server: TargetServer, tmp_path: Path
) -> None:
    stack = Stack.start(xsettings, tmp_path)
    try:
        put(xsettings, once("graceful", f"{server.url}/slow?s=3", timeout_ms=60_000))
        server.wait(1, "/slow", timeout_s=60)
        worker = stack.workers[0]
        worker.signal(signal.SIGTERM)  # waits for the process to exit
        assert "worker: stopped" in worker.output()
        [done] = until(
            lambda: [o for o in outcomes(xsettings) if o.job_id == "graceful"], 10, "outcome"
        )
    finally:
        stack.stop()
    assert (done.status, done.delivery) == (OutcomeStatus.succeeded, 1)
    assert not [h for h in history(xsettings) if h.decision is Decision.redelivered]


@pytest.mark.slow
def test_a_redelivery_to_the_worker_whose_lease_ran_out_is_run_not_dropped(
    xsettings: KadenceSettings, server: TargetServer, tmp_path: Path
) -> None:
    """The worker keeps its partition through a pause longer than its lease: the reaper's
    redelivery (delivery 2) comes back to it while its own run (delivery 1, lease lost) is
    still in hand. It used to drop delivery 2 as "a redelivery of what we run", and nobody
    ever ran it (the chaos suite's net-fault scenario lost 19 occurrences that way)."""
    sched = SchedulerProcess(xsettings, "s", tmp_path / "sched")
    reaper = ReaperProcess(xsettings, tmp_path / "reaper")
    worker = ChildProcess(
        "apps.worker",
        xsettings.model_copy(update={"instance_id": "w0", "metrics_port": ANY_PORT}),
        log=tmp_path / "worker.log",
        session_timeout_ms=20_000,  # the pause below does not cost the worker its partitions
    )
    with ExitStack() as started:
        for proc in (sched, reaper):
            started.callback(proc.stop)
            proc.start()
        started.callback(worker.stop)
        worker.start().ready_when("partitions assigned", timeout=60)
        job = once("lost-lease", server.url, in_s=1, timeout_ms=60_000).model_copy(
            update={"target": HandlerTarget(name="stubborn"), "payload": b"14"}
        )
        put(xsettings, ScheduleDefinition.model_validate(job.model_dump()))
        until(lambda: runs_started(worker), 60, "the run started")
        worker.signal(signal.SIGSTOP)
        time.sleep(8)  # past the 3 s lease and the reaper's grace: delivery 2 is written
        worker.signal(signal.SIGCONT)  # its run goes on 5 s more: it ignores the stop
        until(lambda: applied_successes(xsettings, "lost-lease"), 90, "success")
    by_delivery = {o.delivery: o.status for o in outcomes(xsettings) if o.job_id == "lost-lease"}
    assert by_delivery == {1: OutcomeStatus.lease_lost, 2: OutcomeStatus.succeeded}
