"""The API's per-tenant quotas on a fake clock (kadence/quotas.py), and the CLI's backfill
waiting out a 429: no broker, no sleeps."""

from __future__ import annotations

import argparse
import threading
from typing import Any

import pytest
from rich.console import Console

from apps import cli_api
from kadence.api_client import ApiClient, ApiError
from kadence.quotas import BACKFILL, JOBS, TRIGGERS, JobQuota, QuotaExceededError, RateQuota


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def refusal(quota: RateQuota, tenant: str, n: int = 1) -> QuotaExceededError:
    with pytest.raises(QuotaExceededError) as info:
        quota.take(tenant, n)
    return info.value


def test_a_minute_worth_at_once_then_the_rate_and_never_more() -> None:
    clock = Clock()
    triggers = RateQuota(TRIGGERS, 60, clock=clock)
    for _ in range(60):
        triggers.take("acme")
    refused = refusal(triggers, "acme")
    assert (refused.quota, refused.limit, refused.retry_after_s) == (TRIGGERS, 60, 1)
    assert "triggers_per_minute" in refused.message and "60" in refused.message
    clock.now += 1  # one more token
    triggers.take("acme")
    refusal(triggers, "acme")
    clock.now += 3_600  # an idle hour refills one minute's worth, not sixty
    for _ in range(60):
        triggers.take("acme")
    refusal(triggers, "acme")


def test_a_refused_request_spends_nothing_and_retry_after_is_enough() -> None:
    clock = Clock()
    backfill = RateQuota(BACKFILL, 600, clock=clock)  # 10 per second
    backfill.take("acme", 550)
    refused = refusal(backfill, "acme", 100)
    assert refused.retry_after_s == 5  # 50 left, 50 more in 5 s
    clock.now += 4.9
    refusal(backfill, "acme", 100)
    clock.now += 0.1
    backfill.take("acme", 100)


def test_more_than_a_minute_worth_in_one_request_is_refused_without_retry_after() -> None:
    backfill = RateQuota(BACKFILL, 600, clock=Clock())
    refused = refusal(backfill, "acme", 601)
    assert refused.retry_after_s is None
    assert refused.detail() == {
        "msg": refused.message,
        "quota": BACKFILL,
        "limit": 600,
        "retry_after_s": None,
    }
    assert "split it" in refused.message
    backfill.take("acme", 600)  # and it spent nothing


def test_tenants_have_their_own_buckets_and_overrides() -> None:
    clock = Clock()
    triggers = RateQuota(TRIGGERS, 2, {"big": 100, "free": 0}, clock=clock)
    triggers.take("acme", 2)
    refusal(triggers, "acme")
    triggers.take("globex", 2)  # acme's flood costs globex nothing
    triggers.take("big", 100)
    for _ in range(10_000):
        triggers.take("free")  # 0: no limit
    assert refusal(triggers, "big").limit == 100


def test_idle_tenants_do_not_accumulate_buckets() -> None:
    clock = Clock()
    triggers = RateQuota(TRIGGERS, 10, clock=clock)
    for n in range(3_000):
        triggers.take(f"t{n}")
        clock.now += 0.1  # each bucket is full again a minute later
    assert len(triggers._buckets) <= 1_100


def test_the_job_quota_counts_creates_in_flight() -> None:
    jobs = JobQuota(3, {"big": 0})
    with jobs.creating("acme", lambda upto: 1), jobs.creating("acme", lambda upto: 1):
        with pytest.raises(QuotaExceededError) as info, jobs.creating("acme", lambda upto: 1):
            pass  # 1 job + 2 creates in flight: no room for a third
        assert (info.value.quota, info.value.limit) == (JOBS, 3)
    with jobs.creating("acme", lambda upto: 2):
        pass  # the two finished (and are counted in the view now)
    with pytest.raises(QuotaExceededError), jobs.creating("acme", lambda upto: 3):
        pass
    with jobs.creating("big", lambda upto: 10**9):
        pass  # no limit
    assert jobs._creating == {}


def test_concurrent_creates_cannot_pass_the_last_free_place() -> None:
    """Eight creates at once, each counting 4 jobs in the view (none of them visible yet): one
    may pass."""
    jobs = JobQuota(5)
    counted = threading.Barrier(8)  # all have counted before any of them writes
    passed: list[bool] = []

    def count(_upto: int) -> int:
        counted.wait(10)
        return 4

    def create() -> None:
        try:
            with jobs.creating("acme", count):
                passed.append(True)
        except QuotaExceededError:
            passed.append(False)

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert passed.count(True) == 1 and len(passed) == 8


# -- the CLI -----------------------------------------------------------------------------------


class FakeApi(ApiClient):
    """The backfill endpoint of an API whose quota refuses the first real request (429 with
    Retry-After) and any request of more than `limit` occurrences (429 without); the client's
    methods call it."""

    def __init__(self, occurrences: int, limit: int) -> None:
        super().__init__("http://127.0.0.1:9", None)
        self.todo = [
            {
                "execution_id": f"acme/bf@{n}",
                "nominal_at": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}+00:00",
            }
            for n in range(occurrences)
        ]
        self.limit = limit
        self.refused_once = False
        self.accepted: list[int] = []
        self.fired: dict[str, int] = {}
        """request id -> runs: what the scheduler reports as fired for each accepted chunk."""

    def call(self, method: str, path: str, **kw: Any) -> Any:
        if method == "GET":  # progress: every accepted chunk fired in full
            return {"fired": self.fired[path.rsplit("/", 1)[1]], "done": True}
        body = kw["json"]
        if body["dry_run"]:
            return plan(self.todo)
        asked = body["max_occurrences"]
        if asked > self.limit:
            raise ApiError(429, {"msg": "split it", "quota": BACKFILL, "limit": self.limit})
        if not self.refused_once:
            self.refused_once = True
            raise ApiError(429, {"msg": "wait", "quota": BACKFILL, "limit": self.limit}, 7.0)
        self.accepted.append(asked)
        self.fired[body["request_id"]] = min(asked, len(self.todo) - sum(self.fired.values()))
        return {"accepted": True}


def plan(todo: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "occurrences": todo,
        "already_dispatched": [],
        "already_dispatched_count": 0,
        "left_out": 0,
        "truncated": False,
        "resume_at": None,
        "not_reached_from": None,
    }


def test_the_cli_backfill_waits_out_a_429_and_fits_its_chunks_to_the_quota(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    monkeypatch.setattr("apps.cli_api.time.sleep", slept.append)
    api = FakeApi(occurrences=150, limit=40)
    args = argparse.Namespace(
        job_id="bf",
        start="2026-01-01T00:00:00Z",
        end="2026-01-01T01:00:00Z",
        force=False,
        run=True,
        rate=1_000.0,
        json=False,
    )
    out = cli_api._backfill(api, args, Console(quiet=True))
    assert out["sent"] == [o["execution_id"] for o in api.todo]  # every one, once, in order
    assert api.accepted == [40, 40, 40, 40]  # max_occurrences fitted to the quota
    assert out["fired"] == 150  # progress as runs the scheduler fired, summed over the chunks
    assert out["done"] is True
    assert 7.0 in slept  # the Retry-After, waited


def test_the_cli_gives_up_on_other_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("apps.cli_api.time.sleep", lambda _s: None)
    api = FakeApi(occurrences=5, limit=1)
    api.limit = 0  # nothing fits: a 429 without Retry-After that no chunk size helps

    def refuse(method: str, path: str, **kw: Any) -> Any:
        if kw["json"]["dry_run"]:
            return plan(api.todo)
        raise ApiError(429, {"msg": "no", "quota": BACKFILL, "limit": 0})

    api.call = refuse  # type: ignore[method-assign]
    args = argparse.Namespace(
        job_id="bf",
        start="2026-01-01T00:00:00Z",
        end="2026-01-01T01:00:00Z",
        force=False,
        run=True,
        rate=1_000.0,
        json=True,
    )
    with pytest.raises(ApiError) as info:
        cli_api._backfill(api, args, Console(quiet=True))
    assert info.value.exit_code == 7
