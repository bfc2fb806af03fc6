"""The scheduler's changelog values written by the previous release (a5a9ca4, before issue
16's changes to the state and the breaker) are read by this build; the job's state is written
back in the current form (v3, without its definition: see test_state_formats.py), the same
state.

data/previous_release_state.txt: a job's state (hex of `dump_state`) and a tenant breaker (its
JSON), as that release wrote them."""

from __future__ import annotations

from pathlib import Path

from kadence.codec import Codec
from kadence.models import ScheduleDefinition
from streams.scheduler.breaker import Breaker
from streams.scheduler.state import dump_state, load_state

DATA = Path(__file__).parent / "data" / "previous_release_state.txt"


def test_a_job_state_of_the_previous_release_loads_and_dumps_the_same_state() -> None:
    state_hex, _ = DATA.read_text().split()
    raw = bytes.fromhex(state_hex)
    state = load_state(raw)
    assert state.definition(Codec()) == Codec().decode_as(
        state.definition_bytes, ScheduleDefinition
    )
    assert state.definition(Codec()).job_id == "nightly-report"
    assert (state.cursor_ms, state.early_ms, state.fired, state.missed) == (
        1_774_744_200_000,
        30_000,
        3,
        1,
    )
    assert [r.execution_id for r in state.running] == [
        "acme/nightly-report@2026-03-29T00:30:00.000Z"
    ]
    assert [(p.attempt, p.trigger) for p in state.retries] == [(2, "retry")]
    assert [a.cursor_before_ms for a in state.ahead] == [1_774_744_200_000]
    assert state.evolve(fired=4).fired == 4
    assert not state.definition_stored  # the next write stores it under its own key
    again = load_state(dump_state(state), state.definition_bytes)
    assert again == state
    assert again.definition(Codec()) == state.definition(Codec())


def test_a_breaker_of_the_previous_release_loads_and_dumps_the_same() -> None:
    _, breaker_json = DATA.read_text().split()
    breaker = Breaker.load(breaker_json.encode())
    assert (breaker.attempts, breaker.failures, breaker.probe) == (
        12,
        5,
        "acme/x@2026-03-29T00:30:00.000Z",
    )
    assert breaker.dump() == breaker_json.encode()
