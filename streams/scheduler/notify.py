"""Notifications: when a run of a job is dead-lettered, the job pauses itself after failures,
or a failure of the job opens its tenant's circuit, send the job's `notify` webhook a
notification, in the same transaction as the decision; and when that call ends, say so in the
job's history, retry it, or give it up (docs/execution.md, "Notifications").

A notification is an ExecutionRequested of the job (trigger `notification`, an execution id
with `@notify:`, kadence/notifications.py) whose target is an HttpTarget built from `notify`:
the workers call it with everything HTTP targets have (the address policy, signing by
`secret_ref`, pools, the per-destination rate limit). The scheduler never waits for it. Its
outcome comes back here and nowhere else: it is never a run of the job (no retry policy, no
dead letter, no circuit count, no chain link, no notification about a notification)."""

from __future__ import annotations

from urllib.parse import urlsplit

from kadence.clock import ms_to_datetime
from kadence.fast_models import new_execution
from kadence.models import (
    NOTIFY_RATE,
    Decision,
    ErrorInfo,
    ExecutionOutcome,
    ExecutionRequested,
    HttpTarget,
    NotifyEvent,
    OutcomeStatus,
    ScheduleDefinition,
    TriggerKind,
)
from kadence.notifications import (
    MARKER,
    NOTIFY_ATTEMPTS,
    NOTIFY_BACKOFF_MS,
    NOTIFY_LEASE_MS,
    NOTIFY_TIMEOUT_MS,
    is_notification,
    notification_body,
    notification_id,
)
from streams.scheduler.state import JobState, room_for_override
from streams.scheduler.step import Effects, Emit, Facts, Sink

KEPT_BODIES = 8
"""Notification bodies a job keeps for their retries at most (the oldest is forgotten first:
its notification is then not retried, and history says so)."""


def notify(
    state: JobState,
    effects: Effects,
    facts: Facts,
    event: NotifyEvent,
    outcome: ExecutionOutcome,
    *,
    reason: str,
    error: ErrorInfo | None,
) -> JobState:
    """Send the job's notification of `event`, caused by `outcome` (a run of the job), when its
    `notify` asks for that event; the state keeps the body for the notification's retries."""
    d = state.definition(facts.codec)
    policy = d.notify
    if policy is None or event not in policy.on or is_notification(outcome.execution_id):
        return state
    ended_ms = int(outcome.finished_at.timestamp() * 1000)
    nid = notification_id(d.key, outcome.execution_id, outcome.attempt, ended_ms, event)
    now = ms_to_datetime(facts.now_ms)
    body = notification_body(
        policy.format,
        tenant=d.tenant,
        job_id=d.job_id,
        event=event,
        execution_id=outcome.execution_id,
        reason=reason,
        error=error,
        at=now,
    )
    effects.out.append(
        Emit(
            Sink.executions,
            _request(d, nid, body, attempt=1, nominal_ms=facts.now_ms, now_ms=facts.now_ms),
        )
    )
    effects.history(
        state,
        facts,
        Decision.notified,
        execution_id=outcome.execution_id,
        attempt=outcome.attempt,
        reason=f"{event.value}: told {_where(policy.url)}",
        details={"event": event.value, "notification": nid, "state": "sent"},
    )
    return _keep(state, facts, nid, body)


def ended(state: JobState, outcome: ExecutionOutcome, facts: Facts) -> Effects:
    """A notification's call ended: delivered, tried again after a backoff (a retryable
    failure, while attempts remain and its body is kept), or given up. A lost lease is the
    reaper's to redeliver: nothing here."""
    effects = Effects(state)
    if outcome.status is OutcomeStatus.lease_lost:
        return effects
    nid = outcome.execution_id
    event = nid.partition(MARKER)[2].partition("-")[0]
    details = {"event": event, "notification": nid}
    common = {"attempt": outcome.attempt, "error": outcome.error}
    body = state.payload_of(nid)
    retryable = outcome.retryable or outcome.status is OutcomeStatus.timed_out
    d = state.definition(facts.codec)
    if outcome.status is OutcomeStatus.succeeded:
        effects.history(
            state,
            facts,
            Decision.notified,
            reason="delivered",
            **common,
            details={**details, "state": "delivered"},
        )
    elif retryable and outcome.attempt < NOTIFY_ATTEMPTS and body is not None and d.notify:
        delay = NOTIFY_BACKOFF_MS * 4 ** (outcome.attempt - 1)
        nominal = int(outcome.nominal_at.timestamp() * 1000)
        again = _request(
            d,
            nid,
            body,
            attempt=outcome.attempt + 1,
            nominal_ms=nominal,
            now_ms=facts.now_ms,
            delay_ms=delay,
        )
        effects.out.append(Emit(Sink.executions, again))
        effects.history(
            state,
            facts,
            Decision.notified,
            **common,
            reason=f"attempt {outcome.attempt} {outcome.status.value}; tried again in {delay} ms",
            details={**details, "state": "retrying"},
        )
        return effects
    else:
        why = "" if body is not None or not retryable else " (its body is no longer kept)"
        effects.history(
            state,
            facts,
            Decision.notified,
            **common,
            reason=f"attempt {outcome.attempt} {outcome.status.value}: given up{why}; a "
            "notification is not dead-lettered and notifies nobody",
            details={**details, "state": "failed"},
        )
    effects.state = state.evolve(payloads=tuple(p for p in state.payloads if p[0] != nid))
    return effects


def _request(
    d: ScheduleDefinition,
    nid: str,
    body: bytes,
    *,
    attempt: int,
    nominal_ms: int,
    now_ms: int,
    delay_ms: int = 0,
) -> ExecutionRequested:
    policy = d.notify
    assert policy is not None
    target = HttpTarget(
        url=policy.url,
        method="POST",
        secret_ref=policy.secret_ref,
        rate_limit=policy.rate_limit or NOTIFY_RATE,
    )
    return new_execution(
        {
            "execution_id": nid,
            "tenant": d.tenant,
            "job_id": d.job_id,
            "definition_version": d.version,
            "attempt": attempt,
            "delivery": 1,
            "trigger": TriggerKind.notification,
            "nominal_at": ms_to_datetime(nominal_ms),
            "due_at": ms_to_datetime(now_ms + delay_ms),
            "dispatched_at": ms_to_datetime(now_ms),
            "target": target,
            "payload": body,
            "content_type": "application/json",
            "timeout_ms": NOTIFY_TIMEOUT_MS,
            "lease_ttl_ms": NOTIFY_LEASE_MS,
            "concurrency_key": d.concurrency_key,  # its outcome comes back to this partition
            "start_by": None,
        }
    )


def _keep(state: JobState, facts: Facts, nid: str, body: bytes) -> JobState:
    """Keep `body` for the notification's retries, forgetting the oldest kept bodies past
    KEPT_BODIES; not at all when the job's state has no room for it (no retries then)."""
    if state.payload_of(nid) is not None:  # the same outcome applied again
        return state
    bodies = [p for p in state.payloads if MARKER in p[0]]
    dropped = {p[0] for p in bodies[: max(0, len(bodies) + 1 - KEPT_BODIES)]}
    if dropped:
        state = state.evolve(payloads=tuple(p for p in state.payloads if p[0] not in dropped))
    if not room_for_override(state, nid, body, facts.state_limit):
        return state
    return state.evolve(payloads=(*state.payloads, (nid, body)))


def _where(url: str) -> str:
    """The URL's scheme, host and port: its path and query may hold a token (Slack's do)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
