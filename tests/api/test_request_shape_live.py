"""Issue 42, items 2 and 9, live: jobs created with the `kadence` CLI and the API on a real stack
(scheduler, reaper, worker, view as processes; the API over HTTP) reach a real receiver with
their method, query and success statuses, and a job's runs older than its max_event_age_ms are
not started, with the reason in its history (`kadence runs`, GET /v1/jobs/{id}/history)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apps import cli
from tests.api.conftest import TOKENS, Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture
def as_acme(api: Api, monkeypatch: pytest.MonkeyPatch) -> Api:
    monkeypatch.setenv("KADENCE_API_URL", api.url)
    monkeypatch.setenv("KADENCE_TOKEN", TOKENS["acme"])
    monkeypatch.setenv("COLUMNS", "200")
    return api


def test_a_get_with_query_and_a_custom_success_status_reaches_the_receiver(
    as_acme: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = as_acme
    target = {
        "kind": "http",
        "url": f"{api.target.url}/status?code=202",
        "method": "GET",
        "query": {"q": "a b&c", "city": "Zürich"},
        "success_statuses": ["202"],
        "retryable_statuses": [],
    }
    spec = tmp_path / "get.json"
    spec.write_text(json.dumps(api.job(target=target)))
    assert cli.main(["create", "get-job", str(spec)]) == 0
    capsys.readouterr()
    assert cli.main(["trigger", "get-job", "--wait", "60"]) == 0  # a 202 is its success
    assert "succeeded" in capsys.readouterr().out
    [hit] = [h for h in api.target.seen("/status") if h.headers["kadence-job"] == "get-job"]
    assert (hit.method, hit.query) == ("GET", "code=202&q=a%20b%26c&city=Z%C3%BCrich")
    assert "content-length" not in hit.headers and hit.body == b""
    shown = api.http.get("/v1/jobs/get-job", headers=api.as_("acme")).json()["definition"]
    assert shown["target"]["method"] == "GET"
    assert shown["target"]["query"] == target["query"]
    assert shown["target"]["success_statuses"] == ["202"]
    # the same job answered 200 fails, for good: a 2xx it did not name is no success
    target["url"] = f"{api.target.url}/status?code=200"
    spec.write_text(json.dumps(api.job(target=target)))
    assert cli.main(["update", "get-job", str(spec)]) == 0
    capsys.readouterr()
    assert cli.main(["trigger", "get-job", "--wait", "60"]) == 1
    assert "200" in capsys.readouterr().err
    assert cli.main(["rm", "get-job"]) == 0


def test_hostile_shapes_are_refused_at_the_door(as_acme: Api) -> None:
    api = as_acme
    for bad in (
        {"method": "CONNECT"},
        {"query": {"access_token": "sk_live_123"}},
        {"query": {"a": 1}},
        {"success_statuses": ["600"]},
        {"retryable_statuses": ["2xx"]},
    ):
        body = api.job(target={"kind": "http", "url": f"{api.target.url}/ok", **bad})
        answer = api.http.post("/v1/jobs/bad-shape", json=body, headers=api.as_("acme"))
        assert answer.status_code == 422, (bad, answer.text)
    body = api.job(max_event_age_ms=999)
    answer = api.http.post("/v1/jobs/bad-age", json=body, headers=api.as_("acme"))
    assert answer.status_code == 422 and "max_event_age_ms" in answer.text


def test_runs_older_than_max_event_age_are_not_started_and_history_says_why(
    as_acme: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An interval job every second whose target takes 3 s, one run buffered behind the running
    one: the buffered run can only start about 2 s after its scheduled time, past its 1 s age."""
    api = as_acme
    job = api.job(
        path="/slow?s=3",
        schedule={"kind": "interval", "every_s": 1},
        overlap="buffer_one",
        max_event_age_ms=1_000,
    )
    spec = tmp_path / "aged.json"
    spec.write_text(json.dumps(job))
    assert cli.main(["create", "aged-job", str(spec)]) == 0

    def aged() -> set[str]:
        events = api.http.get("/v1/jobs/aged-job/history", headers=api.as_("acme")).json()
        return {
            e["execution_id"]
            for e in events
            if e.get("decision") == "dead_lettered"
            and (e.get("error") or {}).get("type") == "MaxEventAge"
        }

    api.wait(aged, 60, "a run refused for its age")
    assert cli.main(["pause", "aged-job"]) == 0
    capsys.readouterr()
    assert cli.main(["runs", "aged-job", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    shown = [r for r in runs if (r["last_error"] or {}).get("type") == "MaxEventAge"]
    assert shown and all(r["status"] == "dead_lettered" for r in shown), runs
    assert "max_event_age_ms" in shown[0]["last_error"]["message"]
    assert cli.main(["runs", "aged-job"]) == 0
    assert "not started" in capsys.readouterr().out  # the table says why
    started = {h.headers["idempotency-key"] for h in api.target.seen("/slow")}
    assert not aged() & started  # a run refused for its age never reached the receiver
    assert cli.main(["rm", "aged-job"]) == 0
