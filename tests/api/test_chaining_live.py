"""Chain links through the real stack (issue 42, item 5): job A's `on_success` runs job B once
per run of A, with A's run as B's payload; job F's `on_failure` runs once its run is
dead-lettered; both jobs' histories name each other's run. Jobs made and triggered with the
`kadence` CLI, history read through the API and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apps import cli
from tests.api.conftest import TOKENS, Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _create(api: Api, tmp_path: Path, job_id: str, **kw: Any) -> None:
    spec = tmp_path / f"{job_id}.json"
    spec.write_text(json.dumps(api.job(**kw)))
    assert cli.main(["create", job_id, str(spec)]) == 0


def _history(api: Api, job_id: str) -> list[dict[str, Any]]:
    got = api.http.get(f"/v1/jobs/{job_id}/history", headers=api.as_("acme"))
    assert got.status_code == 200, got.text
    events: list[dict[str, Any]] = got.json()
    return events


def _received(api: Api, caused_by: str) -> list[dict[str, Any]]:
    """The runs of the downstream job the target got, whose payload is `caused_by`'s run."""
    bodies = [json.loads(h.body) for h in api.target.seen("/ok") if h.body.startswith(b"{")]
    return [b for b in bodies if b.get("execution_id") == caused_by]


def test_on_success_runs_b_once_per_run_of_a_and_history_links_both_ways(
    api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KADENCE_API_URL", api.url)
    monkeypatch.setenv("KADENCE_TOKEN", TOKENS["acme"])
    monkeypatch.setenv("COLUMNS", "200")
    _create(api, tmp_path, "chain-b")
    _create(api, tmp_path, "chain-a", on_success=[{"job_id": "chain-b", "pass_result": True}])
    capsys.readouterr()
    runs = []
    for request in ("one", "two"):
        assert cli.main(["trigger", "chain-a", "--request-id", request, "--json"]) == 0
        runs.append(json.loads(capsys.readouterr().out)["execution_id"])
    for run in runs:
        api.wait(lambda run=run: _received(api, run), 60, f"chain-b's run after {run}")
    # once each: B's runs are keyed by A's run, so a second trigger would be a second hit
    assert cli.main(["trigger", "chain-a", "--request-id", "one", "--json"]) == 0  # a resend
    api.wait(
        lambda: len([e for e in _history(api, "chain-b") if e.get("decision") == "fired"]) >= 2,
        what="chain-b's fired records",
    )
    for run in runs:
        [body] = _received(api, run)
        assert (body["job_id"], body["status"]) == ("chain-a", "succeeded")
    fired_b = [e for e in _history(api, "chain-b") if e.get("decision") == "fired"]
    assert sorted(e["details"]["caused_by"] for e in fired_b) == sorted(runs)
    chained_a = [e for e in _history(api, "chain-a") if e.get("decision") == "chained"]
    assert sorted(e["execution_id"] for e in chained_a) == sorted(runs)
    assert {e["details"]["triggered"] for e in chained_a} == {e["execution_id"] for e in fired_b}
    # and the CLI shows the links for people
    assert cli.main(["history", "chain-a"]) == 0
    assert "on_success: triggered chain-b" in capsys.readouterr().out
    assert cli.main(["history", "chain-b"]) == 0
    assert f"chain link: after {runs[0]}" in capsys.readouterr().out


def test_on_failure_runs_after_the_dead_letter_and_a_missing_job_is_refused_in_history(
    api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KADENCE_API_URL", api.url)
    monkeypatch.setenv("KADENCE_TOKEN", TOKENS["acme"])
    _create(api, tmp_path, "chain-alert")
    _create(
        api,
        tmp_path,
        "chain-f",
        path="/fail",
        on_failure=[{"job_id": "chain-alert", "pass_result": True}, {"job_id": "chain-nobody"}],
    )
    capsys.readouterr()
    assert cli.main(["trigger", "chain-f", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["execution_id"]
    api.wait(lambda: _received(api, run), 60, "chain-alert's run after the dead letter")
    [body] = _received(api, run)
    assert body["status"] == "failed" and "503" in json.dumps(body["error"])
    api.wait(
        lambda: [
            e
            for e in _history(api, "chain-f")
            if e.get("decision") == "refused" and "acme/chain-nobody" in e["reason"]
        ],
        what="the refused trigger of the missing job in chain-f's history",
    )
