"""Notifications through the real stack (issue 42, item 6): a job failing for good tells its
`notify` webhook, signed with the tenant's secret; a Slack body after a pause; the notification
is in the job's history, not among its runs; a URL at a metadata or private address, or a
metadata host name, is refused at the API with 422; another tenant's secret name signs nothing.
Jobs made and triggered with the `kadence` CLI, history and runs read through the API and CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apps import cli
from connectors.webhook_verify import verify
from kadence.notifications import is_notification
from testkit.stack import SECRET
from tests.api.conftest import TOKENS, Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _create(api: Api, tmp_path: Path, job_id: str, **kw: Any) -> None:
    spec = tmp_path / f"{job_id}.json"
    spec.write_text(json.dumps(api.job(path="/fail", **kw)))
    assert cli.main(["create", job_id, str(spec)]) == 0


def _history(api: Api, job_id: str, tenant: str = "acme") -> list[dict[str, Any]]:
    got = api.http.get(f"/v1/jobs/{job_id}/history", headers=api.as_(tenant))
    assert got.status_code == 200, got.text
    return list(got.json())


def _notified(api: Api, job_id: str, state: str, tenant: str = "acme") -> list[dict[str, Any]]:
    events = _history(api, job_id, tenant)
    return [
        e
        for e in events
        if e.get("decision") == "notified" and (e.get("details") or {}).get("state") == state
    ]


def test_a_dead_letter_notifies_signed_and_a_pause_posts_a_slack_body(
    api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KADENCE_API_URL", api.url)
    monkeypatch.setenv("KADENCE_TOKEN", TOKENS["acme"])
    monkeypatch.setenv("COLUMNS", "200")
    hook = f"{api.target.url}/hook-json"
    _create(api, tmp_path, "notify-f", notify={"url": hook, "secret_ref": "test"})
    _create(
        api,
        tmp_path,
        "notify-p",
        pause_after_failures=1,
        notify={"url": f"{api.target.url}/hook-slack", "format": "slack", "on": ["paused"]},
    )
    capsys.readouterr()
    assert cli.main(["trigger", "notify-f", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["execution_id"]
    [hit] = api.target.wait(1, "/hook-json")
    assert verify(SECRET, hit.headers, hit.body), hit.headers
    body = json.loads(hit.body)
    assert (body["job_id"], body["event"], body["execution_id"]) == (
        "notify-f",
        "dead_lettered",
        run,
    )
    assert "503" in json.dumps(body["error"])
    delivered = api.wait(lambda: _notified(api, "notify-f", "delivered"), 60, "delivered")
    assert is_notification(delivered[0]["details"]["notification"])
    assert {
        e["details"]["state"] for e in _history(api, "notify-f") if e.get("decision") == "notified"
    } == {"sent", "delivered"}
    runs = api.http.get("/v1/jobs/notify-f/runs", headers=api.as_("acme")).json()
    assert [r["execution_id"] for r in runs] == [run]  # the notification is not a run
    assert cli.main(["runs", "notify-f", "--json"]) == 0
    assert "@notify:" not in capsys.readouterr().out
    assert cli.main(["history", "notify-f"]) == 0
    assert "notified" in capsys.readouterr().out

    assert cli.main(["trigger", "notify-p", "--json"]) == 0
    [slack] = api.target.wait(1, "/hook-slack")
    text = json.loads(slack.body)
    assert list(text) == ["text"] and "acme/notify-p" in text["text"]
    assert "webhook-signature" not in {k.lower() for k in slack.headers}  # no secret_ref
    paused = api.wait(
        lambda: [e for e in _history(api, "notify-p") if e.get("decision") == "paused"], 60
    )
    assert "pause_after_failures" in paused[0]["reason"]


def test_another_tenant_s_secret_name_signs_nothing(api: Api) -> None:
    spec = api.job(
        path="/fail", notify={"url": f"{api.target.url}/hook-globex", "secret_ref": "test"}
    )
    got = api.http.post("/v1/jobs/notify-g", json=spec, headers=api.as_("globex"))
    assert got.status_code == 201, got.text
    assert api.http.post(
        "/v1/jobs/notify-g/trigger", json={}, headers=api.as_("globex")
    ).status_code in (200, 201, 202)
    failed = api.wait(lambda: _notified(api, "notify-g", "failed", "globex"), 90, "given up")
    assert "test" in json.dumps(failed[0]["error"])
    assert api.target.seen("/hook-globex") == []


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://[fd00:ec2::254]/", "cloud metadata"),
        ("http://10.1.2.3:8080/hook", "private"),
        ("http://metadata.google.internal/computeMetadata/v1/", "metadata service"),
        ("https://h.example/" + "a" * 5000, "2048"),
        ("gopher://h.example/", "http"),
    ],
)
def test_a_notify_url_the_workers_would_refuse_is_refused_at_the_api(
    api: Api, url: str, words: str
) -> None:
    got = api.http.post(
        "/v1/jobs/notify-bad", json=api.job(notify={"url": url}), headers=api.as_("acme")
    )
    assert got.status_code == 422, got.text
    assert words in got.text
