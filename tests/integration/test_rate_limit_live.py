"""A destination's rate limit through the real processes (scheduler, reaper, worker) and the
real broker: 2 000 one-off runs due at the same second against one receiver limited to 200 per
second, counted per second where they arrive, while another tenant's run due then starts on
time. (The 10 000-run burst at 100/s is `python -m bench.rate_limit`.)"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kadence.client import KadenceClient
from kadence.models import HttpTarget, OutcomeStatus, RateLimit, ScheduleDefinition
from kadence.settings import KadenceSettings
from testkit.stack import Stack, execution_settings, outcomes, until
from testkit.target_server import TargetServer

RUNS = 2_000
LIMIT = RateLimit(per_second=200, burst=10)
JITTER = 0.05
"""Of the limit, what one second of starts may hold beyond the limit and the burst: a start is
stamped a turn after the limiter's decision. (Before a rate-limited destination stopped being
warmed, the warmer opened a connection per run due in the burst's second and the receiver
stalled under them: 284 in one second while the worker started 199.)"""
CONNECTIONS = 50
"""Of the receiver, how many connections the worker may open for the burst: a few for its
requests in flight and the pool it warms (15 seen), never one per run due as the warmer did."""


@pytest.fixture
def server() -> Iterator[TargetServer]:
    srv = TargetServer(keep_alive=True).start()
    yield srv
    srv.stop()


def job(
    tenant: str, n: int, url: str, run_at: datetime, limit: RateLimit | None
) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": tenant,
            "job_id": f"j{n}",
            "version": 1,
            "schedule": {"kind": "once", "run_at": run_at},
            "target": HttpTarget(url=url, rate_limit=limit),
            "timeout_ms": 5_000,
        }
    )


def per_second(times: list[float]) -> Counter[int]:
    first = min(times)
    return Counter(math.floor(t - first) for t in times)


@pytest.mark.slow
def test_a_burst_against_a_limited_destination_arrives_at_the_limit_and_others_on_time(
    settings: KadenceSettings, server: TargetServer, tmp_path: Path
) -> None:
    xsettings = execution_settings(settings)
    stack = Stack.start(xsettings, tmp_path)
    try:
        run_at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=15)
        limited = [job("acme", n, f"{server.url}/limited", run_at, LIMIT) for n in range(RUNS)]
        with KadenceClient(xsettings) as client:
            client.put_many(limited)
            client.put_many([job("globex", 0, f"{server.url}/other", run_at, None)])
        server.wait(RUNS, "/limited", timeout_s=120)
        until(lambda: len(outcomes(xsettings, RUNS + 1)) >= RUNS + 1, 60, "every outcome")
        metrics = stack.metrics(stack.worker_metrics)
    finally:
        stack.stop()
    hits = server.seen("/limited")
    ids = [h.headers["kadence-execution-id"] for h in hits]
    assert len(ids) == RUNS == len(set(ids))  # none lost, none twice
    counts = per_second([h.at for h in hits])
    done = outcomes(xsettings, RUNS + 1)
    started = per_second([o.started_at.timestamp() for o in done if o.tenant == "acme"])
    figures = (
        f"per second at the receiver {sorted(counts.items())}, started {sorted(started.items())}"
    )
    ceiling = LIMIT.per_second + LIMIT.burst + JITTER * LIMIT.per_second
    # a run's start is stamped as it is handed to its target (streams/worker/loop.py), a turn
    # after the limiter let it go at the turn's time: a second of stamps may hold a few more
    # than a second of the limiter's decisions (212 seen once in CI)
    assert max(started.values()) <= ceiling, figures
    # a second at the receiver holds the requests that reached it then, whenever they started:
    # with the receiver slowed (CI's two cores shared by the stack, the broker and another
    # test), 36 requests started in one second reached it in the next (174 then 236, every
    # second of starts at most 210). It may hold no more than the limit lets start over the
    # span of its requests' starts, or over one second when they span less (the ceiling above);
    # a receiver stalled by Kadence's own connections (the warmer once opened one per run due)
    # is held by the count of connections below
    start_of = {o.execution_id: o.started_at.timestamp() for o in done if o.tenant == "acme"}
    first = min(h.at for h in hits)
    by_second: dict[int, list[float]] = {}
    for h in hits:
        by_second.setdefault(math.floor(h.at - first), []).append(
            start_of[h.headers["kadence-execution-id"]]
        )
    for second, starts in sorted(by_second.items()):
        span = max(starts) - min(starts)
        allowed = LIMIT.per_second * max(span, 1.0) + LIMIT.burst + JITTER * LIMIT.per_second
        assert len(starts) <= allowed, f"second {second}: span {span:.3f} s; {figures}"
    assert server.connections <= CONNECTIONS, f"{server.connections} connections; {figures}"
    spread = max(h.at for h in hits) - min(h.at for h in hits)
    assert spread >= (RUNS - LIMIT.burst) / LIMIT.per_second * 0.95  # held back, not failed
    [other] = server.seen("/other")
    assert other.at - run_at.timestamp() < 2.0  # the other tenant's run started on time
    assert {o.status for o in done} == {OutcomeStatus.succeeded}
    waited = sorted(o.throttled_ms for o in done if o.tenant == "acme")
    assert waited[-1] >= 1_000 * (RUNS - LIMIT.burst) / LIMIT.per_second * 0.9
    assert [o.throttled_ms for o in done if o.tenant == "globex"] == [0]
    assert f'kadence_worker_throttled_total{{tenant="acme"}} {RUNS - LIMIT.burst}.0' in metrics
