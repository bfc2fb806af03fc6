"""Shared pieces of the whole-stack driver tests: settings, job definitions, history queries."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from kadence.clock import ms_to_datetime
from kadence.models import (
    Decision,
    ExecutionOutcome,
    HandlerTarget,
    HistoryRecord,
    OutcomeStatus,
    ScheduleDefinition,
)
from kadence.settings import KadenceSettings
from testkit.driver import START_MS
from testkit.driver.stack import DriverStack
from testkit.stack import stale_outcomes

TTL_MS = 3_000
"""Every job's lease: renewed each second, expired three seconds after its worker went quiet."""
T0 = ms_to_datetime(START_MS)


def settings_for(state_dir: Any, **kw: Any) -> KadenceSettings:
    base: dict[str, Any] = {
        "namespace": "drv",
        "partitions": 2,
        "execution_partitions": 2,
        "state_dir": state_dir,
        "redelivery_cap": 3,
    }
    return KadenceSettings.model_validate({**base, **kw})


def once(job_id: str, in_s: float = 5, *, handler: str = "ok", **kw: Any) -> ScheduleDefinition:
    """A one-off job on the in-process target's behaviour `handler`."""
    return ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": job_id,
            "version": 1,
            "schedule": {"kind": "once", "run_at": T0 + timedelta(seconds=in_s)},
            "target": HandlerTarget(name=handler),
            "lease_ttl_ms": TTL_MS,
            **kw,
        }
    )


def per_second(
    job_id: str, start_s: int, seconds: int, *, tenant: str = "acme", handler: str = "ok"
) -> ScheduleDefinition:
    start = T0 + timedelta(seconds=start_s)
    return ScheduleDefinition.model_validate(
        {
            "tenant": tenant,
            "job_id": job_id,
            "version": 1,
            "schedule": {
                "kind": "cron",
                "expression": "* * * * * *",
                "start_at": start,
                "end_at": start + timedelta(seconds=seconds - 1),
            },
            "target": HandlerTarget(name=handler),
            "lease_ttl_ms": TTL_MS,
            "overlap": "allow",
        }
    )


def applied(stack: DriverStack, job_id: str, decision: Decision) -> list[HistoryRecord]:
    """History records the scheduler applied (a stale outcome is recorded but not applied)."""
    return [
        h
        for h in stack.history(job_id)
        if h.decision is decision and h.details.get("stale") != "true"
    ]


def applied_successes(stack: DriverStack, job_id: str) -> list[ExecutionOutcome]:
    """The job's succeeded outcomes the scheduler applied: a success applied writes no history
    record (the outcome is the record of it), one not applied is recorded `stale`."""
    stale = stale_outcomes(stack.history(job_id))
    return [
        o
        for o in stack.outcomes(job_id)
        if o.status is OutcomeStatus.succeeded
        and (o.execution_id, o.attempt, o.delivery) not in stale
    ]


def dispatched_once(stack: DriverStack) -> Counter[str]:
    """How often each execution id went out as a first attempt of its occurrence."""
    return Counter(e.execution_id for e in stack.executions() if e.attempt == 1 and e.delivery == 1)
