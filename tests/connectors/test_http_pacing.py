"""A rate-limited destination's requests are spaced as they are written (connectors/http.py
`_paced`), not only as the worker hands them out: runs handed to the target all at once (what a
stall of the worker's loop between hand-out and write would do) reach the receiver at no more
than the limit plus the burst in any second. Lower bounds only: a slow machine only spaces
them more."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from connectors.http import HttpCaller
from connectors.ssrf import AddressPolicy
from kadence.models import ExecutionRequested, HttpTarget, OutcomeStatus, RateLimit
from kadence.targets import Stop
from testkit.target_server import TargetServer

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def server() -> Iterator[TargetServer]:
    srv = TargetServer(keep_alive=True).start()
    yield srv
    srv.stop()


def run(n: int, url: str, limit: RateLimit | None, timeout_ms: int = 10_000) -> ExecutionRequested:
    return ExecutionRequested(
        execution_id=f"acme/j{n}@2026-12-01T09:00:00.000Z",
        tenant="acme",
        job_id=f"j{n}",
        definition_version=1,
        nominal_at=T,
        due_at=T,
        dispatched_at=T,
        target=HttpTarget(url=url, rate_limit=limit),
        timeout_ms=timeout_ms,
        lease_ttl_ms=30_000,
    )


def test_runs_handed_over_at_once_reach_the_receiver_at_the_limit(server: TargetServer) -> None:
    caller = HttpCaller(AddressPolicy(["127.0.0.0/8"]), {}, warm_s=0)
    limit = RateLimit(per_second=20, burst=5)
    futures = [caller.start(run(n, f"{server.url}/ok", limit), Stop()) for n in range(30)]
    assert {f.result(20).status for f in futures} == {OutcomeStatus.succeeded}
    at = sorted(h.at for h in server.seen("/ok"))
    assert len(at) == 30
    assert at[-1] - at[0] >= (30 - 5) / 20 - 0.05  # 5 at once, then one each 50 ms
    for i, t in enumerate(at):  # no one-second window holds more than the limit and the burst
        assert sum(1 for u in at[i:] if u < t + 1.0) <= 20 + 5


def test_an_unlimited_destination_is_not_paced_and_others_are_not_held(
    server: TargetServer,
) -> None:
    caller = HttpCaller(AddressPolicy(["127.0.0.0/8"]), {}, warm_s=0)
    slow = RateLimit(per_second=1, burst=1)
    held = [caller.start(run(n, f"{server.url}/limited", slow), Stop()) for n in range(3)]
    free = [caller.start(run(10 + n, f"{server.url}/ok", None), Stop()) for n in range(20)]
    done = [f.result(20) for f in [*free, *held]]
    assert {r.status for r in done} == {OutcomeStatus.succeeded}
    slow_at = sorted(h.at for h in server.seen("/limited"))
    assert slow_at[2] - slow_at[0] >= 2 - 0.05  # 1 a second
    # the unlimited runs did not queue behind the limited destination's two seconds
    assert max(h.at for h in server.seen("/ok")) < slow_at[2]


def test_a_run_that_cannot_go_before_its_deadline_times_out_unsent(server: TargetServer) -> None:
    caller = HttpCaller(AddressPolicy(["127.0.0.0/8"]), {}, warm_s=0)
    limit = RateLimit(per_second=0.5, burst=1)
    first = caller.start(run(1, f"{server.url}/ok", limit, timeout_ms=1_000), Stop())
    second = caller.start(run(2, f"{server.url}/ok", limit, timeout_ms=1_000), Stop())
    assert first.result(10).status is OutcomeStatus.succeeded
    late = second.result(10)
    assert late.status is OutcomeStatus.timed_out and late.retryable
    assert len(server.seen("/ok")) == 1
