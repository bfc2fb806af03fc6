"""The quiet success (outcomes._quiet_success): applying the common outcome in one copy of the
job's state gives exactly what the generic path gives, for any state and outcome; and the fold
of settled outcomes (settled._folded, its passes by `map`) is the one the docstring of
settled.py describes."""

from __future__ import annotations

from hypothesis import event, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from kadence.clock import ms_to_datetime
from kadence.models import ErrorInfo, ExecutionOutcome, OutcomeStatus, ScheduleDefinition
from kadence.timeengine.identity import execution_id, manual_execution_id
from streams.scheduler import firing, outcomes, settled
from streams.scheduler.entries import Ahead, Pending, Running
from streams.scheduler.state import JobState
from tests.scheduler.test_domain import CODEC, T0, create, ctx, definition, executions, outcome

KEY = "acme/job"
DEFINITIONS: list[ScheduleDefinition] = [
    definition(),
    definition(),  # the common job, drawn more often
    definition(on_success=[{"job_id": "b"}]),
    definition(delete_after_completion=True),
    definition(concurrency_key="grp"),
    definition(overlap="buffer_all"),
]
IDS = [execution_id(KEY, T0 + 1_000 * n) for n in range(8)] + [
    manual_execution_id(KEY, "r1"),
    manual_execution_id(KEY, "r2"),
    f"{KEY}@2026-12-01T09:00:00Z",  # names an instant, not in the canonical form
]
ids = st.sampled_from(IDS)
nominals = st.sampled_from([T0 + 1_000 * n for n in range(-2, 9)])
attempts = st.integers(1, 3)
times = st.integers(T0 - 5_000, T0 + 60_000)


def _nominal(eid: str, draw: st.DrawFn) -> int:
    """Mostly the instant the id names; sometimes another (states the model never makes)."""
    named = settled.nominal_of(eid)
    return named if named is not None and draw(st.integers(0, 5)) else draw(nominals)


@st.composite
def job_states(draw: st.DrawFn) -> JobState:
    d = draw(st.sampled_from(DEFINITIONS))
    running = tuple(
        Running(eid, _nominal(eid, draw), draw(attempts), draw(times))
        for eid in draw(st.lists(ids, max_size=draw(st.sampled_from([1, 1, 8]))))
    )
    ahead = tuple(
        Ahead(eid, _nominal(eid, draw), draw(times), draw(nominals))
        for eid in draw(st.lists(ids, max_size=draw(st.sampled_from([0, 6]))))
    )

    def pending() -> st.SearchStrategy[tuple[Pending, ...]]:
        trigger = st.sampled_from(["schedule", "retry", "manual"])
        return st.lists(
            st.builds(Pending, ids, nominals, times, attempts, trigger), max_size=2
        ).map(tuple)

    finished = draw(st.lists(st.builds("{}#{}".format, ids, attempts), max_size=4))
    payload_ids = draw(st.lists(ids, max_size=2, unique=True))
    return JobState(
        definition_bytes=CODEC.encode(d),
        cursor_ms=T0,
        created_cursor_ms=T0 - 60_000,
        next_nominal_ms=T0 + 9_000,
        next_due_ms=draw(st.sampled_from([None, T0 + 9_000, T0 + 40_000])),
        tzdb="2025b",
        running=running,
        ahead=ahead,
        buffered=draw(st.sampled_from([(), (), draw(pending())])),
        retries=draw(st.sampled_from([(), (), draw(pending())])),
        finished=tuple(finished),
        unsettled=tuple(draw(st.lists(ids, max_size=2))),
        settled_ms=draw(st.one_of(st.none(), nominals)),
        request_ids=tuple(draw(st.lists(st.sampled_from(["r1", "r2", "r3"]), max_size=2))),
        payloads=tuple((eid, b"{}") for eid in payload_ids),
        failures_in_row=draw(st.integers(0, 2)),
        early_ms=draw(st.sampled_from([0, 30_000])),
    )


@st.composite
def outcomes_of(draw: st.DrawFn, state: JobState) -> ExecutionOutcome:
    """Mostly an outcome of a run the state lists, at its attempt; any other now and then."""
    listed: int = draw(st.integers(0, 5))
    if state.running and listed:
        run = draw(st.sampled_from(state.running))
        eid, attempt = run.execution_id, run.attempt + draw(st.sampled_from([0] * 6 + [-1, 1]))
    else:
        eid, attempt = draw(ids), draw(attempts)
    status = draw(st.sampled_from([OutcomeStatus.succeeded] * 8 + list(OutcomeStatus)))
    failed = status is not OutcomeStatus.succeeded
    nominal = ms_to_datetime(settled.nominal_of(eid) or T0)
    return ExecutionOutcome(
        execution_id=eid,
        tenant="acme",
        job_id="job",
        attempt=max(1, attempt),
        delivery=1,
        worker_id="w",
        status=status,
        retryable=draw(st.booleans()),
        error=ErrorInfo(type="E", message="boom") if failed else None,
        nominal_at=nominal,
        due_at=nominal,
        started_at=nominal,
        finished_at=nominal,
    )


@given(data=st.data(), now=times, ahead_ms=st.sampled_from([0, 30_000]))
@hsettings(max_examples=1_000, deadline=None)
def test_the_quiet_success_gives_what_the_generic_path_gives(
    data: st.DataObject, now: int, ahead_ms: int
) -> None:
    state = data.draw(job_states())
    outcome = data.draw(outcomes_of(state))
    facts = ctx(now, ahead_ms=ahead_ms)
    taken = outcomes._quiet_success(state, outcome, facts) is not None
    event(f"quiet success: {taken}")
    quick = outcomes.apply_outcome(state, outcome, facts)
    generic = outcomes.apply_outcome(state, outcome, facts, quick=False)
    assert quick == generic
    assert quick.state is not None and generic.state is not None
    assert quick.state.failures_in_row == generic.state.failures_in_row  # compared, to be sure


def _reference_fold(
    state: JobState, finished: tuple[str, ...], unsettled: tuple[str, ...]
) -> tuple[int | None, tuple[str, ...]]:
    """The fold as settled.py's docstring says it: the watermark moves up to the newest applied
    scheduled execution older than every live run (not itself live), and drops the entries it
    covers unless live or unsettled; a manual run is covered while its request id is kept."""
    waiting = (*state.buffered, *state.retries)
    live = [r.execution_id for r in state.running] + [p.execution_id for p in waiting]
    live += [a.execution_id for a in state.ahead]
    instants = [r.nominal_ms for r in state.running] + [p.nominal_ms for p in waiting]
    instants += [a.nominal_ms for a in state.ahead]
    mark = state.settled_ms
    for entry in finished:
        exec_id = entry.rpartition("#")[0]
        nominal = settled.nominal_of(exec_id)
        if nominal is None or exec_id in live or any(nominal >= i for i in instants):
            continue
        mark = nominal if mark is None else max(mark, nominal)
    kept = []
    for entry in finished:
        exec_id = entry.rpartition("#")[0]
        nominal = settled.nominal_of(exec_id)
        if nominal is None:
            covered = exec_id.rpartition("@manual:")[2] in state.request_ids
        else:
            covered = mark is not None and nominal <= mark
        if exec_id in live or exec_id in unsettled or not covered:
            kept.append(entry)
    return mark, tuple(kept)


@given(state=job_states(), eid=ids, attempt=attempts)
@hsettings(max_examples=500, deadline=None)
def test_the_fold_keeps_what_the_watermark_does_not_cover(
    state: JobState, eid: str, attempt: int
) -> None:
    after = settled.applied(state, eid, attempt)
    finished = (*state.finished, f"{eid}#{attempt}")
    unsettled = tuple(e for e in state.unsettled if e != eid)
    assert (after.settled_ms, after.finished) == _reference_fold(state, finished, unsettled)
    assert after.unsettled == unsettled


def test_a_per_second_job_s_success_takes_the_quiet_path() -> None:
    """B2's steady state: a per-second job dispatched 30 s ahead; its oldest run succeeds."""
    job = create(definition(schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * * *"}))
    assert job.next_due_ms is not None
    fired = firing.on_due(job, ctx(job.next_due_ms, ahead_ms=30_000))
    assert fired.state is not None and len(fired.state.running) > 10
    first = executions(fired)[0]
    facts = ctx(job.next_due_ms + 1_000, ahead_ms=30_000)
    success = outcome(first, OutcomeStatus.succeeded)
    quiet = outcomes._quiet_success(fired.state, success, facts)
    assert quiet is not None and quiet.state is not None
    assert quiet.state.running == fired.state.running[1:]
    assert quiet.state.settled_ms == int(first.nominal_at.timestamp() * 1000)
    assert quiet.state.finished == ()
    generic = outcomes.apply_outcome(fired.state, success, facts, quick=False)
    assert outcomes.apply_outcome(fired.state, success, facts) == generic
