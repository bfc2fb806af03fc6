"""Outcomes left unwritten survive kill -9 on the real broker: the next scheduler reads
`outcomes` again from the stored replay point (an assignment with offsets, in librdkafka's
rebalance callback) and every success applied before the kill is applied again
(streams/scheduler/write_behind.py)."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kadence.client import KadenceClient
from kadence.codec import Codec
from kadence.headers import headers_for
from kadence.models import ExecutionOutcome, ExecutionRequested
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.runtime.deferred import REPLAY_PREFIX
from streams.runtime.store import payload_of
from streams.scheduler.state import load_state
from testkit.outcomes import outcome_of
from testkit.scheduler_process import SchedulerProcess, executions
from testkit.topic_reader import read_to_end
from tests.integration.test_scheduler_live import per_second

CODEC = Codec()
JOBS, SECONDS = 3, 20
WRITE_BEHIND_MS = 15_000


class Answers:
    """Reports each run due by now succeeded, as a worker would (one outcome per run)."""

    def __init__(self, settings: KadenceSettings) -> None:
        self.settings = settings
        self.producer = Producer({"bootstrap.servers": settings.bootstrap_servers})
        self.done: set[str] = set()

    def answer(self) -> None:
        now = datetime.now(UTC)
        got = executions(self.settings, expect=JOBS * SECONDS, timeout_s=0.5)
        for ex in got:
            if ex.execution_id in self.done or ex.due_at > now:
                continue
            self.done.add(ex.execution_id)
            self._send(ex)
        self.producer.flush(10)

    def _send(self, ex: ExecutionRequested) -> None:
        outcome = outcome_of(ex, worker_id="test")
        self.producer.produce(
            Topics(self.settings).outcomes,
            CODEC.encode(outcome),
            ex.key.encode(),
            partition=partition_for(ex.routing_key, self.settings.partitions),
            headers=headers_for(outcome, CODEC.schema_fingerprint(ExecutionOutcome)),
        )

    def until(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            self.answer()
            time.sleep(0.3)


def replay_points(settings: KadenceSettings) -> dict[bytes, bytes | None]:
    """Each partition's stored replay point, as the changelog's last committed record says."""
    last: dict[bytes, bytes | None] = {}
    changelog = Topics(settings).scheduler_changelog
    for m in read_to_end(settings.bootstrap_servers, changelog, 30):
        key = m.key() or b""
        if key.startswith(REPLAY_PREFIX):
            last[key] = m.value()
    return last


def running_runs(settings: KadenceSettings) -> dict[str, tuple[str, ...]]:
    """Each job's runs in progress, as its last changelog record says."""
    last: dict[str, tuple[str, ...]] = {}
    changelog = Topics(settings).scheduler_changelog
    for m in read_to_end(settings.bootstrap_servers, changelog, 30):
        key, value = m.key() or b"~", m.value()
        if not key.startswith(b"~") and value:
            last[key.decode()] = tuple(
                r.execution_id for r in load_state(payload_of(value)).running
            )
    return last


@pytest.mark.slow
def test_a_kill_9_loses_no_success_left_unwritten(
    settings: KadenceSettings, tmp_path: Path
) -> None:
    env = {"write_behind_ms": WRITE_BEHIND_MS}
    sched = SchedulerProcess(settings, "a", tmp_path / "a", **env).start()
    answers = Answers(settings)
    try:
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
        jobs = [per_second(f"job-{i}", start, SECONDS, tenant=f"t{i}") for i in range(JOBS)]
        with KadenceClient(settings) as client:
            client.put_many(jobs)
        answers.until(time.monotonic() + 4 + 6)
        deadline = time.monotonic() + 30  # a loaded machine: until a success waits, committed
        while not any(replay_points(settings).values()) and time.monotonic() < deadline:
            answers.until(time.monotonic() + 1)
        assert any(replay_points(settings).values()), "no success was left unwritten"
        sched.kill(signal.SIGKILL)  # within write_behind_ms of a stored point: it is replayed
        sched = SchedulerProcess(settings, "a", tmp_path / "b", **env).start()  # from the log
        answers.until(time.monotonic() + SECONDS)
        assert len(answers.done) == JOBS * SECONDS
        time.sleep(WRITE_BEHIND_MS / 1000 + 3)  # each job written once it waited that long
        log = (tmp_path / "b" / "scheduler-a.log").read_text()
    finally:
        sched.stop()
    assert "replaying" in log, "no outcome was left unwritten at the kill: nothing was replayed"
    runs = running_runs(settings)
    assert set(runs) == {j.key for j in jobs}
    assert all(r == () for r in runs.values()), runs  # every success applied, none left running
