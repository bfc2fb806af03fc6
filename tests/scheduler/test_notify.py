"""Notifications (issue 42, item 6): a dead letter, a pause after failures and a circuit opened
by a job's failure each send the job's `notify` webhook one notification, as an execution of
the job with trigger `notification`; its own outcome is retried a few times or given up, and
never dead-lettered, counted in the circuit or notified about. The domain, no broker."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from kadence.models import (
    NOTIFY_RATE,
    DeadLetter,
    Decision,
    ErrorInfo,
    ExecutionRequested,
    HttpTarget,
    NotifyPolicy,
    OutcomeStatus,
    TriggerKind,
    TriggerNow,
)
from kadence.notifications import NOTIFY_ATTEMPTS, is_notification
from streams.scheduler import commands, outcomes
from streams.scheduler.breaker import Breaker, BreakerConfig, after_outcome
from streams.scheduler.notify import KEPT_BODIES
from streams.scheduler.state import JobState
from streams.scheduler.step import Effects
from tests.scheduler.test_domain import T0, cmd, create, ctx, definition, executions, history
from tests.scheduler.test_domain import outcome as make_outcome

URL = "https://hooks.example.com/services/T0/B0/XYZ"


def job(**notify: Any) -> JobState:
    return create(definition(notify={"url": URL, "secret_ref": "hook", **notify}))


def failed_for_good(
    state: JobState, request: str = "r1", now: int = T0, message: str = "boom", **kw: Any
) -> tuple[ExecutionRequested, Effects]:
    started = commands.apply_command(state, cmd(TriggerNow, request_id=request), ctx(now))
    assert started.state is not None
    [ex] = executions(started)
    out = make_outcome(ex, OutcomeStatus.failed)
    out = out.model_copy(update={"error": ErrorInfo(type="E", message=message)})
    return ex, outcomes.apply_outcome(started.state, out, ctx(now + 5, **kw))


def notifications(effects: Effects) -> list[ExecutionRequested]:
    return [e for e in executions(effects) if e.trigger is TriggerKind.notification]


def notified(effects: Effects) -> list[dict[str, str]]:
    return [h.details for h in history(effects) if h.decision is Decision.notified]


def test_a_dead_letter_sends_one_signed_rate_limited_notification_to_the_job_s_url() -> None:
    ex, dead = failed_for_good(job())
    [n] = notifications(dead)
    assert is_notification(n.execution_id) and n.execution_id.startswith("acme/job@notify:")
    assert (n.tenant, n.job_id, n.attempt, n.content_type) == ("acme", "job", 1, "application/json")
    assert n.target == HttpTarget(url=URL, method="POST", secret_ref="hook", rate_limit=NOTIFY_RATE)
    body = json.loads(n.payload)
    assert body["kind"] == "kadence.notification"
    assert (body["tenant"], body["job_id"], body["event"]) == ("acme", "job", "dead_lettered")
    assert body["execution_id"] == ex.execution_id
    assert body["error"]["message"] == "boom" and "boom" in body["reason"]
    [sent] = notified(dead)
    assert sent == {"event": "dead_lettered", "notification": n.execution_id, "state": "sent"}
    assert dead.state is not None and dead.state.payload_of(n.execution_id) == n.payload


def test_the_same_outcome_applied_again_sends_the_same_notification() -> None:
    state = job()
    _, first = failed_for_good(state)
    _, again = failed_for_good(state, now=T0)  # a scheduler that crashed before its commit
    assert [n.execution_id for n in notifications(first)] == [
        n.execution_id for n in notifications(again)
    ]
    _, other = failed_for_good(state, request="r2")
    assert notifications(other)[0].execution_id != notifications(first)[0].execution_id


def test_a_slack_body_is_text_only() -> None:
    ex, dead = failed_for_good(job(format="slack"))
    [n] = notifications(dead)
    body = json.loads(n.payload)
    assert list(body) == ["text"]
    assert "acme/job" in body["text"] and ex.execution_id in body["text"]


def test_only_the_chosen_events_notify_and_a_pause_after_failures_does() -> None:
    state = create(definition(pause_after_failures=1, notify={"url": URL, "on": ["paused"]}))
    _, dead = failed_for_good(state)
    [n] = notifications(dead)
    assert json.loads(n.payload)["event"] == "paused"
    assert Decision.paused in [h.decision for h in history(dead)]
    _, quiet = failed_for_good(create(definition(notify={"url": URL, "on": ["paused"]})))
    assert notifications(quiet) == []


def test_a_job_without_notify_sends_nothing() -> None:
    _, dead = failed_for_good(create(definition()))
    assert notifications(dead) == [] and notified(dead) == []


def test_a_failure_that_opens_the_tenant_s_circuit_notifies() -> None:
    cfg = BreakerConfig(min_attempts=1)
    _, dead = failed_for_good(job(on=["circuit_opened"]), breaker_cfg=cfg)
    assert dead.breaker_change == "opened"
    [n] = notifications(dead)
    body = json.loads(n.payload)
    assert body["event"] == "circuit_opened" and "tenant circuit open" in body["reason"]


def _notification_ended(
    status: OutcomeStatus, retryable: bool, attempt: int = 1
) -> tuple[ExecutionRequested, Effects]:
    _, dead = failed_for_good(job())
    assert dead.state is not None
    [n] = notifications(dead)
    n = n.model_copy(update={"attempt": attempt})
    ended = make_outcome(n, status, retryable=retryable)
    return n, outcomes.apply_outcome(dead.state, ended, ctx(T0 + 1_000, breaker_cfg=_TRIP))


_TRIP = BreakerConfig(min_attempts=1)
"""A breaker one failure would open: a notification's failure must not."""


def test_a_notification_that_fails_is_retried_a_few_times_with_its_body() -> None:
    n, retried = _notification_ended(OutcomeStatus.failed, retryable=True)
    [again] = executions(retried)
    assert (again.execution_id, again.attempt, again.payload) == (n.execution_id, 2, n.payload)
    assert again.due_at > again.dispatched_at  # after a backoff: the worker waits for it
    assert notified(retried)[0]["state"] == "retrying"
    _, last = _notification_ended(OutcomeStatus.failed, retryable=True, attempt=NOTIFY_ATTEMPTS)
    assert executions(last) == [] and notified(last)[0]["state"] == "failed"
    assert last.state is not None and last.state.payload_of(n.execution_id) is None


@pytest.mark.parametrize("status", [OutcomeStatus.failed, OutcomeStatus.timed_out])
def test_a_failing_notification_never_dead_letters_counts_or_notifies(
    status: OutcomeStatus,
) -> None:
    _, given_up = _notification_ended(status, retryable=False, attempt=NOTIFY_ATTEMPTS)
    assert not [e for e in given_up.out if isinstance(e.record, DeadLetter)]
    assert executions(given_up) == []  # no notification about the notification
    assert given_up.breaker is None  # not counted in the tenant's circuit
    assert given_up.dead_delta == 0
    assert [h.decision for h in history(given_up)] == [Decision.notified]
    assert given_up.state is not None and given_up.state.failures_in_row == 1  # the job's own


def test_a_delivered_notification_is_recorded_and_its_body_forgotten() -> None:
    n, done = _notification_ended(OutcomeStatus.succeeded, retryable=False)
    assert notified(done)[0]["state"] == "delivered" and executions(done) == []
    assert done.state is not None and done.state.payload_of(n.execution_id) is None


def test_a_huge_failure_makes_a_small_body_and_a_storm_keeps_few_bodies() -> None:
    state = job()
    for i in range(KEPT_BODIES + 5):
        _, dead = failed_for_good(state, request=f"r{i}", now=T0 + i * 10, message="x" * 1900)
        assert dead.state is not None
        state = dead.state
        [n] = notifications(dead)
        assert len(n.payload) < 2 * 1024 + 512  # the reason and the error: 1 KiB each
    kept = [p for p in state.payloads if is_notification(p[0])]
    assert len(kept) == KEPT_BODIES


@pytest.mark.parametrize(
    ("notify", "words"),
    [
        ({"url": "https://h.example/" + "a" * 2048}, "at most 2048"),
        ({"url": "ftp://h.example/x"}, "absolute http"),
        ({"url": "not a url"}, "absolute http"),
        ({"url": "https://user:pw@h.example/x"}, "credentials"),
        ({"url": URL, "on": []}, "at least 1"),
        ({"url": URL, "on": ["paused", "paused"]}, "at most once"),
        ({"url": URL, "on": ["everything"]}, "dead_lettered"),
        ({"url": URL, "format": "html"}, "json"),
        ({"url": URL, "secret_ref": "other/tenant"}, "pattern"),
        ({"url": URL, "rate_limit": {"per_second": 0}}, "greater than or equal"),
        ({"url": URL, "headers": {"a": "b"}}, "Extra inputs"),
        ({}, "url"),
    ],
)
def test_hostile_notify_fields_are_refused_with_their_reason(
    notify: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValidationError, match=words):
        definition(notify=notify)


def test_notify_round_trips_through_the_wire_and_defaults_to_every_event() -> None:
    d = definition(notify={"url": URL})
    assert d.notify == NotifyPolicy(url=URL)
    assert [e.value for e in d.notify.on] == ["dead_lettered", "paused", "circuit_opened"]


def test_the_breaker_never_counts_a_notification_s_call() -> None:
    _, dead = failed_for_good(job())
    [n] = notifications(dead)
    out = make_outcome(n, OutcomeStatus.failed)
    assert after_outcome(Breaker(), out, T0, _TRIP) is None  # also a deleted job's (processor)
    run = make_outcome(
        executions(dead)[0].model_copy(update={"execution_id": "acme/job@x"}), OutcomeStatus.failed
    )
    counted = after_outcome(Breaker(), run, T0, _TRIP)
    assert counted is not None and counted[1] == "opened"
