"""The scheduler as a runtime processor: decode inputs, call the pure logic, write the results.

Inputs (co-partitioned, keyed by job): definitions, commands, outcomes. Timers: each job's wake
time in the task's due index. Outputs: executions (tenant-keyed), history, dead letters, and
`rejected` for anything unusable — bad bytes never stop the processor.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from kadence.acceptance import refusal
from kadence.clock import ms_to_datetime
from kadence.codec import MAGIC, Codec
from kadence.errors import DecodeError
from kadence.headers import Headers, headers_for
from kadence.models import (
    Backfill,
    CancelRun,
    Decision,
    ExecutionOutcome,
    HistoryRecord,
    OutcomeStatus,
    PauseJob,
    ReplayDeadLetter,
    ResumeJob,
    ScheduleDefinition,
    TriggerNow,
    WireModel,
)
from kadence.models.base import IDENT_RE
from kadence.partitioning import execution_route, partition_for
from kadence.topics import COMMANDS, OUTCOMES, SCHEDULES, Topics
from streams.runtime.records import InputRecord
from streams.runtime.reject import reject, why_refused
from streams.runtime.task import Task
from streams.scheduler import logic
from streams.scheduler.breaker import ALL_THROUGH, DEFAULTS, Breaker, BreakerConfig
from streams.scheduler.logic import Context, Refused, Result, Sink
from streams.scheduler.metrics import SchedulerMetrics
from streams.scheduler.state import JobState, fit_state, load_state

log = logging.getLogger(__name__)
GROUP_PREFIX = b"~group/"
BREAKER_PREFIX = b"~breaker/"
DEAD_DEPTH = b"~dead-depth"
"""Dead letters of the partition's jobs not replayed (each job remembers its last 100)."""
TZDB_MARKER = b"~tzdb"
"""The tz database version every job of the partition was last computed with."""
MAINTAIN_STEP = 2_000
HISTORY_REASON_CHARS = 2048


@dataclass(frozen=True)
class SchedulerConfig:
    topics: Topics
    job_partitions: int
    execution_partitions: int
    tzdb: str
    misfire_grace_ms: int = 30_000
    dispatch_ahead_ms: int = 0
    breaker: BreakerConfig = DEFAULTS
    tenant_shards: Mapping[str, int] = field(default_factory=dict)
    name: str = "scheduler"


class SchedulerProcessor:
    def __init__(
        self, cfg: SchedulerConfig, codec: Codec, metrics: SchedulerMetrics | None = None
    ) -> None:
        self.cfg = cfg
        self.codec = codec
        self.metrics = metrics or SchedulerMetrics()
        self._sink_topics = {
            Sink.executions: cfg.topics.executions,
            Sink.history: cfg.topics.history,
            Sink.dead_letter: cfg.topics.dead_letter,
        }

    # -- inputs ------------------------------------------------------------------------------

    def process(self, task: Task, record: InputRecord, now_ms: int) -> None:
        if record.key is None:
            reason = "records on Kadence input topics need a key"
            self._reject(task, record, "missing_key", reason, now_ms)
            return
        topics = self.cfg.topics
        try:
            if record.topic == topics.schedules:
                self._definition(task, record, now_ms)
            elif record.topic == topics.commands:
                self._command(task, record, now_ms)
            elif record.topic == topics.outcomes:
                self._outcome(task, record, now_ms)
        except DecodeError as exc:
            self._reject(task, record, exc.code, str(exc), now_ms)
        except Refused as exc:
            self._reject(task, record, exc.code, exc.reason, now_ms)
        # anything else propagates: the runtime undoes this record's writes and calls `refuse`

    def refuse(self, task: Task, record: InputRecord, exc: Exception, now_ms: int) -> None:
        """Processing `record` raised and was undone: a `rejected` record (and a history record
        when the key names a job) say why; the next input is processed as usual."""
        code, reason = why_refused(record, exc)
        self.metrics.failures.labels("refused").inc()
        self._job_history(task, record.key, Decision.refused, reason, now_ms)
        self._reject(task, record, code, reason, now_ms)

    def quarantine(self, task: Task, key: bytes, exc: Exception, now_ms: int) -> None:
        """Firing `key` raised and was undone: the job keeps its state but leaves the due index,
        so it stops firing (and failing) until its definition is written again or a command
        (pause and resume) touches it. A history record holds the error; a metric counts it."""
        log.error("firing %r failed; quarantined", key, exc_info=exc)
        raw = task.get(key)
        if raw is not None:
            task.put(key, raw, None)
        task.cache.pop(key, None)
        self.metrics.failures.labels("quarantined").inc()
        reason = (
            f"{type(exc).__name__}: {exc}; the job no longer fires: write its definition again, "
            "or pause and resume it, to try again"
        )
        self._job_history(task, key, Decision.quarantined, reason, now_ms)

    def _job_history(
        self, task: Task, key: bytes | None, decision: Decision, reason: str, now_ms: int
    ) -> None:
        tenant, _, job_id = (key or b"").decode(errors="replace").partition("/")
        if not (IDENT_RE.fullmatch(tenant) and IDENT_RE.fullmatch(job_id)):
            return  # not a job's key: the rejected record is all there is
        record = HistoryRecord(
            tenant=tenant,
            job_id=job_id,
            decision=decision,
            at=ms_to_datetime(now_ms),
            reason=reason[:HISTORY_REASON_CHARS],
        )
        task.emit(*self._encoded(task, Sink.history, record))

    def _definition(self, task: Task, record: InputRecord, now_ms: int) -> None:
        assert record.key is not None
        state = self._load(task, record.key)
        if record.value is None:
            if state is not None:
                self._write(
                    task, record.key, logic.apply_delete(state, self._ctx(task, state, now_ms))
                )
            return
        definition = SCHEDULES.decode(self.codec, record.value)
        assert isinstance(definition, ScheduleDefinition)
        current = state.definition(self.codec).version if state is not None else None
        refused = refusal(
            record.key, record.partition, self.cfg.job_partitions, definition, current
        )
        if refused is not None:
            if refused.code == "invalid_schedule":
                task.emit(
                    *self._encoded(
                        task,
                        Sink.history,
                        HistoryRecord(
                            tenant=definition.tenant,
                            job_id=definition.job_id,
                            decision=Decision.definition_rejected,
                            at=ms_to_datetime(now_ms),
                            reason=refused.reason[:HISTORY_REASON_CHARS],
                        ),
                    )
                )
            raise Refused(refused.code, refused.reason)
        raw = record.value if record.value.startswith(MAGIC) else self.codec.encode(definition)
        ctx = self._ctx(task, state, now_ms)
        self._write(
            task,
            record.key,
            logic.apply_definition(state, definition, raw, record.timestamp_ms, ctx),
        )

    def _command(self, task: Task, record: InputRecord, now_ms: int) -> None:
        assert record.key is not None
        command = COMMANDS.decode(self.codec, record.value)
        assert isinstance(
            command, TriggerNow | Backfill | CancelRun | PauseJob | ResumeJob | ReplayDeadLetter
        )
        if command.key.encode() != record.key:
            raise Refused("key_mismatch", f"record key {record.key!r} is not {command.key}")
        state = self._load(task, record.key)
        if state is None:
            raise Refused("unknown_job", f"no job {command.key} on this partition")
        try:
            result = logic.apply_command(state, command, self._ctx(task, state, now_ms))
        except Refused as exc:
            why = f"{type(command).__name__} {command.request_id} refused: {exc.reason}"
            self._job_history(task, record.key, Decision.refused, why, now_ms)
            raise
        self._write(task, record.key, result)

    def _outcome(self, task: Task, record: InputRecord, now_ms: int) -> None:
        assert record.key is not None
        outcome = OUTCOMES.decode(self.codec, record.value)
        assert isinstance(outcome, ExecutionOutcome)
        state = self._load(task, record.key)
        if state is None:
            log.info("outcome for %s of a job no longer here; ignored", outcome.execution_id)
            return
        self._write(
            task, record.key, logic.apply_outcome(state, outcome, self._ctx(task, state, now_ms))
        )
        self._count_outcome(task, outcome, now_ms)

    # -- timers ------------------------------------------------------------------------------

    def fire(self, task: Task, key: bytes, now_ms: int) -> None:
        state = self._load(task, key)
        if state is None or state.wake_ms is None or state.wake_ms > now_ms:
            return
        result = logic.on_due(state, self._ctx(task, state, now_ms))
        self._write(task, key, result)
        if result.probe is not None:
            tenant = state.definition(self.codec).tenant
            breaker = self._breaker(task, tenant)
            breaker.probe = result.probe
            self._save_breaker(task, tenant, breaker)

    def maintain(self, task: Task, now_ms: int) -> bool:
        """After assignment: if the tz database changed, recompute every job (in steps)."""
        current = self.cfg.tzdb.encode()
        if task.get(TZDB_MARKER) == current:
            return True
        after = task.cache.get(TZDB_MARKER, b"")
        keys = task.store.keys_after(after, MAINTAIN_STEP)
        for key in keys:
            if key.startswith(b"~"):
                continue
            task.attempt(
                lambda key=key: self._maintain_one(task, key, now_ms),  # type: ignore[misc]
                lambda exc, key=key: self.quarantine(task, key, exc, now_ms),  # type: ignore[misc]
            )
        if len(keys) < MAINTAIN_STEP:
            task.put(TZDB_MARKER, current, None)
            task.cache.pop(TZDB_MARKER, None)
            return True
        task.cache[TZDB_MARKER] = keys[-1]
        return False

    def _maintain_one(self, task: Task, key: bytes, now_ms: int) -> None:
        state = self._load(task, key)
        if state is not None and state.tzdb != self.cfg.tzdb:
            self._write(task, key, logic.apply_tzdb(state, self._ctx(task, state, now_ms)))

    def prefetch(self, task: Task, key: bytes) -> None:
        """Decode a job entering the timer window now, so its due time pays only for firing."""
        if key.startswith(GROUP_PREFIX) or key in task.cache:
            return
        state = self._load(task, key)
        if state is not None:
            state.compiled(self.codec)
            task.cache[key] = state

    # -- state -------------------------------------------------------------------------------

    def _ctx(self, task: Task, state: JobState | None, now_ms: int) -> Context:
        busy = False
        if state is not None:
            d = state.definition(self.codec)
            if d.concurrency_key:
                busy = self._group_busy(task, d, now_ms)
        gate = ALL_THROUGH
        if state is not None:
            tenant = state.definition(self.codec).tenant
            gate = self._breaker(task, tenant).gate(now_ms, self.cfg.breaker)
        return Context(
            now_ms,
            self.codec,
            self.cfg.tzdb,
            misfire_grace_ms=self.cfg.misfire_grace_ms,
            group_busy=busy,
            gate=gate,
            ahead_ms=self.cfg.dispatch_ahead_ms,
        )

    # -- the tenant circuit breaker ----------------------------------------------------------

    def _breaker(self, task: Task, tenant: str) -> Breaker:
        return Breaker.load(task.get(BREAKER_PREFIX + tenant.encode()))

    def _save_breaker(self, task: Task, tenant: str, breaker: Breaker) -> None:
        task.put(BREAKER_PREFIX + tenant.encode(), breaker.dump(), None)

    def _count_outcome(self, task: Task, outcome: ExecutionOutcome, now_ms: int) -> None:
        if outcome.status in (OutcomeStatus.lease_lost, OutcomeStatus.cancelled):
            return
        breaker = self._breaker(task, outcome.tenant)
        failed = outcome.status is not OutcomeStatus.succeeded
        change = breaker.record(outcome.execution_id, failed, now_ms, self.cfg.breaker)
        if change:
            log.warning(
                "tenant %s: retry circuit %s (partition %d)", outcome.tenant, change, task.partition
            )
        self._save_breaker(task, outcome.tenant, breaker)

    def _load(self, task: Task, key: bytes) -> JobState | None:
        cached = task.cache.get(key)
        if cached is not None:
            assert isinstance(cached, JobState)
            return cached
        raw = task.get(key)
        return load_state(raw) if raw is not None else None

    def _write(self, task: Task, key: bytes, result: Result) -> None:
        state = result.state
        if state is None:
            task.put(key, None, None)
            task.cache.pop(key, None)
        else:
            state, data = fit_state(state, task.record_limit - len(key) - 8)
            result.state = state
            wake = state.wake_ms
            task.put(key, data, wake)
            if wake is not None and wake <= task.loaded_until_ms:
                task.cache[key] = state
            else:
                task.cache.pop(key, None)
            d = state.definition(self.codec)
            if d.concurrency_key:
                self._update_group(task, d, state, result)
        for emit in result.out:
            task.emit(*self._encoded(task, emit.sink, emit.record))
            self.metrics.observe(emit.record)
        if result.dead_delta:
            depth = max(0, self.dead_letter_depth(task) + result.dead_delta)
            task.put(DEAD_DEPTH, str(depth).encode(), None)

    def dead_letter_depth(self, task: Task) -> int:
        raw = task.get(DEAD_DEPTH)
        return int(raw) if raw else 0

    def _encoded(
        self, task: Task, sink: Sink, record: WireModel
    ) -> tuple[str, int, bytes, bytes, Headers]:
        value = self.codec.encode(record)
        headers = headers_for(record, self.codec.schema_fingerprint(type(record)))
        if sink is Sink.executions:
            tenant = getattr(record, "tenant", "")
            route = execution_route(tenant, getattr(record, "job_id", ""), self.cfg.tenant_shards)
            partition = partition_for(route, self.cfg.execution_partitions)
            return self._sink_topics[sink], partition, tenant.encode(), value, headers
        key = getattr(record, "key", "")
        return self._sink_topics[sink], task.partition, str(key).encode(), value, headers

    # -- concurrency groups ------------------------------------------------------------------

    def _group_key(self, d: ScheduleDefinition) -> bytes:
        return GROUP_PREFIX + d.routing_key.encode()

    def _group(self, task: Task, d: ScheduleDefinition) -> dict[str, list[list[object]]]:
        raw = task.get(self._group_key(d))
        return json.loads(raw) if raw else {}

    def _group_busy(self, task: Task, d: ScheduleDefinition, now_ms: int) -> bool:
        group = self._group(task, d)
        return any(
            int(str(exp)) > now_ms for job, runs in group.items() if job != d.key for _, exp in runs
        )

    def _update_group(
        self, task: Task, d: ScheduleDefinition, state: JobState, result: Result
    ) -> None:
        group = self._group(task, d)
        runs = [[r.execution_id, r.expires_ms] for r in state.running]
        if runs:
            group[d.key] = runs
        else:
            group.pop(d.key, None)
        task.put(self._group_key(d), json.dumps(group).encode() if group else None, None)

    # -- bad input ---------------------------------------------------------------------------

    def _reject(self, task: Task, record: InputRecord, code: str, reason: str, now_ms: int) -> None:
        reject(
            task,
            self.codec,
            to_topic=self.cfg.topics.rejected,
            processor=self.cfg.name,
            record=record,
            code=code,
            reason=reason,
            now_ms=now_ms,
        )
