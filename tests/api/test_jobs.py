"""Jobs CRUD, validation and tenancy through the API, against the real stack."""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from kadence.client import KadenceClient
from kadence.models import ScheduleDefinition
from kadence.partitioning import partition_for
from tests.api.conftest import Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_create_read_list_update_delete(api: Api) -> None:
    h = api.as_("acme")
    r = api.http.post("/v1/jobs/crud", json=api.job(), headers=h)
    assert r.status_code == 201, r.text
    job = r.json()
    assert (job["job_id"], job["version"], job["state"]) == ("crud", 1, "active")
    assert job["next_runs"] and job["next_runs"][0].endswith("-01-01T00:00:00Z")
    assert api.http.post("/v1/jobs/crud", json=api.job(), headers=h).status_code == 409
    assert "crud" in [j["job_id"] for j in api.http.get("/v1/jobs", headers=h).json()]
    r = api.http.put("/v1/jobs/crud", json=api.job("0 12 * * *"), headers=h)
    assert r.status_code == 200, r.text
    assert (r.json()["version"], r.json()["schedule"]["expression"]) == (2, "0 12 * * *")
    assert api.http.get("/v1/jobs/crud/next?n=3", headers=h).json()[0].endswith("T12:00:00Z")
    assert api.http.delete("/v1/jobs/crud", headers=h).status_code == 204
    assert api.http.get("/v1/jobs/crud", headers=h).status_code == 404


def test_quartz_month_days_run_on_the_day_they_name_and_a_bad_one_is_refused(api: Api) -> None:
    h = api.as_("acme")
    lw = {"kind": "cron", "expression": "0 18 LW * *", "timezone": "Europe/Paris"}
    r = api.http.post("/v1/jobs/month-end", json={**api.job(), "schedule": lw}, headers=h)
    assert r.status_code == 201, r.text
    runs = api.http.get("/v1/jobs/month-end/next?n=6", headers=h).json()
    for run in runs:
        local = datetime.fromisoformat(run).astimezone(ZoneInfo("Europe/Paris"))
        after = local.date() + timedelta(days=1)
        weekdays_left = [after + timedelta(days=d) for d in range(7)]
        assert local.hour == 18 and local.weekday() < 5, run
        assert all(d.weekday() >= 5 for d in weekdays_left if d.month == local.month), (
            f"{run} is not the month's last weekday"
        )
    assert len({run[:7] for run in runs}) == 6  # one per month
    bad = {**lw, "expression": "0 18 L-31 * *"}
    r = api.http.post("/v1/jobs/month-end-bad", json={**api.job(), "schedule": bad}, headers=h)
    assert r.status_code == 422 and "L-31" in r.text and "0 to 30" in r.text


def test_validation_errors_name_the_field(api: Api) -> None:
    h = api.as_("acme")
    r = api.http.post("/v1/jobs/bad", json=api.job("61 * * * *"), headers=h)
    assert r.status_code == 422
    assert "schedule" in r.text and "61" in r.text
    r = api.http.post(
        "/v1/jobs/bad",
        json={
            **api.job(),
            "schedule": {"kind": "cron", "expression": "* * * * *", "timezone": "Mars/Olympus"},
        },
        headers=h,
    )
    assert r.status_code == 422
    assert "Mars/Olympus" in r.text
    r = api.http.post("/v1/jobs/bad", json={**api.job(), "timeout_ms": 5}, headers=h)
    assert r.status_code == 422
    assert "timeout_ms" in r.text
    assert api.http.post("/v1/jobs/bad%20id", json=api.job(), headers=h).status_code == 422
    big = "x" * (api.settings.max_payload_bytes + 1)
    r = api.http.post("/v1/jobs/big", json={**api.job(), "payload": big}, headers=h)
    assert r.status_code in (413, 422)
    assert "payload" in r.text
    assert api.http.get("/v1/jobs/bad", headers=h).status_code == 404  # nothing was written


def test_unauthenticated_requests_get_401(api: Api) -> None:
    assert api.http.get("/v1/jobs").status_code == 401
    r = api.http.get("/v1/jobs", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert api.http.post("/v1/jobs/x/trigger").status_code == 401


def test_tenants_never_see_or_change_each_others_jobs(api: Api) -> None:
    a, b = api.as_("acme"), api.as_("globex")
    assert api.http.post("/v1/jobs/secret", json=api.job(), headers=a).status_code == 201
    assert "secret" not in [j["job_id"] for j in api.http.get("/v1/jobs", headers=b).json()]
    for method, path in [
        ("get", "/v1/jobs/secret"),
        ("put", "/v1/jobs/secret"),
        ("delete", "/v1/jobs/secret"),
        ("get", "/v1/jobs/secret/history"),
        ("get", "/v1/jobs/secret/runs"),
        ("get", "/v1/jobs/secret/next"),
        ("post", "/v1/jobs/secret/pause"),
        ("post", "/v1/jobs/secret/resume"),
        ("post", "/v1/jobs/secret/trigger"),
        ("post", "/v1/jobs/secret/runs/acme/secret@manual:x/cancel"),
        ("post", "/v1/dead-letters/acme/secret@manual:x/replay"),
    ]:
        kw = {"json": api.job()} if method == "put" else {}
        r = getattr(api.http, method)(path, headers=b, **kw)
        assert r.status_code == 404, (method, path, r.status_code, r.text)
    r = api.http.post(
        "/v1/jobs/secret/backfill",
        json={"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"},
        headers=b,
    )
    assert r.status_code == 404
    # still there, unchanged, for its owner; an admin sees it by naming the tenant
    assert api.http.get("/v1/jobs/secret", headers=a).json()["version"] == 1
    admin = {**api.as_("*"), "X-Kadence-Tenant": "acme"}
    assert api.http.get("/v1/jobs/secret", headers=admin).status_code == 200
    assert api.http.get("/v1/jobs/secret", headers=api.as_("*")).status_code == 422


def test_a_binary_payload_from_the_sdk_freezes_no_read(api: Api) -> None:
    """The view used to die applying a definition whose payload is not UTF-8 (the SDK takes
    bytes), and every read and write through the API hung on it from then on."""
    binary = b"\xff\xfe\x00\x80 not text"
    with KadenceClient(api.settings) as client:
        client.put(
            ScheduleDefinition.model_validate(
                {
                    "tenant": "acme",
                    "job_id": "binary",
                    "version": 1,
                    "schedule": {"kind": "cron", "expression": "0 0 1 1 *"},
                    "target": {"kind": "http", "url": f"{api.target.url}/ok"},
                    "payload": binary,
                }
            )
        )
    h = api.as_("acme")
    shown = api.wait(
        lambda: (r := api.http.get("/v1/jobs/binary", headers=h)).status_code == 200 and r.json(),
        what="the binary job in the view",
    )
    assert shown["definition"]["payload_encoding"] == "base64"
    assert base64.b64decode(shown["definition"]["payload"]) == binary
    r = api.http.post("/v1/jobs/after-binary", json=api.job(), headers=h)  # the view still reads
    assert r.status_code == 201, r.text
    assert api.http.get("/readyz").status_code == 200


def test_a_write_that_loses_a_race_answers_409_and_the_view_shows_the_winner(api: Api) -> None:
    """Two writers PUT the same version at once: the scheduler keeps the first record and
    refuses the second as stale. The view used to show the second and both callers got 200."""
    h = api.as_("acme")
    assert api.http.post("/v1/jobs/race", json=api.job(), headers=h).status_code == 201
    client = api.http.app.state.services.client  # type: ignore[attr-defined]
    real_put = client.put

    def racing_put(definition: ScheduleDefinition) -> Any:
        rival = definition.model_copy(update={"description": "the other writer"})
        real_put(rival)  # the other writer's record of the same version lands first
        return real_put(definition)

    client.put = racing_put
    try:
        r = api.http.put("/v1/jobs/race", json=api.job(description="mine"), headers=h)
    finally:
        del client.put
    assert r.status_code == 409, r.text
    assert "version 2 of job race was not applied" in r.text and "not newer than 2" in r.text
    shown = api.http.get("/v1/jobs/race", headers=h).json()
    assert (shown["version"], shown["definition"]["description"]) == (2, "the other writer")
    r = api.http.put("/v1/jobs/race", json=api.job(description="mine, again"), headers=h)
    assert r.status_code == 200, r.text  # a fresh write (version 3) goes through
    assert r.json()["definition"]["description"] == "mine, again"


def test_a_new_concurrency_key_moves_the_job_and_a_delete_without_it_removes_it(
    api: Api,
) -> None:
    """Issue 17, item 5: after an update that changes the concurrency key (another scheduler
    partition), the old copy kept firing beside the new one, and a delete without the key
    (or with the old one) could not reach the new one."""
    h = api.as_("acme")
    parts = api.settings.partitions
    home = partition_for("acme/mover", parts)
    key = next(f"m{i}" for i in range(100) if partition_for(f"acme/~m{i}", parts) != home)
    assert (
        api.http.post("/v1/jobs/mover", json=api.job("* * * * * *"), headers=h).status_code == 201
    )
    api.wait(lambda: _hits(api, "acme/mover@"), what="runs of the job")
    r = api.http.put("/v1/jobs/mover", json=api.job("* * * * * *", concurrency_key=key), headers=h)
    assert r.status_code == 200, r.text
    moved = api.wait(
        lambda: next(
            (
                e
                for e in api.http.get("/v1/jobs/mover/history", headers=h).json()
                if e.get("decision") == "deleted" and "job moved" in (e.get("reason") or "")
            ),
            None,
        ),
        what="the old copy's removal",
    )
    after = datetime.fromisoformat(moved["at"].replace("Z", "+00:00")) + timedelta(seconds=1)
    time.sleep(4)
    later = [
        x
        for x in _hits(api, "acme/mover@")
        if datetime.fromisoformat(x.headers["idempotency-key"].rpartition("@")[2]) > after
    ]
    assert len(later) >= 2  # it still runs, from its new partition
    runs = Counter((x.headers["idempotency-key"], x.headers["kadence-delivery"]) for x in later)
    assert max(runs.values()) == 1, "an occurrence ran from two copies"
    with KadenceClient(api.settings) as client:
        client.delete("acme", "mover")  # without the key, as a user who forgot it would
    api.wait(
        lambda: api.http.get("/v1/jobs/mover", headers=h).status_code == 404,
        what="the job gone from the view",
    )
    time.sleep(1.5)  # a run dispatched just before the delete may still arrive
    count = len(_hits(api, "acme/mover@"))
    time.sleep(3)
    assert len(_hits(api, "acme/mover@")) == count, "the job still fires after its delete"


def _hits(api: Api, prefix: str) -> list[Any]:
    return [x for x in api.target.seen() if x.headers["idempotency-key"].startswith(prefix)]


def test_a_payload_a_json_kafka_envelope_cannot_hold_is_refused_at_the_api(api: Api) -> None:
    """Issue 43, item 7. A request body holds at most 512 KiB + 64 KiB, so it cannot carry
    512 KiB of control characters (6 bytes each in JSON); 512 KiB of `é` it can, sent as UTF-8:
    3 times its size as the envelope's ASCII JSON string. Refused for a `"format": "json"`
    target, as a definition and as a trigger's payload, naming its size; taken for Avro."""
    h = {**api.as_("acme"), "content-type": "application/json"}
    hostile = "é" * (256 * 1024)  # 512 KiB of UTF-8

    def body(fmt: str, **kw: Any) -> bytes:
        target = {"kind": "kafka", "topic": f"env-{fmt}", "format": fmt}
        return json.dumps(api.job(target=target, **kw), ensure_ascii=False).encode()

    r = api.http.post("/v1/jobs/env-json", content=body("json", payload=hostile), headers=h)
    assert r.status_code == 422, r.text
    assert "payload" in r.text and "1572866 bytes" in r.text and "record limit" in r.text
    assert api.http.get("/v1/jobs/env-json", headers=h).status_code == 404
    r = api.http.post("/v1/jobs/env-avro", content=body("avro", payload=hostile), headers=h)
    assert r.status_code == 201, r.text
    assert api.http.post("/v1/jobs/env-json", content=body("json"), headers=h).status_code == 201
    trigger = json.dumps({"payload": hostile}, ensure_ascii=False).encode()
    r = api.http.post("/v1/jobs/env-json/trigger", content=trigger, headers=h)
    assert r.status_code == 422, r.text
    assert "1572866 bytes" in r.text and "payload" in r.text
    fits = json.dumps({"payload": "é" * 1024}, ensure_ascii=False).encode()
    assert api.http.post("/v1/jobs/env-json/trigger", content=fits, headers=h).status_code == 202
    r = api.http.post("/v1/jobs/env-avro/trigger", content=trigger, headers=h)
    assert r.status_code == 202, r.text
