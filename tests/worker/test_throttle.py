"""Rate limits per destination (kadence/throttle.py): the schedule with an injected clock,
and the inbox serving runs in due order without letting one destination hold up another."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from kadence.clock import datetime_to_ms
from kadence.models import ExecutionRequested, ExecutionRevoked, HttpTarget, KafkaTarget, RateLimit
from kadence.throttle import SWEEP_AT, Lane, Throttle, destination_of
from streams.worker.inbox import Inbox, Item

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
T_MS = datetime_to_ms(T)


def lane(key: str = "a", per_second: float = 10.0, burst: int = 1) -> Lane:
    return Lane(("acme", key), per_second, burst)


def ex(
    n: int,
    *,
    tenant: str = "acme",
    url: str = "https://api.example/hook",
    limit: RateLimit | None = None,
    due_s: float = 0,
) -> ExecutionRequested:
    due = T + timedelta(seconds=due_s)
    return ExecutionRequested(
        execution_id=f"{tenant}/j{n}@2026-12-01T09:00:00.000Z",
        tenant=tenant,
        job_id=f"j{n}",
        definition_version=1,
        nominal_at=due,
        due_at=due,
        dispatched_at=T,
        target=HttpTarget(url=url, rate_limit=limit),
        timeout_ms=1_000,
        lease_ttl_ms=3_000,
    )


# -- the schedule ------------------------------------------------------------------------------


def starts(throttle: Throttle, limit: Lane, asks: list[int]) -> list[int]:
    """When runs asking at `asks` (in that order) start if each waits for the one before it
    and asks again when `take` says (as a destination's queue does)."""
    out, t = [], 0
    for ask in asks:
        t = max(t, ask)
        while (at := throttle.take(limit, t)) > t:
            t = at
        out.append(t)
    return out


def test_runs_asking_at_once_are_spaced_by_the_limit_in_the_order_they_asked() -> None:
    assert starts(Throttle(), lane(per_second=100), [T_MS] * 5) == [T_MS + 10 * i for i in range(5)]


def test_a_refused_start_is_not_taken() -> None:
    throttle = Throttle()
    assert throttle.take(lane(per_second=1), T_MS) == T_MS
    assert [throttle.take(lane(per_second=1), T_MS + 500) for _ in range(3)] == [T_MS + 1_000] * 3
    assert throttle.earliest(lane(per_second=1), T_MS + 500) == T_MS + 1_000
    assert throttle.take(lane(per_second=1), T_MS + 1_000) == T_MS + 1_000


def test_a_burst_starts_at_once_then_the_rest_are_spaced() -> None:
    got = starts(Throttle(), lane(per_second=4, burst=3), [T_MS] * 6)
    assert got == [T_MS, T_MS, T_MS, T_MS + 250, T_MS + 500, T_MS + 750]


def test_a_stalled_asker_gets_at_most_the_burst_at_once() -> None:
    throttle = Throttle()
    limit = lane(per_second=100, burst=5)
    starts(throttle, limit, [T_MS] * 50)
    later = T_MS + 60_000  # nobody asked for a minute: no pile of starts saved up
    got = starts(throttle, limit, [later] * 20)
    assert got.count(later) == 5


def test_a_quiet_destination_gets_its_burst_back() -> None:
    throttle = Throttle()
    starts(throttle, lane(per_second=4, burst=3), [T_MS] * 3)
    later = T_MS + 10_000
    assert starts(throttle, lane(per_second=4, burst=3), [later] * 3) == [later] * 3


def test_destinations_do_not_share_a_schedule() -> None:
    throttle = Throttle()
    throttle.take(lane("slow", per_second=1), T_MS)
    assert throttle.take(lane("slow", per_second=1), T_MS) > T_MS
    assert throttle.take(lane("other", per_second=1), T_MS) == T_MS
    assert throttle.take(Lane(("globex", "slow"), 1, 1), T_MS) == T_MS  # another tenant


def test_the_lowest_limit_wins_while_the_destination_is_busy() -> None:
    throttle = Throttle()
    assert throttle.take(lane(per_second=100), T_MS) == T_MS
    assert throttle.take(lane(per_second=1), T_MS + 10) == T_MS + 10
    assert throttle.take(lane(per_second=100), T_MS + 20) == T_MS + 1_010  # 1/s from now on


def test_idle_schedules_are_forgotten() -> None:
    throttle = Throttle()
    for i in range(SWEEP_AT):
        throttle.take(lane(str(i)), T_MS)
    assert len(throttle) == SWEEP_AT
    throttle.take(lane("new"), T_MS + 1_000)  # the others are quiet by now
    assert len(throttle) == 1


@given(
    per_second=st.floats(0.5, 1_000),
    burst=st.integers(1, 50),
    asks=st.lists(st.integers(0, 5_000), min_size=1, max_size=300),
)
def test_no_window_of_one_second_holds_more_than_the_limit_plus_the_burst(
    per_second: float, burst: int, asks: list[int]
) -> None:
    asked = sorted(T_MS + a for a in asks)
    got = starts(Throttle(), lane(per_second=per_second, burst=burst), asked)
    assert got == sorted(got)  # in the order asked
    assert all(s >= a for s, a in zip(got, asked, strict=True))
    for i, s in enumerate(got):
        in_window = sum(1 for t in got[i:] if t < s + 1_000)
        assert in_window <= per_second + burst


# -- the destination of a run ------------------------------------------------------------------


def test_a_target_without_a_limit_has_no_destination() -> None:
    assert destination_of(ex(1)) is None
    kafka = ex(1).model_copy(update={"target": KafkaTarget(topic="t")})
    assert destination_of(kafka) is None


def test_the_destination_is_tenant_scheme_host_and_port() -> None:
    limit = RateLimit(per_second=5, burst=2)
    a = destination_of(ex(1, url="https://API.example/a?x=1", limit=limit))
    b = destination_of(ex(2, url="https://api.example:443/b", limit=limit))
    assert a is not None and a == b and (a.per_second, a.burst) == (5, 2)
    other_port = destination_of(ex(3, url="https://api.example:8443/a", limit=limit))
    plain = destination_of(ex(4, url="http://api.example/a", limit=limit))
    other_tenant = destination_of(ex(5, tenant="globex", limit=limit))
    keys = {d.key for d in (a, other_port, plain, other_tenant) if d is not None}
    assert len(keys) == 4


def test_a_connections_runs_share_one_destination_whatever_their_urls() -> None:
    limit = RateLimit(per_second=5)

    def via(n: int, url: str, connection: str | None, tenant: str = "acme") -> Lane | None:
        e = ex(n, url=url, limit=limit, tenant=tenant)
        target = HttpTarget(url=url, rate_limit=limit, connection=connection)
        return destination_of(e.model_copy(update={"target": target}))

    a = via(1, "https://eu.api.example/a", "billing")
    b = via(2, "https://us.api.example/b", "billing")
    assert a is not None and a == b
    assert a != via(3, "https://eu.api.example/a", None)  # without it: the host
    assert a != via(4, "https://eu.api.example/a", "billing", tenant="globex")


def test_a_sharded_tenant_splits_its_limit_over_its_shards() -> None:
    limit = RateLimit(per_second=90, burst=10)
    d = destination_of(ex(1, limit=limit), partition=7, shards={"acme": 3})
    assert d is not None and (d.per_second, d.burst) == (30, 3)
    assert d != destination_of(ex(1, limit=limit), partition=8, shards={"acme": 3})


@pytest.mark.parametrize(
    "bad",
    [
        {"per_second": 0},
        {"per_second": -1},
        {"per_second": float("nan")},
        {"per_second": float("inf")},
        {"per_second": 100_001},
        {"per_second": 0.001},
        {"per_second": "many"},
        {"per_second": 1, "burst": 0},
        {"per_second": 1, "burst": 10**9},
        {"per_second": 1, "burst": 1.5},
        {"per_second": 1, "window": 5},
    ],
)
def test_a_hostile_rate_limit_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        HttpTarget.model_validate({"url": "https://api.example/", "rate_limit": bad})


# -- the inbox ---------------------------------------------------------------------------------


def serve(inbox: Inbox, now: int) -> list[Item]:
    return inbox.due(now, 10_000, room=10_000)


def test_runs_over_the_limit_wait_in_due_order_and_none_is_lost() -> None:
    inbox = Inbox()
    limit = RateLimit(per_second=10)
    for n in range(30):
        inbox.add(0, n, ex(n, limit=limit, due_s=n / 1_000))
    started: list[tuple[int, Item]] = []
    now = T_MS
    while len(started) < 30 and now < T_MS + 10_000:
        now += 1
        started += [(now, i) for i in serve(inbox, now)]
    assert [i.offset for _, i in started] == list(range(30))
    times = [t for t, _ in started]
    assert all(b - a >= 100 for a, b in itertools.pairwise(times))
    assert started[0][1].throttled_ms == 0
    assert all(i.throttled_ms > 0 for _, i in started[1:])
    assert committed_offset(inbox) == 30  # every one handed out: the commit may pass them


def committed_offset(inbox: Inbox) -> int:
    return inbox.offsets()[0][0]


def test_a_waiting_run_stays_held_so_the_commit_does_not_pass_it() -> None:
    inbox = Inbox()
    limit = RateLimit(per_second=1)
    for n in range(3):
        inbox.add(0, n, ex(n, limit=limit))
    first = serve(inbox, T_MS)
    assert [i.offset for i in first] == [0]
    assert committed_offset(inbox) == 1  # 1 and 2 wait for their start, still held
    assert inbox.next_due_ms() == T_MS + 1_000  # the worker wakes for the next start
    assert [i.offset for i in serve(inbox, T_MS + 999)] == []
    second = serve(inbox, T_MS + 1_000)
    assert [(i.offset, i.throttled_ms) for i in second] == [(1, 1_000)]


def test_a_throttled_destination_holds_up_neither_another_destination_nor_another_tenant() -> None:
    inbox = Inbox()
    slow = RateLimit(per_second=1)
    for n in range(100):  # the flood comes first on the partition and is due first
        inbox.add(0, n, ex(n, url="https://slow.example/", limit=slow))
    inbox.add(0, 100, ex(100, url="https://fast.example/", due_s=0.001))
    other = ex(101, tenant="globex", url="https://slow.example/", limit=slow, due_s=0.001)
    inbox.add(0, 101, other)
    out = serve(inbox, T_MS + 1)
    assert sorted(i.offset for i in out) == [0, 100, 101]
    assert Counter(i.execution.tenant for i in out) == {"acme": 2, "globex": 1}


def test_throttled_runs_are_not_claimed_ahead_while_they_wait() -> None:
    inbox = Inbox()
    limit = RateLimit(per_second=1)
    for n in range(3):
        inbox.add(0, n, ex(n, limit=limit))
    serve(inbox, T_MS)
    ahead = inbox.upcoming(T_MS + 60_000, 10, lambda _item: True)
    assert ahead == []


def test_a_revoked_waiting_run_never_starts() -> None:
    inbox = Inbox()
    limit = RateLimit(per_second=1)
    for n in range(2):
        inbox.add(0, n, ex(n, limit=limit))
    serve(inbox, T_MS)
    rev = ExecutionRevoked(
        execution_id=ex(1).execution_id,
        tenant="acme",
        job_id="j1",
        definition_version=1,
        due_at=T,
        revoked_at=T,
        reason="paused",
    )
    assert inbox.revoke(rev)
    assert serve(inbox, T_MS + 5_000) == []
    assert committed_offset(inbox) == 2


def test_the_worker_is_told_of_each_throttled_run_as_it_starts() -> None:
    told: list[tuple[str, int]] = []
    inbox = Inbox(on_throttled=lambda tenant, ms: told.append((tenant, ms)))
    limit = RateLimit(per_second=2)
    for n in range(3):
        inbox.add(0, n, ex(n, limit=limit))
    serve(inbox, T_MS)
    assert told == []
    serve(inbox, T_MS + 500)
    serve(inbox, T_MS + 1_000)
    assert told == [("acme", 500), ("acme", 1_000)]


def test_a_stalled_tenant_does_not_start_a_pile_of_waiting_runs_at_once() -> None:
    """The runs wait while their tenant is at its running cap; once it has room, they start at
    the limit (a burst of `burst` at most), not all at once."""
    inbox = Inbox()
    limit = RateLimit(per_second=10, burst=2)
    for n in range(20):
        inbox.add(0, n, ex(n, limit=limit))
    assert len(serve(inbox, T_MS)) == 2
    stalled = inbox.due(T_MS + 1_000, 0, room=0)  # a second with no room at all
    assert stalled == []
    assert len(serve(inbox, T_MS + 1_000)) == 2  # then the burst, not the ten saved up
    assert len(serve(inbox, T_MS + 1_100)) == 1


def test_runs_without_a_limit_never_ask_a_schedule() -> None:
    inbox = Inbox()
    for n in range(50):
        inbox.add(0, n, ex(n))
    assert len(serve(inbox, T_MS)) == 50
    assert len(inbox.lanes.throttle) == 0 and inbox.lanes.waiting == 0
