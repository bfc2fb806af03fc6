"""The ExecutionRequested a shot becomes: the job's knobs the worker needs travel on it, among
them `start_by`, the instant after which the run is not started (the job's `max_event_age_ms`).

The age counts from the run's scheduled time, as EventBridge's MaximumEventAgeInSeconds counts
from the schedule's: a scheduled occurrence's nominal instant plus the job's spread, for its
first attempt and every retry (so retries stop once it has passed). A manual trigger counts
from the trigger (its nominal instant), and so do its retries. A backfill or a replay counts
from its dispatch: its occurrences are old by design. Their retries cannot be told from a
scheduled occurrence's (the same execution id), so they count from the occurrence's scheduled
time: a backfilled run older than the age is not retried.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from kadence.clock import ms_to_datetime
from kadence.execution_bytes import Template
from kadence.fast_models import new_execution, run_maker
from kadence.models import ExecutionRequested, KafkaTarget, TriggerKind
from streams.scheduler.state import JobState
from streams.scheduler.step import Emit, Facts, Shot, Sink

ASKED_FOR = (TriggerKind.backfill, TriggerKind.replay)
"""Runs whose age counts from their dispatch (not their occurrence's scheduled time)."""


def execution(state: JobState, facts: Facts, shot: Shot) -> ExecutionRequested:
    d = state.definition(facts.codec)
    return new_execution(
        {
            "execution_id": shot.execution_id,
            "tenant": d.tenant,
            "job_id": d.job_id,
            "definition_version": d.version,
            "attempt": shot.attempt,
            "delivery": 1,
            "trigger": shot.trigger,
            "nominal_at": ms_to_datetime(shot.nominal_ms),
            "due_at": ms_to_datetime(shot.due_ms),
            "dispatched_at": ms_to_datetime(facts.now_ms),
            "target": d.target,
            "payload": d.payload if shot.payload is None else shot.payload,
            "content_type": d.content_type,
            "timeout_ms": d.timeout_ms,
            "lease_ttl_ms": d.lease_ttl_ms,
            "concurrency_key": d.concurrency_key,
            "start_by": start_by(state, facts, shot),
        }
    )


def start_by(state: JobState, facts: Facts, shot: Shot) -> datetime | None:
    """When `shot`'s run may start at the latest (see the module's docstring); None: no limit."""
    age = state.definition(facts.codec).max_event_age_ms
    if age is None:
        return None
    if shot.trigger in ASKED_FOR:
        since = facts.now_ms
    elif shot.trigger is TriggerKind.manual or "@manual:" in shot.execution_id:
        since = shot.nominal_ms
    else:
        since = shot.nominal_ms + state.compiled(facts.codec).spread_ms
    return ms_to_datetime(since + age)


class SeriesRuns:
    """The ExecutionRequested of a job's scheduled first attempts fired in one pass
    (series.py): what `execution` makes of each, with the job's fields made and checked once
    (`run_maker`) and each run's execution id, instants and `start_by` written per run."""

    def __init__(self, state: JobState, facts: Facts) -> None:
        self.state, self.facts = state, facts
        d = state.definition(facts.codec)
        self.tenant = d.tenant
        self.kafka = isinstance(d.target, KafkaTarget)
        """The runs go to a Kafka topic: each is written in its due instant's group."""
        self.where: tuple[str, int, bytes] | None = None
        """(topic, partition, key) of the runs, once the first was written (Output.series)."""
        self.template: Template | None = None
        """The runs' bytes but their own fields, cut from the first one's (Output.series)."""
        self._age = d.max_event_age_ms
        self._spread = 0 if self._age is None else state.compiled(facts.codec).spread_ms
        self._make: Callable[..., ExecutionRequested] | None = run_maker(
            {
                "execution_id": "x",  # each run's own (as are its instants and start_by)
                "tenant": d.tenant,
                "job_id": d.job_id,
                "definition_version": d.version,
                "attempt": 1,
                "delivery": 1,
                "trigger": TriggerKind.schedule,
                "nominal_at": None,
                "due_at": None,
                "dispatched_at": ms_to_datetime(facts.now_ms),
                "target": d.target,
                "payload": d.payload,
                "content_type": d.content_type,
                "timeout_ms": d.timeout_ms,
                "lease_ttl_ms": d.lease_ttl_ms,
                "concurrency_key": d.concurrency_key,
                "start_by": None,
            }
        )

    def run(self, shot: Shot) -> ExecutionRequested:
        """`execution(state, facts, shot)` of a scheduled first attempt with the job's payload."""
        make = self._make
        if make is None or shot.payload is not None or "@manual:" in shot.execution_id:
            return execution(self.state, self.facts, shot)
        age = self._age
        start = None if age is None else ms_to_datetime(shot.nominal_ms + self._spread + age)
        return make(
            shot.execution_id, ms_to_datetime(shot.nominal_ms), ms_to_datetime(shot.due_ms), start
        )

    def value(self, shot: Shot) -> bytes | None:
        """The bytes of `run(shot)` from the series' template, without the record (None: no
        template, or a run `run` makes otherwise or refuses; the record's own encoding then
        answers). The same bytes (tests/scheduler/test_series_out.py)."""
        template = self.template
        eid = shot.execution_id
        if (
            template is None
            or self._make is None
            or not 0 < len(eid) <= MAX_ID  # `run_maker`'s check: refused by the record's path
            or shot.payload is not None
            or "@manual:" in eid
            or not 0 <= shot.nominal_ms <= shot.due_ms <= LAST_MS
        ):
            return None
        age = self._age
        start = None if age is None else shot.nominal_ms + self._spread + age
        if start is not None and not 0 <= start <= LAST_MS:
            return None
        try:
            return template.run(eid, shot.nominal_ms, shot.due_ms, start)
        except UnicodeError:  # the record's encoding says why
            return None


MAX_ID = 400
"""The longest execution id `run_maker` makes a run of (`new_execution` refuses longer)."""
LAST_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the last instant a datetime holds (`ms_to_datetime`)."""


class SeriesRun(Emit):
    """One run of a series (series.py) in a step's output: an `Emit` whose record is made when
    something asks for it (`record`). The processor writes a run that goes in a group (a Kafka
    topic's, executions in batches) from the series' template (`SeriesRuns.value`) without
    making the record; everything else sees the `Emit` of its record."""

    __slots__ = ("_made", "runs", "shot")
    runs: SeriesRuns
    shot: Shot
    _made: ExecutionRequested | None

    def __init__(self, runs: SeriesRuns, shot: Shot) -> None:
        _set(self, "sink", Sink.executions)
        _set(self, "pool", None)
        _set(self, "runs", runs)
        _set(self, "shot", shot)
        _set(self, "_made", None)

    @property
    def record(self) -> ExecutionRequested:
        made: ExecutionRequested | None = self._made
        if made is None:
            made = self.runs.run(self.shot)
            _set(self, "_made", made)
        return made

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Emit):
            return (self.sink, self.record, self.pool) == (other.sink, other.record, other.pool)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SeriesRun({self.shot.execution_id!r})"


_set = object.__setattr__
