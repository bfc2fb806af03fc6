"""State v4: the `running` and `ahead` entries of a job's own scheduled executions are stored as
runs of equal steps (state.py). Any mix of entries comes back equal and in order; a per-second
job dispatched 30 s ahead stores no execution id; and its stored size does not grow with the
number of runs in flight."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from kadence.timeengine.identity import execution_id, manual_execution_id
from streams.scheduler import entries as entries_module
from streams.scheduler.entries import Ahead, Running
from streams.scheduler.state import JobState, dump_state, load_state

KEY = "acme/j"
T0 = 1_796_112_000_000


def _state(running: tuple[Running, ...], ahead: tuple[Ahead, ...]) -> JobState:
    return JobState(b"def", T0, T0, T0 + 1_000, T0 + 1_000, "2025b", running=running, ahead=ahead)


ids = st.sampled_from(["own", "own", "own", "manual", "other-key", "odd"])


def _id(kind: str, nominal: int, n: int) -> str:
    if kind == "own":
        return execution_id(KEY, nominal)
    if kind == "manual":
        return manual_execution_id(KEY, f"r{n}")
    if kind == "other-key":
        return execution_id("acme/other", nominal)
    return f"{KEY}@2026-12-01T08:00:00Z"  # names an instant, but not in the canonical form


@st.composite
def entries(draw: st.DrawFn) -> tuple[tuple[Running, ...], tuple[Ahead, ...]]:
    nominal = T0
    running: list[Running] = []
    ahead: list[Ahead] = []
    cursor = T0 - 1_000
    for n in range(draw(st.integers(0, 40))):
        nominal += draw(st.sampled_from([1_000, 1_000, 1_000, 60_000, 0, -5_000, 7]))
        kind = draw(ids)
        exec_id = _id(kind, nominal, n)
        if draw(st.booleans()):
            attempt = draw(st.sampled_from([1, 1, 1, 2]))
            expires = nominal + draw(st.sampled_from([330_000, 330_000, 90_000]))
            running.append(Running(exec_id, nominal, attempt, expires))
        else:
            due = nominal + draw(st.sampled_from([0, 0, 0, 3_600_000]))
            before = draw(st.sampled_from([cursor, cursor, nominal - 1]))
            ahead.append(Ahead(exec_id, nominal, due, before))
            cursor = nominal
    return tuple(running), tuple(ahead)


@given(entries())
@hsettings(max_examples=300, deadline=None)
def test_any_entries_come_back_equal_and_in_order(
    drawn: tuple[tuple[Running, ...], tuple[Ahead, ...]],
) -> None:
    state = _state(*drawn)
    again = load_state(dump_state(state), b"def")
    assert again == state
    assert [r.execution_id for r in again.running] == [r.execution_id for r in state.running]
    assert [a.execution_id for a in again.ahead] == [a.execution_id for a in state.ahead]
    assert load_state(dump_state(again), b"def") == state  # and once more, from what was read


def _per_second(in_flight: int) -> JobState:
    """A per-second job dispatched 30 s ahead, `in_flight` runs started and not ended."""
    running = tuple(
        Running(execution_id(KEY, T0 + i * 1_000), T0 + i * 1_000, 1, T0 + i * 1_000 + 330_000)
        for i in range(in_flight)
    )
    start = T0 + in_flight * 1_000
    ahead = tuple(
        Ahead(
            execution_id(KEY, start + i * 1_000),
            start + i * 1_000,
            start + i * 1_000,
            start + (i - 1) * 1_000,
        )
        for i in range(30)
    )
    return _state(running, ahead)


def test_a_per_second_job_stores_no_execution_id_and_a_constant_size() -> None:
    small, large = dump_state(_per_second(2)), dump_state(_per_second(600))
    assert b"@" not in small and b"@" not in large
    assert len(small) < 600 and len(large) - len(small) <= 4  # the count's digits
    body = json.loads(large[3:])
    assert body["key"] == KEY
    assert body["running"] == [[T0, 1_000, 600, 1, 330_000]]
    assert load_state(large, b"def") == _per_second(600)


def test_a_retry_amid_the_runs_breaks_the_run_and_keeps_its_place() -> None:
    state = _per_second(5)
    retried = state.running[2]
    running = (
        *state.running[:2],
        Running(retried.execution_id, retried.nominal_ms, 2, retried.expires_ms + 9_000),
        *state.running[3:],
    )
    changed = state.evolve(running=running)
    body = json.loads(dump_state(changed)[3:])
    assert [r[2] for r in body["running"]] == [2, 1, 2]  # counts: two, the retry, two
    assert load_state(dump_state(changed), b"def") == changed


def _steady_ahead(first: int, count: int, step: int = 1_000) -> list[Ahead]:
    return [
        Ahead(execution_id(KEY, n), n, n, n - step)
        for n in range(first, first + count * step, step)
    ]


changes = st.sampled_from(
    ["fire", "fire", "refill", "outcome", "outcome", "out-of-order", "retry", "manual", "same"]
)


@given(st.integers(1, 30), st.lists(changes, max_size=25))
@hsettings(max_examples=300, deadline=None)
def test_a_state_stored_from_the_last_one_stores_what_a_fresh_look_stores(
    size: int, steps: list[str]
) -> None:
    """Each state is compacted from the runs its predecessor stored (entries.compact_from):
    what it writes is byte for byte what a state that never stored anything writes, whatever
    firing, refills, outcomes (in order or not), retries and manual runs did to the entries."""
    ahead = _steady_ahead(T0, size)
    running: list[Running] = []
    state = _state((), tuple(ahead))
    for n, step in enumerate(steps):
        if step == "fire" and ahead:  # the first one ahead is due: it runs
            a = ahead.pop(0)
            running.append(Running(a.execution_id, a.nominal_ms, 1, a.nominal_ms + 330_000))
        elif step == "refill":
            start = ahead[-1].nominal_ms + 1_000 if ahead else T0 + 100_000
            ahead += _steady_ahead(start, 3)
        elif step == "outcome" and running:
            running.pop(0)
        elif step == "out-of-order" and len(running) > 1:
            running.pop(1)
        elif step == "retry" and running:
            r = running.pop(0)
            running.append(Running(r.execution_id, r.nominal_ms, 2, r.expires_ms + 5_000))
        elif step == "manual":
            running.append(Running(manual_execution_id(KEY, f"r{n}"), T0 + n, 1, T0 + 9_000))
        state = state.evolve(running=tuple(running), ahead=tuple(ahead))
        fresh = _state(tuple(running), tuple(ahead))
        assert dump_state(state) == dump_state(fresh)
    assert load_state(dump_state(state), b"def") == _state(tuple(running), tuple(ahead))


def test_a_steady_job_s_next_state_is_stored_without_looking_at_each_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fire (the first run ahead leaves, one more joins at the end) and an outcome (the first
    run ends) are compacted from what the state before stored, not entry by entry."""
    ahead = _steady_ahead(T0, 30)
    running = [Running(execution_id(KEY, T0 - 1_000), T0 - 1_000, 1, T0 + 329_000)]
    state = _state(tuple(running), tuple(ahead))
    dump_state(state)
    monkeypatch.setattr(entries_module, "compact", _not_called)
    fired = state.evolve(
        running=(*running, Running(ahead[0].execution_id, T0, 1, T0 + 330_000)),
        ahead=(*ahead[1:], *_steady_ahead(T0 + 30_000, 1)),
    )
    stored = [dump_state(fired)]
    ended = fired.evolve(running=fired.running[1:])
    stored.append(dump_state(ended))
    monkeypatch.undo()
    assert stored == [dump_state(_state(s.running, s.ahead)) for s in (fired, ended)]


def _not_called(*_: object) -> list[object]:
    raise AssertionError("compacted entry by entry")
