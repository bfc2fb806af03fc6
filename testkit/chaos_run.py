"""A chaos run: a real stack (schedulers, reaper, workers, a loopback HTTP target), a job mix,
faults from a seeded RNG, then healing, quiescence, the recorded history and the checker.

Everything a run does is derived from its seed, and every fault is printed as it is injected,
so a failing run can be replayed (`make chaos SEED=n SCENARIO=name`).
"""

from __future__ import annotations

import random
import shutil
import signal
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apps.processes import ChildProcess
from infra.kafka.kafkactl import BrokerConfig
from kadence.batches import records_in
from kadence.client import KadenceClient
from kadence.clock import datetime_to_ms
from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.models import (
    DeadLetter,
    Decision,
    ExecutionBatch,
    ExecutionOutcome,
    ExecutionRequested,
    ExecutionRevoked,
    HistoryRecord,
    HttpTarget,
    KafkaTarget,
    PauseJob,
    ResumeJob,
    ScheduleDefinition,
)
from kadence.provisioning import delete_namespace, provision
from kadence.settings import KadenceSettings
from kadence.topics import EXECUTIONS, Topics, target_topic
from testkit import history_io
from testkit.checker import Event, Report, check
from testkit.netproxy import NetProxy
from testkit.scheduler_process import SchedulerProcess, job_cursors
from testkit.stack import ReaperProcess, WorkerProcess, execution_settings
from testkit.target_server import TargetServer
from testkit.topic_reader import read_topic

CODEC = Codec()
TENANTS = ("t0", "t1", "t2")
KAFKA = "kafka"
"""In `Run.jobs`' paths: the job writes to its tenant's Kafka topic KAFKA_TOPIC instead."""
KAFKA_TOPIC = "chaos"
PATHS = ("/ok", "/ok", "/slow?s=2", "/flaky", KAFKA)
"""The kinds of job of `Run.jobs`, in turn (job i has PATHS[i % 5], tenant i % 3)."""
BATCH_PATHS = ("/ok", KAFKA, "/slow?s=2", KAFKA, "/flaky", KAFKA)
"""Its kinds with executions in batches: with 12 jobs, each tenant has two Kafka-topic jobs."""
INTENDED_EXITS = frozenset({0, -signal.SIGTERM, -signal.SIGKILL})
"""A clean stop, and the kill -9 scenarios send."""
RESULTS = Path(__file__).resolve().parents[1] / ".run" / "chaos"
EXPLAINED = frozenset(
    {
        Decision.missed,
        Decision.coalesced,
        Decision.skipped_overlap,
        Decision.skipped_dst,
        Decision.skipped_paused,
    }
)
"""History decisions that account for an occurrence not running."""


def now_ms() -> int:
    return int(time.time() * 1000)


def _proxy_for(bootstrap: str) -> NetProxy:
    """The proxy in front of the local broker's second listener (see kafkactl's ports)."""
    cfg = BrokerConfig(home=Path("/unused"), port=int(bootstrap.rsplit(":", 1)[1]))
    return NetProxy(cfg.proxy_port, cfg.proxied_port)


@dataclass
class Run:
    name: str
    seed: int
    bootstrap: str
    root: Path
    n_workers: int = 2
    n_schedulers: int = 1
    via_proxy: bool = False
    """Schedulers and workers reach the broker through a NetProxy (the reaper and the harness
    itself directly), so a scenario can cut, stall or slow their network."""
    batches: bool = True
    """The schedulers write executions in batches (`KADENCE_EXECUTION_BATCHES`, the default);
    False: a record each."""
    rng: random.Random = field(init=False)
    schedulers: list[SchedulerProcess] = field(init=False)
    worker_procs: list[WorkerProcess] = field(init=False)
    events: list[Event] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    state_read_s: float = 5
    """How long `collect` reads the scheduler changelog for the jobs' final state (more when
    the schedulers hold many other jobs: bench.failover --idle-jobs)."""

    def __post_init__(self) -> None:
        self.rng = random.Random(f"{self.name}/{self.seed}")  # noqa: S311 (seeded: a replayable run)
        base = KadenceSettings(
            bootstrap_servers=self.bootstrap,
            namespace=f"chaos-{self.name}-{uuid.uuid4().hex[:6]}",
            partitions=3,
            execution_partitions=3,
            execution_batches=self.batches,
        )
        self.settings = execution_settings(base)
        provision(self.settings)
        self.server = TargetServer().start()
        self.proxy: NetProxy | None = None
        self.proc_settings = self.settings
        if self.via_proxy:
            self.proxy = _proxy_for(self.bootstrap).start()
            self.proc_settings = self.settings.model_copy(
                update={"bootstrap_servers": self.proxy.address}
            )
        self.schedulers = [
            SchedulerProcess(self.proc_settings, f"s{i}", self.root / f"s{i}")
            for i in range(self.n_schedulers)
        ]
        self.reaper = ReaperProcess(self.settings, self.root / "reaper")
        self.worker_procs = [
            WorkerProcess(self.proc_settings, f"w{i}", self.root) for i in range(self.n_workers)
        ]

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Run:
        """Start every process; if one fails, stop the ones already running."""
        try:
            for s in self.schedulers:
                s.start()
            self.reaper.start()
            for w in self.worker_procs:
                w.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop everything, each one even if stopping another failed (ExitStack: last first)."""
        with ExitStack() as stops:
            if self.proxy is not None:
                stops.callback(self.proxy.stop)
            stops.callback(self.server.stop)
            for proc in reversed([*self.worker_procs, self.reaper, *self.schedulers]):
                stops.callback(self._stop, proc)

    @staticmethod
    def _stop(proc: ChildProcess) -> None:
        if proc.running:
            proc.signal(signal.SIGCONT)  # a paused one must hear the SIGTERM
        proc.stop()

    def cleanup(self) -> None:
        delete_namespace(self.settings)
        shutil.rmtree(self.root, ignore_errors=True)

    def say(self, what: str) -> None:
        line = f"[{self.name} seed={self.seed} t={time.strftime('%H:%M:%S')}] {what}"
        self.log.append(line)
        print(line, flush=True)

    # -- the workload ------------------------------------------------------------------------

    def jobs(
        self,
        n: int,
        seconds: int,
        lead_s: int = 5,
        expression: Callable[[int], str] = lambda _i: "* * * * * *",
        paths: tuple[str, ...] | None = None,
    ) -> tuple[list[ScheduleDefinition], int]:
        """n jobs (every second unless `expression` says otherwise) for `seconds` s from `lead_s`
        s ahead; by default a fifth of them slow (a run overlaps the next ones), a fifth flaky
        (fail their first attempt, then succeed) and a fifth writing to the tenant's Kafka
        topic `chaos` (read back read_committed: exactly once). With `batches`, half of them
        write to it (`BATCH_PATHS`): every tenant has two, due at the same instants."""
        if paths is None:
            paths = BATCH_PATHS if self.batches else PATHS
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=lead_s)
        end = start + timedelta(seconds=seconds - 1)
        defs = []
        for i in range(n):
            path = paths[i % len(paths)]  # every kind of job in every run, tenants mixed
            defs.append(
                ScheduleDefinition.model_validate(
                    {
                        "tenant": TENANTS[i % len(TENANTS)],
                        "job_id": f"job-{i}",
                        "version": 1,
                        "schedule": {
                            "kind": "cron",
                            "expression": expression(i),
                            "start_at": start,
                            "end_at": end,
                        },
                        "target": (
                            KafkaTarget(topic=KAFKA_TOPIC)
                            if path == KAFKA
                            else HttpTarget(url=f"{self.server.url}{path}")
                        ),
                        "overlap": "allow",
                        "lease_ttl_ms": 3_000,
                        "timeout_ms": 20_000,
                        "missed": {"mode": "all"},
                        "retry": {"max_attempts": 4, "initial_backoff_ms": 500, "jitter": "none"},
                    }
                )
            )
        with KadenceClient(self.settings) as client:
            for chunk in range(0, len(defs), 5_000):
                client.put_many(defs[chunk : chunk + 5_000])
        acked = now_ms()
        self.events += [
            {"kind": "created", "job": d.model_dump(mode="json"), "at_ms": acked} for d in defs
        ]
        self.events.append(
            {
                "kind": "window",
                "start_ms": datetime_to_ms(start),
                "end_ms": datetime_to_ms(end),
                "grace_ms": 0,
            }
        )
        return defs, datetime_to_ms(end)

    def pause(self, d: ScheduleDefinition, resume: bool = False) -> None:
        kind = ResumeJob if resume else PauseJob
        cmd = kind(
            tenant=d.tenant,
            job_id=d.job_id,
            request_id=uuid.uuid4().hex,
            issued_at=datetime.now(UTC),
        )
        with KadenceClient(self.settings) as client:
            client.send(cmd)
        self.events.append(
            {"kind": "resumed" if resume else "paused", "key": d.key, "at_ms": now_ms()}
        )
        self.say(f"{'resumed' if resume else 'paused'} {d.key}")

    def delete(self, d: ScheduleDefinition) -> None:
        with KadenceClient(self.settings) as client:
            client.delete(d.tenant, d.job_id)
        self.events.append({"kind": "deleted", "key": d.key, "at_ms": now_ms()})
        self.say(f"deleted {d.key}")

    # -- waiting -----------------------------------------------------------------------------

    def sleep_until(self, t_ms: int) -> None:
        time.sleep(max(0.0, (t_ms - now_ms()) / 1000))

    def quiesce(self, end_ms: int, timeout_s: float = 180, patience_s: float = 45) -> list[Event]:
        """Past the end, wait until every occurrence that must run has succeeded or is dead,
        or nothing has changed for `patience_s` (longer than a breaker cool-down and a lease
        expiry): then the history is final and whatever is missing is a finding."""
        self.sleep_until(end_ms + 3_000)
        deadline = time.monotonic() + timeout_s
        last, changed = -1, time.monotonic()
        while True:
            events = self.collect()
            report = check(events)
            done = report.succeeded + report.dead_lettered
            if not report.lost:
                return events
            if done != last:
                last, changed = done, time.monotonic()
            elif time.monotonic() - changed >= patience_s or time.monotonic() > deadline:
                self.say(f"{len(report.lost)} occurrences still missing; checking now")
                return events
            time.sleep(3)

    def crashes(self) -> list[Event]:
        """A `crashed` event for each process that exited by itself: any exit code but a clean
        stop's (0, SIGTERM) and a scenario's kill -9."""
        out: list[Event] = []
        for proc in [*self.schedulers, self.reaper, *self.worker_procs]:
            code = proc.proc.poll() if proc.proc is not None else None
            if code is not None and code not in INTENDED_EXITS:
                name = proc.log.name if proc.log is not None else proc.module
                out.append({"kind": "crashed", "process": name, "code": code})
        return out

    # -- the history -------------------------------------------------------------------------

    def batches_written(self) -> int:
        """ExecutionBatch records on the executions topic (a run with `batches`)."""
        topic = Topics(self.settings).executions
        found = 0
        for m in read_topic(self.settings.bootstrap_servers, topic, 10**7, 5):
            try:
                found += isinstance(EXECUTIONS.decode(CODEC, m.value()), ExecutionBatch)
            except DecodeError:
                continue
        return found

    def _records(self, topic: str, timeout_s: float) -> list[Any]:
        """Every decodable record (the poison scenario writes garbage on purpose)."""
        out = []
        for m in read_topic(self.settings.bootstrap_servers, topic, 10**7, timeout_s):
            try:
                out += records_in(CODEC, CODEC.decode(m.value()))
            except DecodeError:
                continue
        return out

    def collect(self) -> list[Event]:
        topics = Topics(self.settings)
        events = list(self.events)
        for r in self._records(topics.executions, 5):
            if isinstance(r, ExecutionRequested):
                events.append(
                    {
                        "kind": "dispatched",
                        "execution_id": r.execution_id,
                        "key": r.key,
                        "trigger": r.trigger.value,
                        "nominal_ms": datetime_to_ms(r.nominal_at),
                        "due_ms": datetime_to_ms(r.due_at),
                        "at_ms": datetime_to_ms(r.dispatched_at),
                    }
                )
            elif isinstance(r, ExecutionRevoked):
                events.append(
                    {"kind": "revoked", "execution_id": r.execution_id, "key": r.key, "at_ms": 0}
                )
        for r in self._records(topics.outcomes, 3):
            if isinstance(r, ExecutionOutcome):
                events.append(
                    {
                        "kind": "outcome",
                        "execution_id": r.execution_id,
                        "key": r.key,
                        "attempt": r.attempt,
                        "delivery": r.delivery,
                        "status": r.status.value,
                        "started_ms": datetime_to_ms(r.started_at),
                        "finished_ms": datetime_to_ms(r.finished_at),
                    }
                )
        for r in self._records(topics.history, 3):
            if isinstance(r, HistoryRecord) and r.execution_id and r.decision in EXPLAINED:
                events.append(
                    {
                        "kind": "explained",
                        "execution_id": r.execution_id,
                        "key": r.key,
                        "decision": r.decision.value,
                    }
                )
        for r in self._records(topics.dead_letter, 2):
            if isinstance(r, DeadLetter):
                ex = r.execution
                events.append(
                    {
                        "kind": "dead_letter",
                        "execution_id": ex.execution_id,
                        "key": ex.key,
                        "reason": r.reason.value,
                    }
                )
        events += self._kafka_hits()
        for hit in self.server.seen():
            h = hit.headers
            due = datetime.fromisoformat(h["kadence-due-at"].replace("Z", "+00:00"))
            events.append(
                {
                    "kind": "hit",
                    "execution_id": h["idempotency-key"],
                    "key": f"{h['kadence-tenant']}/{h['kadence-job']}",
                    "attempt": int(h["kadence-attempt"]),
                    "delivery": int(h["kadence-delivery"]),
                    "due_ms": datetime_to_ms(due),
                    "at_ms": int(hit.at * 1000),
                }
            )
        created = {
            f"{e['job']['tenant']}/{e['job']['job_id']}" for e in events if e["kind"] == "created"
        }
        cursors = job_cursors(self.settings, created, self.state_read_s)
        events += [{"kind": "cursor", "key": k, "cursor_ms": c} for k, c in cursors.items()]
        return events

    def _kafka_hits(self) -> list[Event]:
        """What a read_committed consumer of each tenant's `chaos` topic read."""
        out: list[Event] = []
        for tenant in TENANTS:
            topic = target_topic(self.settings.namespace, tenant, KAFKA_TOPIC)
            for m in read_topic(self.settings.bootstrap_servers, topic, 10**7, 3):
                r = CODEC.decode(m.value())
                if isinstance(r, ExecutionRequested):
                    out.append(
                        {
                            "kind": "hit",
                            "via": "kafka",
                            "execution_id": r.execution_id,
                            "key": r.key,
                            "attempt": r.attempt,
                            "delivery": r.delivery,
                            "due_ms": datetime_to_ms(r.due_at),
                            "at_ms": m.timestamp()[1],
                        }
                    )
        return out

    def finish(self, end_ms: int) -> Report:
        events = self.quiesce(end_ms) + self.crashes()
        path = RESULTS / f"{self.name}-{self.seed}.jsonl"
        history_io.write(path, events)
        report = check(events)
        self.say(f"history: {path} ({len(events)} events)")
        return report


Scenario = Callable[[Run], Report]
