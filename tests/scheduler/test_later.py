"""Successes that wait for their job's next read (streams/scheduler/later.py): for any state and
any sequence of outcomes, letting what `admit` takes wait and applying the rest at once (after
bringing the job up to date) gives, at every step, the state applying each at once gives; and
what waits is only ever an outcome whose step was quiet (write_behind.quiet)."""

from __future__ import annotations

from hypothesis import event, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from kadence.models import ExecutionOutcome, OutcomeStatus
from streams.scheduler import firing, later, outcomes, write_behind
from streams.scheduler.breaker import after_outcome
from streams.scheduler.entries import Running
from streams.scheduler.settled import nominal_of
from streams.scheduler.state import JobState
from streams.scheduler.step import Effects, Facts, settle
from streams.scheduler.tenant_limits import TenantCaps, TenantLoad
from tests.scheduler.test_domain import CODEC, T0, create, ctx, definition, executions, outcome
from tests.scheduler.test_quiet_success import IDS, job_states, outcomes_of

loads = st.builds(
    TenantLoad,
    caps=st.sampled_from([TenantCaps(), TenantCaps(in_flight=4), TenantCaps(fires_per_s=1)]),
    running=st.integers(0, 6),
)


def settled_nominal(eid: str) -> int:
    nominal = nominal_of(eid)
    assert nominal is not None
    return nominal


def facts_at(now: int, ahead_ms: int, load: TenantLoad) -> Facts:
    return ctx(now, ahead_ms=ahead_ms, tenant=TenantLoad(load.caps, {}, {}, load.running, now))


def waits(
    held: JobState | later.Waiting, o: ExecutionOutcome, facts: Facts
) -> later.Waiting | None:
    """What the processor lets wait (processor._waits, its breaker part: a success that opens
    or closes the tenant's circuit never waits)."""
    waiting = later.admit(held, o, facts.now_ms, CODEC)
    if waiting is None or not later.keeps_early(waiting, facts):
        return None
    counted = after_outcome(facts.breaker, o, facts.now_ms, facts.breaker_cfg)
    return waiting if counted is not None and counted[1] is None else None


@given(
    data=st.data(),
    start=st.integers(0, 40_000),
    ahead_ms=st.sampled_from([0, 30_000]),
    stored=st.booleans(),
)
@hsettings(max_examples=1_000, deadline=None)
def test_waiting_successes_give_the_state_applying_each_at_once_gives(
    data: st.DataObject, start: int, ahead_ms: int, stored: bool
) -> None:
    drawn = data.draw(job_states())
    eager = drawn.evolve(_definition_stored=stored)
    now = drawn.cursor_ms - 5_000 + start
    if data.draw(st.integers(0, 3)):  # mostly a job whose successes may wait
        common = CODEC.encode(definition())
        eager = eager.evolve(definition_bytes=common, buffered=(), _definition_stored=True)
        if data.draw(st.booleans()):  # several runs, as a per-second job has
            listed = data.draw(st.lists(st.sampled_from(IDS[:8]), min_size=2, unique=True))
            attempt = data.draw(st.sampled_from([1, 1, 2]))
            eager = eager.evolve(
                running=tuple(
                    Running(eid, settled_nominal(eid), attempt, T0 + 60_000) for eid in listed
                )
            )
        settled = settle(Effects(eager), facts_at(now, ahead_ms, TenantLoad())).state
        assert settled is not None
        eager = settled  # as every step leaves a job
    held: JobState | later.Waiting = eager
    waited = 0
    for _ in range(data.draw(st.integers(1, 6))):
        now += data.draw(st.sampled_from([0, 0, 1, 700, 5_000]))
        facts = facts_at(now, ahead_ms, data.draw(loads))
        o = data.draw(outcomes_of(eager))
        succeed = data.draw(st.integers(0, 3)) > 0  # mostly a listed run's success
        if eager.running and succeed:
            run = data.draw(st.sampled_from(eager.running))
            o = o.model_copy(
                update={
                    "execution_id": run.execution_id,
                    "attempt": run.attempt,
                    "status": OutcomeStatus.succeeded,
                    "error": None,
                }
            )
        effects = outcomes.apply_outcome(eager, o, facts)
        assert effects.state is not None
        waiting = waits(held, o, facts)
        if data.draw(st.integers(0, 5)) == 0:  # the unit is undone: what was held stays
            assert later.current(held) == eager
            continue
        if waiting is not None:
            assert write_behind.quiet(CODEC, eager, effects), "only a quiet step's success waits"
            assert effects.breaker is not None and effects.breaker_change is None
            held, waited = waiting, waited + 1
        else:
            before = later.current(held)
            assert before == eager
            assert outcomes.apply_outcome(before, o, facts) == effects
            held = effects.state
        eager = effects.state
        assert later.current(held) == eager
    event(f"waited: {min(waited, 3)}")


def test_a_per_second_job_s_successes_wait_and_catch_up_as_one() -> None:
    """B2's steady state: a per-second job dispatched 30 s ahead; its runs succeed in order,
    one a second: each waits, and the job brought up to date has them all applied."""
    job = create(definition(schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * * *"}))
    assert job.next_due_ms is not None
    fired = firing.on_due(job, ctx(job.next_due_ms, ahead_ms=30_000))
    assert fired.state is not None
    state = fired.state.evolve(_definition_stored=True)
    held: JobState | later.Waiting = state
    eager = state
    runs = executions(fired)[:5]
    for n, ex in enumerate(runs):
        facts = ctx(job.next_due_ms + 1_000 * (n + 1), ahead_ms=30_000)
        success = outcome(ex, OutcomeStatus.succeeded)
        waiting = waits(held, success, facts)
        assert waiting is not None, n
        held = waiting
        applied = outcomes.apply_outcome(eager, success, facts).state
        assert applied is not None
        eager = applied
    assert isinstance(held, later.Waiting) and len(held.ids) == 5
    caught = later.caught_up(held)
    assert caught == eager
    assert [r.execution_id for r in caught.running] == [
        r.execution_id for r in state.running if r.execution_id not in held.ids
    ]
    assert caught.finished == () and caught.settled_ms is not None  # folded into the watermark


def test_what_must_be_applied_at_once_does_not_wait() -> None:
    job = create(definition(schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * * *"}))
    assert job.next_due_ms is not None
    fired = firing.on_due(job, ctx(job.next_due_ms, ahead_ms=30_000))
    assert fired.state is not None
    state = fired.state.evolve(_definition_stored=True)
    first = executions(fired)[0]
    facts = ctx(job.next_due_ms + 1_000, ahead_ms=30_000)
    success = outcome(first, OutcomeStatus.succeeded)
    assert waits(state, success, facts) is not None
    assert waits(state, outcome(first, OutcomeStatus.failed), facts) is None  # a failure
    assert waits(state.evolve(_definition_stored=False), success, facts) is None
    linked = create(definition(on_success=[{"job_id": "b"}]))
    assert later.admit(linked.evolve(running=state.running), success, 0, CODEC) is None
    once = later.admit(state, success, facts.now_ms, CODEC)
    assert once is not None
    assert later.admit(once, success, facts.now_ms, CODEC) is None  # the same success again


def test_a_waiting_success_undone_leaves_the_one_before_it_as_it_was() -> None:
    """A success's `Waiting` shares what waits with the one it was made from (later._Log); a
    unit of work undone puts the one before back, and what is admitted to that one next waits
    beside its own successes only, while the undone one still sees its own."""
    job = create(definition(schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * * *"}))
    assert job.next_due_ms is not None
    fired = firing.on_due(job, ctx(job.next_due_ms, ahead_ms=30_000))
    assert fired.state is not None
    state = fired.state.evolve(_definition_stored=True)
    first, second, third = (outcome(ex, OutcomeStatus.succeeded) for ex in executions(fired)[:3])
    now = job.next_due_ms + 1_000
    one = later.admit(state, first, now, CODEC)
    assert one is not None
    two = later.admit(one, second, now + 1, CODEC)  # then undone
    assert two is not None
    other = later.admit(one, third, now + 2, CODEC)
    assert other is not None
    assert one.ids == (first.execution_id,) and one.times == (now,)
    assert two.ids == (first.execution_id, second.execution_id)
    assert other.ids == (first.execution_id, third.execution_id)
    assert other.times == (now, now + 2) and other.last_ms == now + 2
    again = later.admit(one, second, now + 3, CODEC)  # the undone one read again: it waits
    assert again is not None and again.ids == two.ids
    assert again != two and again.log is not two.log  # its own copy, taken at another time
    assert again == later.admit(one, second, now + 3, CODEC)  # equal by what they hold
    assert later.admit(other, third, now + 4, CODEC) is None  # its own: already waiting
    eager = state
    for o, at in ((first, now), (third, now + 2)):
        applied = outcomes.apply_outcome(eager, o, ctx(at, ahead_ms=30_000)).state
        assert applied is not None
        eager = applied
    assert later.caught_up(other) == eager
