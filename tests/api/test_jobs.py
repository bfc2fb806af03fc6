"""Jobs CRUD, validation and tenancy through the API, against the real stack."""

from __future__ import annotations

import pytest

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
