"""Scheduler processes for live tests and the chaos suite (real subprocesses, real broker, real
signals), and readers of what schedulers wrote."""

from __future__ import annotations

import signal
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path

from confluent_kafka import Message

from apps.processes import ChildProcess
from kadence.batches import records_in
from kadence.codec import Codec
from kadence.headers import COUNT, header_value
from kadence.models import ExecutionRequested, ExecutionRevoked, HistoryRecord, Rejected
from kadence.settings import KadenceSettings
from kadence.topics import EXECUTIONS, Topics
from streams.runtime.store import payload_of
from streams.scheduler.state import load_state
from testkit.topic_reader import read_to_end, read_topic

CODEC = Codec()


class SchedulerProcess(ChildProcess):
    """A scheduler subprocess with its own instance id and state folder (and the default 6 s
    session timeout, set here so a change of the default does not slow the failover tests)."""

    def __init__(
        self, settings: KadenceSettings, instance: str, state_dir: Path, **env: str | int
    ) -> None:
        mine = settings.model_copy(update={"instance_id": instance, "state_dir": state_dir})
        super().__init__(
            "apps.scheduler",
            mine,
            log=state_dir / f"scheduler-{instance}.log",
            session_timeout_ms=6000,
            **env,
        )

    def start(self, wait_assigned: bool = True) -> SchedulerProcess:
        super().start()
        if wait_assigned:
            self.ready_when("restored", timeout=60)
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        self.signal(sig)


def executions_and_revocations(
    settings: KadenceSettings, expect: int, timeout_s: float = 30
) -> tuple[list[ExecutionRequested], list[ExecutionRevoked]]:
    """Both record kinds on `executions`, in topic order, a batch's executions each (`expect`
    counts executions and revocations, not records)."""
    msgs = read_topic(
        settings.bootstrap_servers, Topics(settings).executions, expect, timeout_s, weight=_carried
    )
    records = [r for m in msgs for r in records_in(CODEC, EXECUTIONS.decode(CODEC, m.value()))]
    requested = [r for r in records if isinstance(r, ExecutionRequested)]
    return requested, [r for r in records if isinstance(r, ExecutionRevoked)]


def _carried(msg: Message) -> int:
    """The executions a record on `executions` carries: a batch's count, else one."""
    count = header_value(msg.headers(), COUNT)
    return int(count) if count is not None and count.isdigit() else 1


def executions(
    settings: KadenceSettings, expect: int, timeout_s: float = 30
) -> list[ExecutionRequested]:
    return executions_and_revocations(settings, expect, timeout_s)[0]


def not_too_early(settings: KadenceSettings, got: Iterable[ExecutionRequested]) -> bool:
    """Dispatched no earlier than the look-ahead allows (workers then wait for due_at)."""
    ahead = timedelta(milliseconds=settings.dispatch_ahead_ms)
    return all(e.dispatched_at >= e.due_at - ahead for e in got)


def history(settings: KadenceSettings, expect: int, timeout_s: float = 10) -> list[HistoryRecord]:
    msgs = read_topic(settings.bootstrap_servers, Topics(settings).history, expect, timeout_s)
    return [CODEC.decode_as(m.value(), HistoryRecord) for m in msgs]


def rejected(settings: KadenceSettings, expect: int, timeout_s: float = 10) -> list[Rejected]:
    msgs = read_topic(settings.bootstrap_servers, Topics(settings).rejected, expect, timeout_s)
    return [CODEC.decode_as(m.value(), Rejected) for m in msgs]


def counts(items: Iterable[ExecutionRequested]) -> dict[str, int]:
    out: dict[str, int] = {}
    for ex in items:
        out[ex.execution_id] = out.get(ex.execution_id, 0) + 1
    return out


def job_cursors(
    settings: KadenceSettings, keys: set[str], timeout_s: float
) -> dict[str, int | None]:
    """The last committed cursor of each job in `keys` (None: deleted), from the scheduler
    changelog read to its end and streamed: at scale (bench.failover --idle-jobs) it holds
    millions of other jobs, and only these are decoded."""
    wanted = {k.encode() for k in keys}
    cursors: dict[str, int | None] = {}
    changelog = Topics(settings).scheduler_changelog
    for m in read_to_end(settings.bootstrap_servers, changelog, timeout_s):
        key = m.key() or b""
        if key in wanted:
            value = m.value()
            cursors[key.decode()] = load_state(payload_of(value)).cursor_ms if value else None
    return cursors
