"""`ApiClient`, the tenant's SDK (kadence/api_client.py), against a live stack: a job read with
its version and updated without guessing one, every page listed, and every control a tenant has
(trigger and wait, runs and history, pause, resume, next, backfill, cancel, dead letters and
their replay, delete), each checked by what it changed. Refusals raise the `ApiError` subclass
for their status with the API's reason; input the API would refuse with 422 is refused before
sending, by the same models."""

from __future__ import annotations

import socket
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from kadence.api_client import ApiClient, RunTimeoutError
from kadence.api_errors import (
    ApiError,
    ConflictError,
    InvalidRequestError,
    NotAuthenticatedError,
    NotFoundError,
    UnreachableError,
)
from tests.api.conftest import TOKENS, Api

pytestmark = [pytest.mark.kafka]


def test_read_a_job_update_it_and_list_every_page(api: Api) -> None:
    with ApiClient(api.url, TOKENS["acme"]) as sdk:
        made = sdk.create("sdk-a", api.job("0 6 * * *"))
        assert (made["job_id"], made["version"]) == ("sdk-a", 1)
        job = sdk.job("sdk-a")
        assert job["version"] == 1 and job["state"] == "active"
        assert job["definition"]["schedule"]["expression"] == "0 6 * * *"
        updated = sdk.update("sdk-a", {**api.job("0 7 * * *"), "description": "later"})
        assert updated["version"] == 2  # the API took the current version and added one
        assert sdk.job("sdk-a")["definition"]["description"] == "later"
        for i in range(4):
            sdk.create(f"sdk-page-{i}", api.job())
        listed = [j["job_id"] for j in sdk.jobs(page=2)]  # three pages and an empty one
        assert {"sdk-a", "sdk-page-0", "sdk-page-3"} <= set(listed)
        assert len(listed) == len(set(listed)) >= 5
        with pytest.raises(NotFoundError) as missing:
            sdk.job("no-such-job")
        assert (missing.value.status, missing.value.exit_code) == (404, 4)
        assert "no job acme/no-such-job" in missing.value.reason
        with pytest.raises(ConflictError) as exists:
            sdk.create("sdk-a", api.job())
        assert exists.value.status == 409
        with pytest.raises(InvalidRequestError) as bad:
            sdk.update("sdk-a", api.job("99 * * * *"))
        assert bad.value.status == 422 and "schedule" in bad.value.reason
    with ApiClient(api.url, TOKENS["globex"]) as other, pytest.raises(NotFoundError) as hidden:
        other.job("sdk-a")  # another tenant's job does not exist for it
    assert hidden.value.status == 404


def test_trigger_waits_for_the_run_which_runs_and_history_then_show(api: Api) -> None:
    with ApiClient(api.url, TOKENS["acme"]) as sdk:
        sdk.create("sdk-run", api.job(path="/ok"))
        got = sdk.trigger("sdk-run", payload={"n": 1}, request_id="sdk-r1", wait_s=30)
        eid = got["execution_id"]
        assert eid == "acme/sdk-run@manual:sdk-r1"
        run = got["run"]
        assert (run["execution_id"], run["status"], run["attempts"]) == (eid, "succeeded", 1)
        assert run["started_at"] is not None and run["lateness_s"] >= 0
        hit = [h for h in api.target.seen("/ok") if h.headers["idempotency-key"] == eid]
        assert [h.body for h in hit] == [b'{"n":1}']  # the trigger's payload, called once
        assert [r["execution_id"] for r in sdk.runs("sdk-run")] == [eid]
        outcomes = [e for e in sdk.history("sdk-run") if e["kind"] == "outcome"]
        assert [(e["execution_id"], e["status"]) for e in outcomes] == [(eid, "succeeded")]
        assert sdk.trigger("sdk-run", request_id="sdk-r1")["execution_id"] == eid  # idempotent
        assert sdk.next("sdk-run", n=3) == sorted(sdk.next("sdk-run", n=3))
        assert len(sdk.next("sdk-run", n=3)) == 3
        sdk.create("sdk-slow", api.job(path="/slow?s=30", timeout_ms=60_000))
        with pytest.raises(RunTimeoutError) as late:
            sdk.trigger("sdk-slow", request_id="slow-1", wait_s=1)
        assert "not finished after 1 s" in late.value.reason


def test_pause_resume_and_delete(api: Api) -> None:
    with ApiClient(api.url, TOKENS["acme"]) as sdk:
        sdk.create("sdk-pause", api.job("0 * * * *"))
        accepted = sdk.pause("sdk-pause", reason="ticket 7", request_id="p-1")
        assert (accepted["request_id"], accepted["accepted"]) == ("p-1", True)
        paused = _until(api, lambda: _state(sdk, "sdk-pause", "paused"), "paused")
        assert paused["paused_reason"] == "ticket 7" and paused["next_runs"] == []
        sdk.resume("sdk-pause", reason="fixed")
        resumed = _until(api, lambda: _state(sdk, "sdk-pause", "active"), "resumed")
        assert resumed["next_runs"]
        decisions = [e.get("reason") for e in sdk.history("sdk-pause") if e["kind"] == "decision"]
        assert {"ticket 7", "fixed"} <= set(decisions), decisions
        sdk.delete("sdk-pause")
        with pytest.raises(NotFoundError):
            sdk.job("sdk-pause")
        with pytest.raises(NotFoundError):
            sdk.pause("sdk-pause")


def test_backfill_dry_run_then_run_and_its_progress(api: Api) -> None:
    with ApiClient(api.url, TOKENS["acme"]) as sdk:
        sdk.create("sdk-hourly", api.job("0 * * * *"))
        end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
        start = end - timedelta(hours=3)
        dry = sdk.backfill("sdk-hourly", start, end)
        planned = sorted(o["execution_id"] for o in dry["occurrences"])
        assert dry["dry_run"] is True and len(planned) == 3
        real = sdk.backfill("sdk-hourly", start, end, run=True, request_id="bf-1")
        assert (real["dry_run"], real["request_id"]) == (False, "bf-1")
        done = _until(api, lambda: _done(sdk, "sdk-hourly", "bf-1"), "the backfill's progress")
        assert done["fired"] == 3
        ran = _until(
            api,
            lambda: (
                sorted(
                    r["execution_id"] for r in sdk.runs("sdk-hourly") if r["status"] == "succeeded"
                )
                == planned
            ),
            "the backfilled runs",
        )
        assert ran is True


def test_cancel_a_run_in_flight(api: Api) -> None:
    with ApiClient(api.url, TOKENS["acme"]) as sdk:
        sdk.create("sdk-cancel", api.job(path="/slow?s=30", timeout_ms=60_000))
        eid = sdk.trigger("sdk-cancel")["execution_id"]
        api.wait(
            lambda: any(h.headers["idempotency-key"] == eid for h in api.target.seen()),
            what="the run to start",
        )
        assert sdk.cancel("sdk-cancel", eid, reason="not needed")["accepted"] is True
        run = sdk.wait_run("sdk-cancel", eid, 30)
        assert (run["execution_id"], run["status"]) == (eid, "cancelled")


def test_dead_letters_listed_and_replayed(api: Api) -> None:
    with ApiClient(api.url, TOKENS["acme"]) as sdk:
        sdk.create("sdk-fail", api.job(path="/fail"))
        run = sdk.trigger("sdk-fail", request_id="f-1", wait_s=30)["run"]
        assert run["status"] == "dead_lettered" and "503" in str(run["last_error"])
        eid = run["execution_id"]
        letters = list(sdk.dead_letters(job_id="sdk-fail"))
        assert [(d["execution_id"], d["state"]) for d in letters] == [(eid, "dead")]
        assert list(sdk.dead_letters(job_id="sdk-fail", state="replayed")) == []
        assert sdk.replay(eid)["accepted"] is True
        again = _until(
            api,
            lambda: [
                d
                for d in sdk.dead_letters(job_id="sdk-fail")
                if d["replays"] == 1 and d["deaths"] == 2
            ],
            "the replayed letter dead again (the target still fails)",
        )
        assert [d["execution_id"] for d in again] == [eid]
        calls = [h for h in api.target.seen("/fail") if h.headers["idempotency-key"] == eid]
        assert len(calls) == 2  # the run and its replay, under one key
    with ApiClient(api.url, TOKENS["globex"]) as other:
        assert list(other.dead_letters(job_id="sdk-fail")) == []
        with pytest.raises(NotFoundError):
            other.replay(eid)


def test_connections_put_rotated_listed_and_deleted(api: Api) -> None:
    secret = {"kind": "bearer", "token": "sdk-bearer-token-1"}
    with ApiClient(api.url, TOKENS["acme"]) as sdk:
        made = sdk.put_connection("sdk-conn", secret)
        assert (made["name"], made["kind"], made["version"]) == ("sdk-conn", "bearer", 1)
        rotated = sdk.put_connection("sdk-conn", {**secret, "token": "sdk-bearer-token-2"})
        assert rotated["version"] == 2 and rotated["fingerprint"] != made["fingerprint"]
        assert sdk.connection("sdk-conn")["version"] == 2
        listed = sdk.connections()
        assert "sdk-conn" in [c["name"] for c in listed]
        assert "sdk-bearer-token" not in str(listed)  # no value is ever shown
        sdk.delete_connection("sdk-conn")
        with pytest.raises(NotFoundError):
            sdk.connection("sdk-conn")


def test_refusals_are_typed_with_status_and_reason(api: Api) -> None:
    with ApiClient(api.url, "not-a-token") as stranger, pytest.raises(NotAuthenticatedError) as e:
        stranger.job("sdk-a")
    assert (e.value.status, e.value.exit_code) == (401, 5)
    with socket.socket() as bound:  # bound, never listening: a connection is refused
        bound.bind(("127.0.0.1", 0))
        nowhere = ApiClient(f"http://127.0.0.1:{bound.getsockname()[1]}", TOKENS["acme"])
        with nowhere, pytest.raises(UnreachableError) as unreachable:
            list(nowhere.jobs())
    assert unreachable.value.status == 0 and "cannot reach the API" in unreachable.value.reason


NOW = datetime(2026, 12, 1, tzinfo=UTC)
HOSTILE: dict[str, tuple[Callable[[ApiClient], Any], str, str, dict[str, Any]]] = {
    # name: (the client's call, the same request sent raw: method, path, json body)
    "job id with a newline": (lambda c: c.pause("job\n"), "POST", "/v1/jobs/job%0A/pause", {}),
    "job id leading dot": (lambda c: c.delete(".job"), "DELETE", "/v1/jobs/.job", {}),
    "job id too long": (lambda c: c.resume("j" * 129), "POST", f"/v1/jobs/{'j' * 129}/resume", {}),
    "connection name with a space": (
        lambda c: c.connection("a b"),
        "GET",
        "/v1/connections/a%20b",
        {},
    ),
    "reason too long": (
        lambda c: c.pause("sdk-a", reason="x" * 513),
        "POST",
        "/v1/jobs/sdk-a/pause",
        {"reason": "x" * 513},
    ),
    "request id with a space": (
        lambda c: c.trigger("sdk-a", request_id="a b"),
        "POST",
        "/v1/jobs/sdk-a/trigger",
        {"request_id": "a b"},
    ),
    "payload over 512 KiB": (
        lambda c: c.trigger("sdk-a", payload="x" * (512 * 1024 + 1)),
        "POST",
        "/v1/jobs/sdk-a/trigger",
        {"payload": "x" * (512 * 1024 + 1)},
    ),
    "payload a number": (
        lambda c: c.trigger("sdk-a", payload=5),  # type: ignore[arg-type]
        "POST",
        "/v1/jobs/sdk-a/trigger",
        {"payload": 5},
    ),
    "window without an offset": (
        lambda c: c.backfill("sdk-a", datetime(2026, 1, 1), datetime(2026, 1, 2)),
        "POST",
        "/v1/jobs/sdk-a/backfill",
        {"start": "2026-01-01T00:00:00", "end": "2026-01-02T00:00:00"},
    ),
    "window backwards": (
        lambda c: c.backfill("sdk-a", NOW, NOW - timedelta(hours=1)),
        "POST",
        "/v1/jobs/sdk-a/backfill",
        {"start": NOW.isoformat(), "end": (NOW - timedelta(hours=1)).isoformat()},
    ),
    "too many occurrences": (
        lambda c: c.backfill("sdk-a", NOW - timedelta(hours=1), NOW, max_occurrences=100_001),
        "POST",
        "/v1/jobs/sdk-a/backfill",
        {
            "start": (NOW - timedelta(hours=1)).isoformat(),
            "end": NOW.isoformat(),
            "max_occurrences": 100_001,
        },
    ),
    "runs limit past 500": (
        lambda c: c.runs("sdk-a", limit=501),
        "GET",
        "/v1/jobs/sdk-a/runs?limit=501",
        {},
    ),
    "history limit 0": (
        lambda c: c.history("sdk-a", limit=0),
        "GET",
        "/v1/jobs/sdk-a/history?limit=0",
        {},
    ),
    "next n past 100": (lambda c: c.next("sdk-a", n=101), "GET", "/v1/jobs/sdk-a/next?n=101", {}),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_input_the_api_refuses_is_refused_before_sending(api: Api, case: str) -> None:
    call, method, path, body = HOSTILE[case]
    sent: list[httpx.Request] = []
    with ApiClient(api.url, TOKENS["acme"]) as sdk:
        sdk.http = httpx.Client(
            base_url=api.url,
            transport=httpx.MockTransport(lambda r: _sent(sent, r)),
        )
        with pytest.raises(InvalidRequestError) as refused:
            call(sdk)
    assert sent == []  # nothing left the client
    assert refused.value.status == 422 and refused.value.reason
    raw = api.http.request(method, path, json=body or None, headers=api.as_("acme"))
    assert raw.status_code in (413, 422), (raw.status_code, raw.text)  # the API agrees
    assert refused.value.exit_code == ApiError(raw.status_code, "").exit_code == 3


def _sent(sent: list[httpx.Request], request: httpx.Request) -> httpx.Response:
    sent.append(request)
    return httpx.Response(500)


def _until(api: Api, check: Callable[[], Any], what: str) -> Any:
    return api.wait(check, timeout_s=30, what=what)


def _state(sdk: ApiClient, job_id: str, state: str) -> dict[str, Any] | None:
    job = sdk.job(job_id)
    return job if job["state"] == state else None


def _done(sdk: ApiClient, job_id: str, request_id: str) -> dict[str, Any] | None:
    try:
        progress = sdk.backfill_progress(job_id, request_id)
    except NotFoundError:
        return None  # not stepped yet
    return progress if progress["done"] else None
