"""Issue 42, item 4: an attempt's result lives on `outcomes` (Kadence's own topic, no tenant
reads it) and in the query view, shown to its tenant only; the scheduler copies it into nothing
it writes: not history, not a retry's execution, not the dead letter (whose event goes to the
tenant's events topic)."""

from __future__ import annotations

from kadence.models import DeadLetter, ExecutionOutcome, OutcomeStatus, RunResult, WireModel
from streams.scheduler import outcomes
from tests.scheduler.test_domain import CODEC, MIN, T0, ctx, due, executions, outcome
from tests.scheduler.test_domain import _first_run as first_run

MARK = b"result-marker-7f3a"


def _with_result(ex_outcome: ExecutionOutcome) -> ExecutionOutcome:
    result = RunResult(status_code=503, headers={"x-mark": MARK.decode()}, body=MARK)
    return ex_outcome.model_copy(update={"result": result})


def test_no_record_the_scheduler_writes_carries_an_attempts_result() -> None:
    state, ex = first_run(retry={"max_attempts": 2, "initial_backoff_ms": 1_000})
    failed = _with_result(outcome(ex, OutcomeStatus.failed, retryable=True))
    assert MARK in CODEC.encode(failed)  # on outcomes: it is there
    retrying = outcomes.apply_outcome(state, failed, ctx(T0 + MIN + 500))
    assert retrying.state is not None
    [pending] = retrying.state.retries
    retried = due(retrying.state, pending.due_ms)
    [ex2] = executions(retried)
    assert retried.state is not None
    last = _with_result(outcome(ex2, OutcomeStatus.failed, retryable=True))
    final = outcomes.apply_outcome(retried.state, last, ctx(pending.due_ms + 10))
    written = [
        e.record
        for r in (retrying, retried, final)
        for e in r.out
        if isinstance(e.record, WireModel)
    ]
    assert any(isinstance(w, DeadLetter) for w in written)
    for record in written:
        assert MARK not in CODEC.encode(record), type(record).__name__
