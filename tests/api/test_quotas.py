"""Per-tenant quotas through the API against the real stack: past each one a tenant gets 429
naming the quota and its limit (Retry-After where waiting helps), and other tenants go on.

The stack is the module's (tests/api/conftest.py, quotas at their defaults); each test serves
an app of its own on it with low quotas, and acts (as the admin) on tenants of its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from apps import cli
from apps.api.app import create_app
from tests.api.conftest import TOKENS, Api, _served

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@contextmanager
def low(api: Api, **quotas: Any) -> Iterator[TestClient]:
    with TestClient(create_app(api.settings.model_copy(update=quotas))) as http:
        yield http


def as_(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS['*']}", "X-Kadence-Tenant": tenant}


def refused(r: Any, quota: str, limit: int) -> dict[str, Any]:
    assert r.status_code == 429, r.text
    detail: dict[str, Any] = r.json()["detail"]
    assert (detail["quota"], detail["limit"]) == (quota, limit), detail
    assert quota in detail["msg"] and str(limit) in detail["msg"]
    return detail


def test_a_tenant_past_its_job_quota_cannot_create_but_can_update(api: Api) -> None:
    with low(api, api_quota_jobs=100, api_quota_jobs_by_tenant={"q-jobs": 2}) as http:
        h = as_("q-jobs")
        for job_id in ("j1", "j2"):
            assert http.post(f"/v1/jobs/{job_id}", json=api.job(), headers=h).status_code == 201
        r = http.post("/v1/jobs/j3", json=api.job(), headers=h)
        refused(r, "jobs_per_tenant", 2)
        assert "retry-after" not in r.headers  # waiting does not help; deleting does
        r = http.put("/v1/jobs/j1", json=api.job("0 12 * * *"), headers=h)
        assert r.status_code == 200, r.text  # updating an existing job is not creating one
        other = http.post("/v1/jobs/j3", json=api.job(), headers=as_("q-jobs-other"))
        assert other.status_code == 201, other.text  # the default of everyone else
        assert http.delete("/v1/jobs/j2", headers=h).status_code == 204
        assert http.post("/v1/jobs/j3", json=api.job(), headers=h).status_code == 201


def test_triggers_past_the_rate_get_429_with_retry_after(api: Api) -> None:
    with low(api, api_quota_triggers_per_minute=3) as http:
        for tenant in ("q-trig", "q-trig-other"):
            r = http.post("/v1/jobs/t", json=api.job(), headers=as_(tenant))
            assert r.status_code == 201, r.text
        h = as_("q-trig")
        for _ in range(3):
            assert http.post("/v1/jobs/t/trigger", json={}, headers=h).status_code == 202
        r = http.post("/v1/jobs/t/trigger", json={}, headers=h)
        detail = refused(r, "triggers_per_minute", 3)
        assert 1 <= int(r.headers["retry-after"]) == detail["retry_after_s"] <= 20  # 3 a minute
        r = http.post("/v1/jobs/t/trigger", json={}, headers=as_("q-trig-other"))
        assert r.status_code == 202, r.text  # q-trig's flood costs the others nothing


def test_replays_past_the_rate_get_429_with_retry_after(api: Api) -> None:
    """Issue 28: nothing bounded how often a tenant replayed dead letters (5 000 a minute
    went through). Past the tenant's replays per minute: 429; other tenants go on."""
    with low(api, api_quota_replays_per_minute=2) as http:
        h = as_("q-replay")
        for _ in range(2):  # a letter that does not exist still costs a request
            assert http.post("/v1/dead-letters/q-replay/x@1/replay", headers=h).status_code == 404
        r = http.post("/v1/dead-letters/q-replay/x@1/replay", headers=h)
        detail = refused(r, "replays_per_minute", 2)
        assert 1 <= int(r.headers["retry-after"]) == detail["retry_after_s"] <= 30
        other = http.post("/v1/dead-letters/q-other/x@1/replay", headers=as_("q-other"))
        assert other.status_code == 404, other.text  # not refused: its own allowance


def test_backfill_plans_count_as_requests_to_the_scheduler(api: Api) -> None:
    """A dry run asks the scheduler (a command and a history record each), so a tenant that
    floods dry runs is held by its triggers per minute, and nobody else is."""
    with low(api, api_quota_triggers_per_minute=2) as http:
        for tenant in ("q-plan", "q-plan-other"):
            r = http.post("/v1/jobs/p", json=api.job("* * * * *"), headers=as_(tenant))
            assert r.status_code == 201, r.text
        url, window = "/v1/jobs/p/backfill", _window(5, 2)
        for _ in range(2):
            r = http.post(url, json=window, headers=as_("q-plan"))
            assert r.status_code == 200, r.text
        refused(http.post(url, json=window, headers=as_("q-plan")), "triggers_per_minute", 2)
        r = http.post(url, json=window, headers=as_("q-plan-other"))
        assert r.status_code == 200 and len(r.json()["occurrences"]) == 5, r.text


def _window(minutes: int, ago_h: int) -> dict[str, str]:
    """`minutes` whole minutes, ending `ago_h` hours ago (a per-minute job's occurrences)."""
    end = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=ago_h)
    return {
        "start": (end - timedelta(minutes=minutes)).isoformat(),
        "end": end.isoformat(),
    }


def test_backfill_occurrences_past_the_rate_get_429(api: Api) -> None:
    with low(api, api_quota_backfill_per_minute=60) as http:
        h = as_("q-bf")
        r = http.post("/v1/jobs/bf", json=api.job("* * * * *"), headers=h)
        assert r.status_code == 201, r.text
        url = "/v1/jobs/bf/backfill"
        r = http.post(url, json={**_window(61, 2), "dry_run": False}, headers=h)
        assert "retry-after" not in r.headers  # more than a minute's worth: split it
        assert "split it" in refused(r, "backfill_occurrences_per_minute", 60)["msg"]
        r = http.post(url, json={**_window(50, 4), "dry_run": False}, headers=h)
        assert r.status_code == 200 and len(r.json()["occurrences"]) == 50, r.text
        r = http.post(url, json={**_window(20, 6), "dry_run": False}, headers=h)
        refused(r, "backfill_occurrences_per_minute", 60)
        assert int(r.headers["retry-after"]) >= 1  # 10 left, 10 more a few seconds later
        r = http.post(url, json={**_window(20, 6), "dry_run": True}, headers=h)
        assert r.status_code == 200 and len(r.json()["occurrences"]) == 20  # dry runs are free


def test_the_cli_backfill_waits_out_the_quota_and_sends_everything(
    api: Api, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """120 per minute: the first chunk of 100 passes, the last 30 wait a few seconds (the
    Retry-After the server computed) and then pass; the CLI exits 0 having sent all 130."""
    app = create_app(api.settings.model_copy(update={"api_quota_backfill_per_minute": 120}))
    with _served(app) as url:
        monkeypatch.setenv("KADENCE_API_URL", url)
        monkeypatch.setenv("KADENCE_TOKEN", TOKENS["acme"])
        monkeypatch.setenv("KADENCE_BOOTSTRAP_SERVERS", api.settings.bootstrap_servers)
        monkeypatch.setenv("KADENCE_NAMESPACE", api.settings.namespace)
        spec = tmp_path / "job.json"
        spec.write_text(json.dumps(api.job("* * * * *")))
        assert cli.main(["create", "q-cli-bf", str(spec)]) == 0
        capsys.readouterr()
        w = _window(130, 8)
        args = ["backfill", "q-cli-bf", "--start", w["start"], "--end", w["end"]]
        assert cli.main([*args, "--run", "--rate", "100000", "--json"]) == 0
        assert len(json.loads(capsys.readouterr().out)["sent"]) == 130
