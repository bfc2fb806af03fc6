"""A run reached after its `start_by` (the job's `max_event_age_ms` past its scheduled time,
streams/scheduler/requested.py) is not started: its target is never called, and its outcome is
a failure that is not retried, so the scheduler dead-letters it with the reason (as EventBridge
sends an event past MaximumEventAgeInSeconds to the dead-letter queue). Checked where a run is
handed to its target: a claimed run as it starts (streams/worker/invoker.py), a run delivered
in the worker's transaction as it is delivered (streams/worker/delivering.py)."""

from __future__ import annotations

from kadence.clock import datetime_to_ms
from kadence.headers import iso_utc
from kadence.models import MAX_EVENT_AGE_ERROR, ExecutionRequested
from kadence.targets import Result


def too_old(ex: ExecutionRequested, now_ms: int) -> Result | None:
    """The outcome of `ex` reached at `now_ms` past its `start_by`; None: it may start."""
    if ex.start_by is None:
        return None
    late_ms = now_ms - datetime_to_ms(ex.start_by)
    if late_ms <= 0:
        return None
    why = (
        f"not started: {late_ms / 1000:.3f} s past its start_by {iso_utc(ex.start_by)} (the "
        "job's max_event_age_ms after its scheduled time); its target was not called"
    )
    return Result.failed(MAX_EVENT_AGE_ERROR, why, retryable=False)
