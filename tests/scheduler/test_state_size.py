"""A job's stored state stays small whatever its age, and a duplicate outcome still changes
nothing (issue 29, item 2).

A per-second job lives through 1 200 occurrences with outcomes that come late and out of order
(some after the run's timeout and lease: it left `running` first), retries, manual triggers,
and outcomes delivered twice (the second at once, or long after): every first outcome of an
attempt is applied and every second one is not, exactly as a job that remembered every
applied attempt would decide; and the stored run state stays under 2 kB (the definition is
stored apart). State v2 kept the last 1 000 `<execution id>#<attempt>`: about 55 kB."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from kadence.clock import ms_to_datetime
from kadence.models import (
    ExecutionOutcome,
    ExecutionRequested,
    OutcomeStatus,
    TriggerNow,
)
from streams.scheduler import commands, firing, outcomes
from streams.scheduler.settled import already_applied, nominal_of
from streams.scheduler.state import JobState, dump_state, load_state
from tests.scheduler.test_domain import T0, create, ctx, definition, executions, outcome

STATE_BYTES = 2_048
MEMORY_BYTES = 1_536
SECOND = 1_000


def per_second(**kw: Any) -> JobState:
    return create(
        definition(
            schedule={"kind": "cron", "expression": "* * * * * *", "spread_s": 0},
            retry={"max_attempts": 3, "initial_backoff_ms": 1_500, "max_backoff_ms": 4_000},
            timeout_ms=1_000,
            lease_ttl_ms=3_000,
            **kw,
        )
    )


class Life:
    """The job, its outcomes in flight, and what a job remembering everything would know."""

    def __init__(self, rng: random.Random, late: int, fail_pct: int, dup_pct: int) -> None:
        self.rng, self.late, self.fail_pct, self.dup_pct = rng, late, fail_pct, dup_pct
        self.state = per_second()
        self.in_flight: list[tuple[int, ExecutionOutcome]] = []  # (deliver at, outcome)
        self.delivered: list[ExecutionOutcome] = []
        self.applied: set[tuple[str, int]] = set()
        self.duplicates = 0
        self.largest_memory = 0

    def sent(self, exs: list[ExecutionRequested], now: int) -> None:
        for ex in exs:
            failed = self.rng.randrange(100) < self.fail_pct
            status = OutcomeStatus.failed if failed else OutcomeStatus.succeeded
            done = outcome(ex, status, retryable=True)
            self.in_flight.append((now + self.rng.randint(0, self.late) * SECOND, done))

    def deliver(self, done: ExecutionOutcome, now: int) -> None:
        before = self.state
        seen = (done.execution_id, done.attempt) in self.applied
        assert already_applied(before, done.execution_id, done.attempt) is seen
        result = outcomes.apply_outcome(before, done, ctx(now))
        assert result.state is not None
        stale = [e.record for e in result.out if getattr(e.record, "details", None)]
        if seen:
            self.duplicates += 1
            assert result.state == before, done
            assert executions(result) == []
            assert any(r.details.get("stale") == "true" for r in stale)  # type: ignore[union-attr]
        else:
            self.applied.add((done.execution_id, done.attempt))
            self.delivered.append(done)
        self.state = result.state
        self.sent(executions(result), now)

    def second(self, now: int, request: int) -> None:
        wake = self.state.wake_ms
        if wake is not None and wake <= now:
            result = firing.on_due(self.state, ctx(now))
            assert result.state is not None
            self.state = result.state
            self.sent(executions(result), now)
        if self.rng.randrange(100) < 1:  # now and then, someone triggers it by hand
            trigger = TriggerNow(
                tenant="acme", job_id="job", request_id=f"r{request}", issued_at=ms_to_datetime(now)
            )
            result = commands.apply_command(self.state, trigger, ctx(now))
            assert result.state is not None
            self.state = result.state
            self.sent(executions(result), now)
        due = [item for item in self.in_flight if item[0] <= now]
        self.in_flight = [item for item in self.in_flight if item[0] > now]
        self.rng.shuffle(due)
        for _, done in due:
            self.deliver(done, now)
            if self.rng.randrange(100) < self.dup_pct:  # delivered twice in a row
                self.deliver(done, now)
        if self.delivered and self.rng.randrange(100) < self.dup_pct:  # a redelivery, any age
            self.deliver(self.rng.choice(self.delivered), now)
        # what it remembers besides its runs in progress and its last dead letters
        memory = self.state.evolve(running=(), retries=(), buffered=(), ahead=(), dead=())
        self.largest_memory = max(self.largest_memory, len(dump_state(memory)))


@settings(max_examples=6, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(
    seed=st.integers(0, 2**32),
    late=st.integers(0, 8),
    fail_pct=st.integers(0, 15),
    dup_pct=st.integers(0, 20),
)
def test_a_job_after_a_thousand_runs_stays_small_and_ignores_every_duplicate(
    seed: int, late: int, fail_pct: int, dup_pct: int
) -> None:
    life = Life(random.Random(seed), late, fail_pct, dup_pct)
    for i in range(1_200):
        life.second(T0 + (i + 1) * SECOND, i)
    end = T0 + 1_201 * SECOND
    for _, done in life.in_flight:  # the last outcomes come in
        life.deliver(done, end)
    assert life.state.fired > 1_000
    for done in list(life.delivered):  # then every applied one once more
        life.deliver(done, end)
    assert life.duplicates >= len(life.delivered)
    data = dump_state(life.state)
    assert len(data) <= STATE_BYTES, (len(data), life.state.finished, life.state.unsettled)
    assert life.largest_memory <= MEMORY_BYTES  # at every step, not only at the end
    assert load_state(data, life.state.definition_bytes) == life.state


def test_the_watermark_covers_settled_runs_and_never_a_live_or_unsettled_one() -> None:
    """Outcomes out of order: the newest settled run stays listed until the older one ends;
    a run whose outcome comes after it left `running` (timeout and lease passed) is still
    applied once, even after the watermark passed it."""
    state = per_second()
    sent: list[ExecutionRequested] = []
    for i in range(1, 4):
        result = firing.on_due(state, ctx(T0 + i * SECOND))
        assert result.state is not None
        state = result.state
        sent += executions(result)
    first, second, third = sent
    ended = outcomes.apply_outcome(state, outcome(third, OutcomeStatus.succeeded), ctx(T0 + 3_100))
    assert ended.state is not None
    assert ended.state.finished == (f"{third.execution_id}#1",)  # the first two still run
    assert ended.state.settled_ms is None
    later = ended.state
    for i in range(4, 10):  # the first two expire and leave `running` on the next fire
        result = firing.on_due(later, ctx(T0 + i * SECOND))
        assert result.state is not None
        later = result.state
        for ex in executions(result):
            done = outcomes.apply_outcome(
                later, outcome(ex, OutcomeStatus.succeeded), ctx(T0 + i * SECOND + 100)
            )
            assert done.state is not None
            later = done.state
    assert set(later.unsettled) == {first.execution_id, second.execution_id}
    assert later.settled_ms == nominal_of(sent[-1].execution_id) + 6 * SECOND  # type: ignore[operator]
    assert later.finished == ()
    assert not already_applied(later, first.execution_id, 1)
    assert already_applied(later, third.execution_id, 1)
    late = outcomes.apply_outcome(later, outcome(first, OutcomeStatus.succeeded), ctx(T0 + 9_500))
    assert late.state is not None and late.state != later  # applied
    assert late.state.unsettled == (second.execution_id,)
    again = outcomes.apply_outcome(
        late.state, outcome(first, OutcomeStatus.succeeded), ctx(T0 + 9_600)
    )
    assert again.state == late.state  # the second outcome of it changes nothing
