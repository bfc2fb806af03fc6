"""A model-based test of concurrency groups (hypothesis state machine) through the processor:
three jobs of one group, each with an overlap policy hypothesis picks, driven by the clock,
outcomes of every kind, triggers, replays and backfills. Whatever happens:
- no two runs of the group are ever in progress at once (a run is in progress from its
  dispatch until its outcome, or until its timeout and lease have passed);
- when no run is in progress, nothing waits: what waited started in the same step;
- every trigger and every retry scheduled runs (waiting, never skipped)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kadence.clock import ms_to_datetime
from kadence.models import (
    Backfill,
    Decision,
    ExecutionRequested,
    HistoryRecord,
    OutcomeStatus,
    ReplayDeadLetter,
    TriggerNow,
)
from streams.runtime.store import MemoryStore
from streams.scheduler.state import load_state
from tests.scheduler.test_breaker import CODEC
from tests.scheduler.test_domain import MIN
from tests.scheduler.test_domain import outcome as make_outcome
from tests.scheduler.test_groups import Group

JOBS = ("a", "b", "c")
POLICIES = ("skip", "buffer_one", "buffer_all", "allow", "cancel_other")
ENDINGS = (
    (OutcomeStatus.succeeded, False),
    (OutcomeStatus.failed, True),
    (OutcomeStatus.failed, False),
    (OutcomeStatus.cancelled, False),
    (OutcomeStatus.timed_out, True),
)


class GroupModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.g: Group | None = None
        self.running: dict[str, ExecutionRequested] = {}
        """Execution id -> its run in progress (no outcome yet)."""
        self.expires: dict[str, int] = {}
        self.asked: dict[str, int] = {}
        """Execution id -> when it is due, for the runs a trigger or a `retry_scheduled`
        promised and that have not been seen starting yet."""

    @rule(policies=st.tuples(*[st.sampled_from(POLICIES)] * len(JOBS)))
    @precondition(lambda self: self.g is None)
    def create(self, policies: tuple[str, ...]) -> None:
        self.g = Group(MemoryStore())
        for job, policy in zip(JOBS, policies, strict=True):
            self.g.job(job, overlap=policy, timeout_ms=180_000)
        self.observe()

    def observe(self) -> None:
        """Check every run that went out in the last step against the runs in progress."""
        assert self.g is not None
        for h in self.g.take(HistoryRecord):
            if h.decision is Decision.retry_scheduled and h.execution_id and h.due_at:
                self.asked[h.execution_id] = int(h.due_at.timestamp() * 1000)
        for ex in self.g.take(ExecutionRequested):
            at = int(ex.dispatched_at.timestamp() * 1000)
            busy = [e for e, exp in self.expires.items() if e in self.running and exp > at]
            assert not busy, f"{ex.execution_id} started while {busy} runs"
            self.running[ex.execution_id] = ex
            due = int(ex.due_at.timestamp() * 1000)
            self.expires[ex.execution_id] = max(at, due) + ex.timeout_ms + ex.lease_ttl_ms
            self.asked.pop(ex.execution_id, None)
        self.g.out.clear()

    @rule(dt=st.integers(min_value=0, max_value=150_000))
    @precondition(lambda self: self.g is not None)
    def advance(self, dt: int) -> None:
        assert self.g is not None
        self.g.now += dt
        self.g.tick(self.g.now)
        self.observe()

    @rule(data=st.data(), ending=st.sampled_from(ENDINGS))
    @precondition(lambda self: self.g is not None and self.running)
    def finish(self, data: st.DataObject, ending: tuple[OutcomeStatus, bool]) -> None:
        assert self.g is not None
        exec_id = data.draw(st.sampled_from(sorted(self.running)))
        ex = self.running.pop(exec_id)
        status, retryable = ending
        o = make_outcome(ex, status, retryable=retryable)
        self.g.feed(self.g.topics.outcomes, ex.key, CODEC.encode(o), self.g.now)
        self.observe()

    @rule(job=st.sampled_from(JOBS))
    @precondition(lambda self: self.g is not None)
    def trigger(self, job: str) -> None:
        assert self.g is not None
        cmd = self.g.request(TriggerNow, job)
        self.asked[f"acme/{job}@manual:{cmd.request_id}"] = self.g.now
        self.g.feed(self.g.topics.commands, cmd.key, CODEC.encode(cmd), self.g.now)
        self.observe()

    @rule(job=st.sampled_from(JOBS))
    @precondition(lambda self: self.g is not None)
    def replay(self, job: str) -> None:
        assert self.g is not None
        cmd = self.g.request(ReplayDeadLetter, job)
        self.g.feed(self.g.topics.commands, cmd.key, CODEC.encode(cmd), self.g.now)
        self.observe()

    @rule(job=st.sampled_from(JOBS), minutes=st.integers(min_value=1, max_value=5))
    @precondition(lambda self: self.g is not None)
    def backfill(self, job: str, minutes: int) -> None:
        assert self.g is not None
        now = self.g.now
        cmd = self.g.request(
            Backfill, job, start=ms_to_datetime(now - minutes * MIN), end=ms_to_datetime(now)
        )
        self.g.feed(self.g.topics.commands, cmd.key, CODEC.encode(cmd), now)
        self.observe()

    @invariant()
    def nothing_waits_while_the_group_is_free(self) -> None:
        if self.g is None or self.running:
            return
        for job in JOBS:
            raw = self.g.task.get(f"acme/{job}".encode())
            assert raw is not None
            assert load_state(raw).buffered == (), f"{job} waits while nothing runs"

    @invariant()
    def every_trigger_and_retry_runs_once_the_group_is_free(self) -> None:
        if self.g is None or self.running:
            return
        late = sorted(e for e, due in self.asked.items() if due <= self.g.now)
        assert not late, f"promised, due and never run: {late}"


TestGroupModel = GroupModel.TestCase
TestGroupModel.settings = hsettings(max_examples=100, stateful_step_count=40, deadline=None)


def test_the_model_sees_an_overlap_when_the_group_is_ignored(monkeypatch: Any) -> None:
    """The model's overlap check can fail: with the group check removed, two jobs due at once
    both start."""
    monkeypatch.setattr("streams.scheduler.dispatch.group_blocked", lambda *_a: False)
    model = GroupModel()
    model.create(("allow", "allow", "allow"))
    with pytest.raises(AssertionError, match="started while"):
        model.advance(MIN)
