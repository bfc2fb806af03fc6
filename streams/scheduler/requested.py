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

from datetime import datetime

from kadence.clock import ms_to_datetime
from kadence.fast_models import new_execution
from kadence.models import ExecutionRequested, TriggerKind
from streams.scheduler.state import JobState
from streams.scheduler.step import Facts, Shot

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
