"""The conformance corpus: the webhook target against receivers that answer in every unusual but
legal way, and in the illegal ways seen in the wild (testkit/receivers.py).

What a user expects of every case: a run reported succeeded reached the receiver (no answer
left on a kept connection answers another run); a delivered run the receiver accepted succeeds
whatever the framing of its answer's body; nothing takes longer than its deadline; a broken
answer is a named, retryable failure, never a traceback; a POST is never sent twice by the
client itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr

from connectors.http import HttpCaller
from connectors.ssrf import AddressPolicy
from kadence.models import ExecutionRequested, HttpTarget, OutcomeStatus
from kadence.targets import Result, Stop
from testkit.receivers import CASES, Receiver

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
TIMEOUT_MS = 1_500
SLACK_S = 0.5
"""How far past its deadline a run may end (the loop's scheduling, a busy machine)."""

DELIVERED_AND_ACCEPTED = {
    "plain", "no-content", "chunked", "until-close", "http10", "interim", "obs-fold", "bare-lf",
    "equal-lengths", "no-reason", "byte-by-byte", "closes-each", "idle-close", "slow-body",
    "twice-then-close", "extra-500", "idle-408", "past-length", "negative-chunk",
    "hex-prefix-chunk", "plus-chunk", "no-chunk-crlf", "eof-after-last-chunk", "not-chunked",
}  # fmt: skip
"""The receiver got the run and answered 2xx: it succeeds, however the body is framed."""
BROKEN = {"superscript-length", "not-http", "huge-head"}
"""An answer that is not HTTP a client can frame: a retryable failure that says so."""
GONE = {"reset", "close-silently"}
"""The receiver got the run and went away without an answer: retryable."""
NAMED_ERRORS = {"BadResponse", "RemoteDisconnected", "ConnectError"}
"""What a failed exchange is called: no Python exception's name leaks out."""


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    srv = Receiver().start()
    yield srv
    srv.stop()


def run_of(url: str, n: int, timeout_ms: int = TIMEOUT_MS) -> ExecutionRequested:
    at = T + timedelta(seconds=n)
    return ExecutionRequested(
        execution_id=f"acme/job@{at.isoformat()}-{time.monotonic_ns()}",
        tenant="acme",
        job_id="job",
        definition_version=1,
        nominal_at=at,
        due_at=at,
        dispatched_at=at,
        target=HttpTarget(url=url, secret_ref="s"),
        payload=b'{"a":1}',
        timeout_ms=timeout_ms,
        lease_ttl_ms=30_000,
    )


def caller() -> HttpCaller:
    return HttpCaller(AddressPolicy(["127.0.0.0/8"]), {"acme": {"s": SecretStr("secret")}})


def timed_run(c: HttpCaller, ex: ExecutionRequested) -> tuple[Result, float]:
    started = time.monotonic()
    result = c.start(ex, Stop()).result(timeout=30)
    return result, time.monotonic() - started


def check_common(
    receiver: Receiver, case: str, runs: list[tuple[ExecutionRequested, Result, float]]
) -> None:
    got = receiver.runs(case)
    for ex, result, took in runs:
        assert took <= ex.timeout_ms / 1000 + SLACK_S, f"{case}: {took:.2f} s"
        if result.status is OutcomeStatus.succeeded:
            assert ex.execution_id in got, f"{case}: succeeded but never reached the receiver"
        if result.error is not None:
            assert result.error.type in NAMED_ERRORS | {"HttpStatus", "Timeout"}, result.error


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_receiver_behaviour(
    receiver: Receiver, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    c = caller()
    runs = []
    for n in range(3):
        ex = run_of(receiver.url(case), n)
        result, took = timed_run(c, ex)
        runs.append((ex, result, took))
        time.sleep(0.5 if case == "idle-close" else 0.15)  # idle: let the receiver misbehave
    check_common(receiver, case, runs)
    results = [r for _, r, _ in runs]
    got = receiver.runs(case)
    if case in DELIVERED_AND_ACCEPTED:
        assert [r.status for r in results] == [OutcomeStatus.succeeded] * 3, results
        assert sorted(got) == sorted(ex.execution_id for ex, _, _ in runs)  # each once
    elif case in BROKEN | GONE:
        assert all(r.status is OutcomeStatus.failed and r.retryable for r in results), results
        kind = "BadResponse" if case in BROKEN else "RemoteDisconnected"
        assert {r.error.type for r in results if r.error} == {kind}
    elif case in ("hang", "slow-head"):
        assert [r.status for r in results] == [OutcomeStatus.timed_out] * 3
        # the deadline, not sooner (uvloop's timers are to the millisecond)
        assert all(took >= TIMEOUT_MS / 1000 - 0.01 for _, _, took in runs), runs
    elif case == "fail-big":
        assert all(r.retryable and r.error and r.error.code == "500" for r in results)
        assert all(r.error and len(r.error.message) <= 4096 for r in results)
    elif case == "redirect":
        assert all(not r.retryable and r.error for r in results)
        messages = [r.error.message for r in results if r.error]
        assert all("redirect to http://10.0.0.1/ not followed" in m for m in messages)
    elif case == "gone-on-second":
        first, second, third = results
        assert first.status is OutcomeStatus.succeeded
        # on the kept connection the receiver got the POST and closed: failed, retryably, and
        # never sent again by the client; the next run opens a new connection
        assert second.status is OutcomeStatus.failed and second.retryable
        assert third.status is OutcomeStatus.succeeded
        assert sorted(got) == sorted(ex.execution_id for ex, _, _ in runs)  # each exactly once
    else:
        pytest.fail(f"case {case} has no expectation: add it to this test")
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


def test_jobs_sharing_a_host_never_answer_each_other(receiver: Receiver) -> None:
    """The issue's live find, replayed: five jobs of one tenant on one host, each on its own
    path, one run each per round through one caller (its kept connections shared). A job's
    success is its own answer to its own request: every run reported succeeded arrived, and every
    delivered run of the well-behaved and the bare-LF job succeeded."""
    c = caller()
    cases = ["twice-then-close", "extra-500", "equal-lengths", "bare-lf", "plain"]
    outcomes: dict[str, list[tuple[str, Result]]] = {case: [] for case in cases}
    for n in range(12):
        futures = []
        for case in cases:
            ex = run_of(receiver.url(case), n)
            futures.append((case, ex.execution_id, c.start(ex, Stop())))
        for case, run, future in futures:
            outcomes[case].append((run, future.result(timeout=30)))
        time.sleep(0.12)
    for case in cases:
        got = set(receiver.runs(case))
        succeeded = {run for run, r in outcomes[case] if r.status is OutcomeStatus.succeeded}
        assert succeeded <= got, f"{case}: {len(succeeded - got)} runs succeeded undelivered"
        assert succeeded == {run for run, _ in outcomes[case]}, (case, outcomes[case])
