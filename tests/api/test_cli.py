"""The `kadence` CLI against the API served over HTTP: output for people and for scripts, and
exit codes scripts can trust."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from apps import cli
from tests.api.conftest import TOKENS, Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture
def as_acme(api: Api, monkeypatch: pytest.MonkeyPatch) -> Api:
    monkeypatch.setenv("KADENCE_API_URL", api.url)
    monkeypatch.setenv("KADENCE_TOKEN", TOKENS["acme"])
    monkeypatch.setenv("KADENCE_BOOTSTRAP_SERVERS", api.settings.bootstrap_servers)
    monkeypatch.setenv("KADENCE_NAMESPACE", api.settings.namespace)
    monkeypatch.setenv("COLUMNS", "200")
    return api


def test_jobs_lifecycle_with_exit_codes(
    as_acme: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = as_acme
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(api.job(path="/fail")))
    assert cli.main(["create", "cli-job", str(spec)]) == 0
    assert "created cli-job version 1" in capsys.readouterr().out
    assert cli.main(["create", "cli-job", str(spec)]) == 6  # exists
    assert cli.main(["jobs", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert "cli-job" in [j["job_id"] for j in listed]
    assert cli.main(["jobs"]) == 0
    assert "cli-job" in capsys.readouterr().out  # the table
    assert cli.main(["get", "no-such-job"]) == 4
    assert "no job acme/no-such-job" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(api.job("99 * * * *")))
    assert cli.main(["update", "cli-job", str(bad)]) == 3
    assert "schedule" in capsys.readouterr().err
    assert cli.main(["trigger", "cli-job", "--request-id", "cli-1", "--json"]) == 0
    eid = json.loads(capsys.readouterr().out)["execution_id"]
    api.wait(
        lambda: (
            cli.main(["runs", "cli-job", "--json"]) == 0
            and "dead_lettered" in capsys.readouterr().out
        ),
        what="the failed run",
    )
    assert cli.main(["runs", "cli-job"]) == 0
    table = capsys.readouterr().out
    assert eid in table, table  # the whole run id, as `kadence cancel` takes it
    assert "dead-lettered" in table, table  # the reason
    assert "503" in table, table  # and the target's error
    assert cli.main(["dlq", "--json"]) == 0
    assert eid in [d["execution_id"] for d in json.loads(capsys.readouterr().out)]
    assert cli.main(["rm", "cli-job"]) == 0


def test_trigger_wait_says_how_the_run_went_and_exits_1_unless_it_succeeded(
    as_acme: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = as_acme
    for job_id, path in (("wait-ok", "/ok"), ("wait-fail", "/fail"), ("wait-slow", "/slow?s=3")):
        spec = tmp_path / f"{job_id}.json"
        spec.write_text(json.dumps(api.job(path=path)))
        assert cli.main(["create", job_id, str(spec)]) == 0
    capsys.readouterr()
    assert cli.main(["trigger", "wait-ok", "--wait", "60"]) == 0
    said = capsys.readouterr().out
    assert re.search(r"run acme/wait-ok@manual:\w+: succeeded, started [\d.]+ s late", said), said
    assert cli.main(["trigger", "wait-fail", "--wait", "60", "--json"]) == 1
    refused = capsys.readouterr()
    assert "dead_lettered" in refused.err and "503" in refused.err, refused.err
    assert cli.main(["trigger", "wait-slow", "--wait", "0.5"]) == 1  # its target takes 3 s
    assert "not finished after 0.5 s" in capsys.readouterr().err


def test_unauthenticated_and_unreachable(as_acme: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KADENCE_TOKEN", "wrong")
    assert cli.main(["jobs"]) == 5
    monkeypatch.setenv("KADENCE_API_URL", "http://127.0.0.1:9")
    assert cli.main(["jobs"]) == 2


def test_backfill_dry_run_then_run_with_progress(
    as_acme: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = as_acme
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(api.job("*/10 * * * *")))
    assert cli.main(["create", "cli-bf", str(spec)]) == 0
    window = ["--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T01:00:00Z"]
    assert cli.main(["backfill", "cli-bf", *window]) == 0
    assert "6 occurrences would run" in capsys.readouterr().out
    assert cli.main(["backfill", "cli-bf", *window, "--run", "--rate", "1000"]) == 0
    assert "6 of 6 runs fired, done" in capsys.readouterr().out
    api.wait(
        lambda: (
            len(
                [
                    h
                    for h in api.target.seen("/ok")
                    if "cli-bf@2026-01-01" in h.headers["idempotency-key"]
                ]
            )
            == 6
        ),
        what="the six backfilled runs",
    )


def test_tail_decodes_records_for_people(as_acme: Api, capsys: pytest.CaptureFixture[str]) -> None:
    # a history record of its own, so the test does not depend on which ran before it
    h = as_acme.as_("acme")
    assert as_acme.http.post("/v1/jobs/cli-tail", json=as_acme.job(), headers=h).status_code == 201
    assert as_acme.http.post("/v1/jobs/cli-tail/pause", headers=h).status_code == 202
    as_acme.wait(
        lambda: as_acme.http.get("/v1/jobs/cli-tail/history", headers=h).json(),
        what="the pause in history",
    )
    capsys.readouterr()
    assert cli.main(["tail", "history", "--from-beginning", "--idle", "2", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines and all(line["type"] == "HistoryRecord" for line in lines)
    assert cli.main(["tail", "nonsense"]) == 3
