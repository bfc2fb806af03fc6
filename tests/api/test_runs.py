"""Commands, history, runs and dead letters through the API, against the real stack."""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kadence.models import Decision
from testkit.scheduler_process import executions, history
from tests.api.conftest import Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _history(api: Api, job: str, h: dict[str, str]) -> list[dict[str, Any]]:
    r = api.http.get(f"/v1/jobs/{job}/history", headers=h)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _runs(api: Api, job: str, h: dict[str, str]) -> list[dict[str, Any]]:
    r = api.http.get(f"/v1/jobs/{job}/runs", headers=h)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_trigger_is_idempotent_and_a_failed_runs_error_is_visible(api: Api) -> None:
    h = api.as_("acme")
    assert (
        api.http.post("/v1/jobs/failing", json=api.job(path="/fail"), headers=h).status_code == 201
    )
    first = api.http.post("/v1/jobs/failing/trigger", json={"request_id": "r-1"}, headers=h)
    again = api.http.post("/v1/jobs/failing/trigger", json={"request_id": "r-1"}, headers=h)
    assert first.status_code == again.status_code == 202
    eid = first.json()["execution_id"]
    assert eid == again.json()["execution_id"] == "acme/failing@manual:r-1"
    run = api.wait(
        lambda: next((r for r in _runs(api, "failing", h) if r["status"] == "dead_lettered"), None),
        what="the failed run",
    )
    assert run["execution_id"] == eid
    assert run["attempts"] == 1
    assert "503" in str(run["last_error"])  # the target's answer, not just "failed"
    assert len([x for x in api.target.seen("/fail") if x.headers["idempotency-key"] == eid]) == 1
    events = api.http.get("/v1/jobs/failing/history", headers=h).json()
    assert {"outcome", "dead_letter"} <= {e["kind"] for e in events}
    # the dead-letter queue shows it; a replay runs it again under the same key
    dead = api.http.get("/v1/dead-letters", headers=h).json()
    assert [d["execution_id"] for d in dead if d["job_id"] == "failing"] == [eid]
    assert api.http.get("/v1/dead-letters", headers=api.as_("globex")).json() == []
    r = api.http.post(f"/v1/dead-letters/{eid}/replay", headers=h)
    assert r.status_code == 202, r.text
    api.wait(lambda: len(api.target.seen("/fail")) >= 2, what="the replayed call")
    api.wait(
        lambda: [
            d
            for d in api.http.get("/v1/dead-letters", headers=h).json()
            if d["execution_id"] == eid and d["replays"] == 1 and d["deaths"] == 2
        ],
        what="the dead letter replayed once and (the target still failing) dead again",
    )


def test_a_skipped_occurrence_says_why(api: Api) -> None:
    h = api.as_("acme")
    job = api.job("* * * * * *", path="/slow?s=3", overlap="skip", timeout_ms=10_000)
    assert api.http.post("/v1/jobs/overlapping", json=job, headers=h).status_code == 201
    skipped = api.wait(
        lambda: [r for r in _runs(api, "overlapping", h) if r["status"] == "not_run"],
        timeout_s=40,
        what="a skipped occurrence",
    )
    assert "overlap" in skipped[0]["reason"]
    assert api.http.post("/v1/jobs/overlapping/pause", headers=h).status_code == 202
    api.wait(
        lambda: api.http.get("/v1/jobs/overlapping", headers=h).json()["state"] == "paused",
        what="the paused state",
    )
    assert api.http.get("/v1/jobs/overlapping", headers=h).json()["next_runs"] == []
    succeeded = api.wait(
        lambda: [r for r in _runs(api, "overlapping", h) if r["status"] == "succeeded"],
        what="the run in flight to finish",
    )
    assert succeeded[0]["lateness_s"] is not None
    assert succeeded[0]["started_at"] is not None


def test_backfill_dry_run_lists_exactly_what_the_real_run_dispatches(api: Api) -> None:
    h = api.as_("acme")
    assert api.http.post("/v1/jobs/hourly", json=api.job("0 * * * *"), headers=h).status_code == 201
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    window = {"start": (end - timedelta(hours=5)).isoformat(), "end": end.isoformat()}
    dry = api.http.post("/v1/jobs/hourly/backfill", json=window, headers=h)
    assert dry.status_code == 200, dry.text
    planned = [o["execution_id"] for o in dry.json()["occurrences"]]
    assert len(planned) == 5
    assert dry.json()["dry_run"] is True
    assert "request_id" not in dry.json()
    # The dry run asks the scheduler for its facts with a dry-run Backfill, answered by a
    # `backfill_planned` history record in the transaction that would hold any run it started:
    # the answer came, so had it dispatched anything, that would be on `executions` now.
    facts = [h for h in history(api.settings, 50, timeout_s=3) if h.job_id == "hourly"]
    assert [h.decision for h in facts] == [Decision.backfill_planned]
    assert [e for e in executions(api.settings, 1, timeout_s=3) if e.job_id == "hourly"] == []
    real = api.http.post(
        "/v1/jobs/hourly/backfill", json={**window, "dry_run": False, "request_id": "bf"}, headers=h
    )
    assert real.status_code == 200, real.text
    api.wait(
        lambda: (
            len([x for x in api.target.seen("/ok") if "hourly@" in x.headers["idempotency-key"]])
            >= 5
        ),
        what="the backfilled runs",
    )
    ran = sorted(
        x.headers["idempotency-key"]
        for x in api.target.seen("/ok")
        if "hourly@" in x.headers["idempotency-key"]
    )
    assert ran == sorted(planned)
    # a second dry run knows they went
    again = api.http.post("/v1/jobs/hourly/backfill", json=window, headers=h).json()
    assert again["occurrences"] == []
    assert len(again["already_dispatched"]) == 5


def test_a_missed_window_is_planned_and_run_and_its_progress_counts_runs(api: Api) -> None:
    """Issue 17, items 1-3 and 6: occurrences a pause skipped are what backfill is for. Each is
    shown `not_run` (skipped: paused); the dry run (the scheduler's facts, the scheduler's plan
    function) lists them as runs, not as already dispatched; the real run fires exactly them;
    progress counts runs fired."""
    h = api.as_("acme")
    job = api.job("*/2 * * * * *", missed={"mode": "none"})
    assert api.http.post("/v1/jobs/gappy", json=job, headers=h).status_code == 201
    api.wait(lambda: _runs(api, "gappy", h), what="the first runs")
    paused_at = datetime.now(UTC)
    assert api.http.post("/v1/jobs/gappy/pause", headers=h).status_code == 202
    api.wait(
        lambda: any(e.get("decision") == "paused" for e in _history(api, "gappy", h)),
        what="the pause to be applied",
    )
    time.sleep(7)  # three or four occurrences fall due while paused
    resumed_at = datetime.now(UTC)
    assert api.http.post("/v1/jobs/gappy/resume", headers=h).status_code == 202

    def missed() -> list[str]:
        return [
            r["execution_id"]
            for r in _runs(api, "gappy", h)
            if r["status"] == "not_run" and r["reason"].startswith("the job is paused")
        ]

    gone = api.wait(
        lambda: len(missed()) >= 3 and missed(), timeout_s=60, what="the skipped occurrences"
    )
    window = {"start": paused_at.isoformat(), "end": resumed_at.isoformat()}
    dry = api.http.post("/v1/jobs/gappy/backfill", json=window, headers=h)
    assert dry.status_code == 200, dry.text
    planned = [o["execution_id"] for o in dry.json()["occurrences"]]
    assert set(gone) <= set(planned)  # on main: every one listed as already dispatched
    assert not set(gone) & {o["execution_id"] for o in dry.json()["already_dispatched"]}
    assert dry.json()["left_out"] == 0
    real = api.http.post(
        "/v1/jobs/gappy/backfill",
        json={**window, "dry_run": False, "request_id": "gap-1"},
        headers=h,
    )
    assert real.status_code == 200, real.text
    done = api.wait(
        lambda: (
            (p := api.http.get("/v1/jobs/gappy/backfill/gap-1", headers=h)).status_code == 200
            and p.json()["done"]
            and p.json()
        ),
        what="the backfill's last progress record",
    )
    assert done["fired"] == len(planned)
    api.wait(
        lambda: set(planned) <= {x.headers["idempotency-key"] for x in api.target.seen("/ok")},
        what="every planned run at the target",
    )
    other = api.http.get("/v1/jobs/gappy/backfill/gap-1", headers=api.as_("globex"))
    assert other.status_code == 404  # another tenant sees nothing of it
    for hostile in ("..%2F..%2Fjobs", "x" * 200, "%00%ff"):  # never reaches the view's paths
        r = api.http.get(f"/v1/jobs/gappy/backfill/{hostile}", headers=h)
        assert r.status_code == 404, (hostile, r.text)


def test_a_triggered_run_s_own_payload_is_the_one_its_retry_and_dead_letter_carry(
    api: Api,
) -> None:
    """Issue 17, item 7: the retry of a run triggered with a payload override sent the job's
    payload, and its dead letter stored the job's payload."""
    h = api.as_("acme")
    job = api.job(path="/fail", payload="the job's")
    job["retry"] = {"max_attempts": 2, "initial_backoff_ms": 1_000, "jitter": "none"}
    assert api.http.post("/v1/jobs/own-payload", json=job, headers=h).status_code == 201
    r = api.http.post("/v1/jobs/own-payload/trigger", json={"payload": {"run": "mine"}}, headers=h)
    assert r.status_code == 202, r.text
    eid = r.json()["execution_id"]
    hits = api.wait(
        lambda: (
            len(got := [x for x in api.target.seen("/fail") if x.headers["idempotency-key"] == eid])
            >= 2
            and got
        ),
        what="both attempts at the target",
    )
    assert [x.body for x in hits] == [b'{"run":"mine"}'] * 2
    dead = api.wait(
        lambda: next(
            (
                d
                for d in api.http.get("/v1/dead-letters", headers=h).json()
                if d["execution_id"] == eid
            ),
            None,
        ),
        what="the dead letter",
    )
    assert dead["attempt"] == 2


def test_cancel_a_run_in_flight(api: Api) -> None:
    h = api.as_("acme")
    job = api.job(path="/slow?s=30", timeout_ms=60_000)
    assert api.http.post("/v1/jobs/slowpoke", json=job, headers=h).status_code == 201
    eid = api.http.post("/v1/jobs/slowpoke/trigger", headers=h).json()["execution_id"]
    api.wait(
        lambda: any(x.headers["idempotency-key"] == eid for x in api.target.seen()),
        what="the run to start",
    )
    r = api.http.post(f"/v1/jobs/slowpoke/runs/{eid}/cancel", json={"reason": "test"}, headers=h)
    assert r.status_code == 202, r.text
    run = api.wait(
        lambda: next((x for x in _runs(api, "slowpoke", h) if x["status"] == "cancelled"), None),
        timeout_s=30,
        what="the cancelled outcome",
    )
    assert run["execution_id"] == eid


def test_a_concurrency_group_runs_one_run_at_a_time_whatever_started_it(api: Api) -> None:
    """Issue 17, item 4: in a group, `allow` fired while another job of the group ran, and
    retries, triggers, replays and backfills ignored the group. Four jobs of one group, each
    way a run can start; the target sees no two of their runs at once, and every one runs."""
    h = api.as_("acme")
    group: dict[str, Any] = {"concurrency_key": "live", "timeout_ms": 20_000}
    jobs = {
        "grp-tick": api.job("*/2 * * * * *", path="/slow?s=0.6", overlap="allow", **group),
        "grp-busy": api.job("* * * * * *", path="/slow?s=0.3", overlap="buffer_one", **group),
        "grp-flaky": api.job(
            path="/flaky",
            retry={"max_attempts": 2, "initial_backoff_ms": 100, "jitter": "none"},
            **group,
        ),
        "grp-dead": api.job(path="/fail", **group),
    }

    def ours() -> list[Any]:
        return [
            x for x in api.target.seen() if x.headers["idempotency-key"].startswith("acme/grp-")
        ]

    created = datetime.now(UTC)
    try:
        for job_id, spec in jobs.items():
            r = api.http.post(f"/v1/jobs/{job_id}", json=spec, headers=h)
            assert r.status_code == 201, r.text
        flaky = api.http.post("/v1/jobs/grp-flaky/trigger", headers=h).json()["execution_id"]
        dead = api.http.post("/v1/jobs/grp-dead/trigger", headers=h).json()["execution_id"]
        window = {
            "start": (created - timedelta(seconds=7)).isoformat(),
            "end": (created - timedelta(seconds=1)).isoformat(),
            "dry_run": False,
            "request_id": "grp-back",
        }
        r = api.http.post("/v1/jobs/grp-tick/backfill", json=window, headers=h)
        assert r.status_code == 200, r.text
        api.wait(
            lambda: any(d["execution_id"] == dead for d in api.http.get(
                "/v1/dead-letters", headers=h).json()),
            what="the dead letter",
        )  # fmt: skip
        r = api.http.post(f"/v1/dead-letters/{dead}/replay", headers=h)
        assert r.status_code == 202, r.text

        def kinds() -> set[str]:
            seen: set[str] = set()
            for x in ours():
                eid, attempt = x.headers["idempotency-key"], x.headers["kadence-attempt"]
                if eid == flaky:
                    seen.add("manual" if attempt == "1" else "retry")
                elif eid == dead:
                    seen.add("replay" if [y.headers["idempotency-key"] for y in ours()].count(
                        dead) > 1 else "manual")  # fmt: skip
                elif "@" in eid and not eid.startswith("acme/grp-busy"):
                    nominal = datetime.fromisoformat(eid.rpartition("@")[2])
                    seen.add("backfill" if nominal < created else "schedule")
            return seen

        everyone = {"schedule", "manual", "retry", "replay", "backfill"}
        api.wait(lambda: kinds() >= everyone, timeout_s=60, what=f"runs of {everyone}")
    finally:
        for job_id in jobs:
            api.http.delete(f"/v1/jobs/{job_id}", headers=h)
    time.sleep(1)  # the last run (started before the deletes) ends
    # every way a run starts was seen (the wait above): at least six runs, however many more
    # of grp-busy and of the backfill ran before the deletes (the count depends on timing)
    runs = sorted(ours(), key=lambda x: x.at)
    for before, after in itertools.pairwise(runs):
        assert before.done and after.at >= before.done, (
            f"{after.headers['idempotency-key']} started {before.done - after.at:.3f} s before "
            f"{before.headers['idempotency-key']} ended"
        )


def test_a_deleted_job_s_dead_letter_replays_from_the_topic(api: Api) -> None:
    """Issue 17, item 7: a deleted job's dead letters could not be replayed (the scheduler
    forgot them with the job); the API reads the letter back from the dead-letter topic and
    the scheduler runs it once, as the letter holds it."""
    h = api.as_("acme")
    assert (
        api.http.post("/v1/jobs/doomed", json=api.job(path="/fail"), headers=h).status_code == 201
    )
    r = api.http.post("/v1/jobs/doomed/trigger", json={"payload": "last words"}, headers=h)
    eid = r.json()["execution_id"]
    api.wait(
        lambda: any(d["execution_id"] == eid for d in api.http.get(
            "/v1/dead-letters", headers=h).json()),
        what="the dead letter",
    )  # fmt: skip
    assert api.http.delete("/v1/jobs/doomed", headers=h).status_code == 204
    r = api.http.post(f"/v1/dead-letters/{eid}/replay", headers=api.as_("globex"))
    assert r.status_code == 404, r.text  # another tenant's letter does not exist for it
    r = api.http.post(f"/v1/dead-letters/{eid}/replay", headers=h)
    assert r.status_code == 202, r.text  # on main: 404, the job is gone
    hits = api.wait(
        lambda: (
            len(got := [x for x in api.target.seen("/fail") if x.headers["idempotency-key"] == eid])
            >= 2
            and got
        ),
        what="the replayed run at the target",
    )
    assert [x.body for x in hits] == [b"last words"] * 2  # the run's own payload, both times
    letter = api.wait(
        lambda: next(
            (
                d
                for d in api.http.get("/v1/dead-letters", headers=h).json()
                if d["execution_id"] == eid and d["replays"] >= 1 and d["state"] == "dead"
            ),
            None,
        ),
        what="the dead letter counted as replayed, and dead again once the replay failed",
    )
    assert letter["replays"] == 1  # the deleted job's replay ran once, was not retried, ended
