"""A model-based test of the scheduler's pure logic (hypothesis state machine): create, pause,
resume, trigger, outcomes, clock jumps, crashes with and without the last step committed,
against a simple model of what must have been dispatched, and of what a pause skips: every
occurrence due is either dispatched once or recorded `skipped_paused` once, and it is skipped
exactly when it fell due while the job was paused."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kadence.clock import ms_to_datetime
from kadence.models import (
    Decision,
    ExecutionRequested,
    ExecutionRevoked,
    HistoryRecord,
    OutcomeStatus,
    PauseJob,
    ResumeJob,
    TriggerNow,
)
from streams.scheduler import commands, definitions, firing, outcomes
from streams.scheduler.state import JobState, dump_state, load_state
from streams.scheduler.step import Effects
from tests.scheduler.test_domain import CODEC, T0, ctx, definition
from tests.scheduler.test_domain import outcome as make_outcome

AHEAD = 30_000
PERIOD = 10_000  # "*/10 * * * * *"


class SchedulerModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        d = definition(
            schedule={"kind": "cron", "spread_s": 0, "expression": "*/10 * * * * *"},
            missed={"mode": "all", "catch_up_window_ms": 86_400_000, "max_catch_up": 10_000},
            retry={"max_attempts": 3, "initial_backoff_ms": 1_000, "jitter": "none"},
        )
        self.now = T0
        result = definitions.apply_definition(None, d, CODEC.encode(d), T0, self.ctx())
        assert result.state is not None
        self.state: JobState = result.state
        self.net: Counter[str] = Counter()
        self.attempts: dict[str, int] = {}
        self.running: dict[str, ExecutionRequested] = {}
        self.paused = False
        self.pauses: list[list[int]] = []
        """[paused at, resumed at (or now)]: a scheduled occurrence due in (start, end] is
        skipped, any other one is dispatched."""
        self.skipped: Counter[str] = Counter()
        self.due: dict[str, int] = {}
        self.requests: set[str] = set()
        self.manual: Counter[str] = Counter()
        self.counter = 0

    def fresh(self, prefix: str) -> str:
        """A new request id (a repeated one is, rightly, a no-op)."""
        self.counter += 1
        return f"{prefix}{self.counter}"

    def ctx(self) -> Any:
        return ctx(self.now, ahead_ms=AHEAD)

    def apply(self, result: Effects) -> None:
        for emit in result.out:
            r = emit.record
            if isinstance(r, ExecutionRequested):
                assert r.due_at - r.dispatched_at <= timedelta(milliseconds=AHEAD)
                if r.trigger in ("schedule", "catch_up"):
                    self.net[r.execution_id] += 1
                if r.trigger == "manual":
                    self.manual[r.execution_id] += 1
                top = self.attempts.get(r.execution_id, 0)
                assert r.attempt in (1, top + 1), "attempts go up one at a time"
                self.attempts[r.execution_id] = max(top, r.attempt)
                self.running[r.execution_id] = r
                self.due.setdefault(r.execution_id, int(r.due_at.timestamp() * 1000))
            elif isinstance(r, ExecutionRevoked):
                self.net[r.execution_id] -= 1
                self.running.pop(r.execution_id, None)
            elif isinstance(r, HistoryRecord) and r.decision is Decision.skipped_paused:
                assert r.execution_id is not None and r.due_at is not None  # none are ranges here
                self.skipped[r.execution_id] += 1
                self.due.setdefault(r.execution_id, int(r.due_at.timestamp() * 1000))
                assert r.at == ms_to_datetime(self.now)
        assert result.state is not None
        self.state = result.state

    def pump(self) -> None:
        """What the timer wheel does: run the job whenever its wake time has come."""
        for _ in range(100):
            wake = self.state.wake_ms
            if wake is None or wake > self.now:
                return
            self.apply(firing.on_due(self.state, self.ctx()))
        raise AssertionError("the job keeps waking at the same time")

    @rule(dt=st.integers(min_value=0, max_value=95_000))
    def advance(self, dt: int) -> None:
        self.now += dt
        if self.paused:
            self.pauses[-1][1] = self.now
        self.pump()

    @rule()
    def pause(self) -> None:
        cmd = PauseJob(
            tenant="acme", job_id="job", request_id=self.fresh("p"), issued_at=ms_to_datetime(T0)
        )
        self.apply(commands.apply_command(self.state, cmd, self.ctx()))
        if not self.paused:
            self.pauses.append([self.now, self.now])
        self.paused = True

    @rule()
    def resume(self) -> None:
        cmd = ResumeJob(
            tenant="acme", job_id="job", request_id=self.fresh("r"), issued_at=ms_to_datetime(T0)
        )
        self.apply(commands.apply_command(self.state, cmd, self.ctx()))
        if self.paused:
            self.pauses[-1][1] = self.now
        self.paused = False
        self.pump()

    @rule(request=st.sampled_from(["a", "b", "c"]))
    def trigger(self, request: str) -> None:
        cmd = TriggerNow(
            tenant="acme", job_id="job", request_id=request, issued_at=ms_to_datetime(T0)
        )
        self.apply(commands.apply_command(self.state, cmd, self.ctx()))
        self.requests.add(request)

    def started(self) -> list[str]:
        """The runs a worker may have started: due by now (a worker never starts one before
        its due time, by a clock kept in step with the scheduler's: docs/reliability.md)."""
        now = ms_to_datetime(self.now)
        return sorted(eid for eid, r in self.running.items() if r.due_at <= now)

    @precondition(lambda self: bool(self.started()))
    @rule(data=st.data(), ok=st.booleans())
    def finish(self, data: st.DataObject, ok: bool) -> None:
        eid = data.draw(st.sampled_from(self.started()))
        ex = self.running.pop(eid)
        status = OutcomeStatus.succeeded if ok else OutcomeStatus.failed
        outcome = make_outcome(ex, status, retryable=True)
        self.apply(outcomes.apply_outcome(self.state, outcome, self.ctx()))

    @rule()
    def crash_and_restore(self) -> None:
        """The state as the changelog has it: what survives a crash after a commit."""
        self.state = load_state(dump_state(self.state), self.state.definition_bytes)

    @rule(dt=st.integers(min_value=0, max_value=60_000))
    def crash_before_commit(self, dt: int) -> None:
        """A step whose transaction aborted: its outputs and state never happened."""
        firing.on_due(self.state, ctx(self.now + dt, ahead_ms=AHEAD))

    @invariant()
    def each_occurrence_out_once_and_all_of_them(self) -> None:
        assert all(n in (0, 1) for n in self.net.values()), self.net
        out = {eid for eid, n in self.net.items() if n == 1}
        compiled = self.state.compiled(CODEC)
        due_by_now, cursor = set(), T0
        while (occ := compiled.next_after(cursor)) is not None and occ.due_ms <= self.now:
            due_by_now.add(
                f"acme/job@{ms_to_datetime(occ.nominal_ms).isoformat(timespec='milliseconds')[:-6]}Z"
            )
            cursor = occ.nominal_ms
        skipped = set(self.skipped)
        assert all(n == 1 for n in self.skipped.values()), self.skipped
        assert not out & skipped, sorted(out & skipped)[:3]
        assert due_by_now <= out | skipped, sorted(due_by_now - out - skipped)[:3]
        for eid in due_by_now:
            in_pause = any(a < self.due[eid] <= b for a, b in self.pauses)
            assert (eid in skipped) == in_pause, (eid, self.due[eid], self.pauses)
        assert len(out) <= len(due_by_now) + AHEAD // PERIOD
        assert all(n == 1 for n in self.manual.values())  # a request id fires once
        assert set(self.manual) == {f"acme/job@manual:{r}" for r in self.requests}

    @invariant()
    def attempts_within_the_policy(self) -> None:
        assert all(a <= 3 for a in self.attempts.values())


SchedulerModel.TestCase.settings = hsettings(max_examples=60, stateful_step_count=40, deadline=None)
test_scheduler_model = SchedulerModel.TestCase
