"""The schedule model's features through the live stack (issue 31): each through the API, the
CLI and the dashboard, with runs arriving at a real HTTP target."""

from __future__ import annotations

import itertools
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from apps import cli
from tests.api.conftest import TOKENS, Api
from tests.api.test_dashboard import _chromium

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture
def as_acme(api: Api, monkeypatch: pytest.MonkeyPatch) -> Api:
    monkeypatch.setenv("KADENCE_API_URL", api.url)
    monkeypatch.setenv("KADENCE_TOKEN", TOKENS["acme"])
    monkeypatch.setenv("COLUMNS", "200")
    return api


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def test_an_interval_job_runs_every_n_seconds_at_its_offset(
    as_acme: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = as_acme
    h = api.as_("acme")
    every = {"kind": "interval", "every_s": 2, "offset_s": 1, "timezone": "Asia/Kolkata"}
    job = {**api.job(path="/every"), "schedule": every}
    r = api.http.post("/v1/jobs/every-2s", json=job, headers=h)
    assert r.status_code == 201, r.text
    assert r.json()["schedule"]["every_s"] == 2
    upcoming = [_ms(t) for t in api.http.get("/v1/jobs/every-2s/next?n=4", headers=h).json()]
    assert all(t % 2000 == 1000 for t in upcoming), upcoming  # offset 1 s, every 2 s (UTC)
    assert [b - a for a, b in itertools.pairwise(upcoming)] == [2000] * 3
    hits = api.target.wait(3, "/every")
    runs = sorted(_ms(hit.headers["kadence-due-at"]) for hit in hits[:3])
    assert all(t % 2000 == 1000 for t in runs) and runs[-1] - runs[0] == 4000
    for hit in hits[:3]:  # never early
        assert hit.at * 1000 >= _ms(hit.headers["kadence-due-at"])
    assert cli.main(["jobs"]) == 0
    assert "every 2s +1s Asia/Kolkata" in capsys.readouterr().out
    dom = _chromium(f"{api.url}/#token={TOKENS['acme']}", tmp_path, "--dump-dom").stdout
    assert "every 2s +1s Asia/Kolkata" in dom
    bad = {**every, "offset_s": 2}
    r = api.http.post("/v1/jobs/every-bad", json={**job, "schedule": bad}, headers=h)
    assert r.status_code == 422 and "offset_s must be below every_s" in r.text
    assert api.http.delete("/v1/jobs/every-2s", headers=h).status_code == 204


def test_labels_list_jobs_through_the_api_the_cli_and_the_dashboard(
    as_acme: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = as_acme
    h = api.as_("acme")
    made = {
        "lab-etl": {"team": "data", "env": "prod"},
        "lab-etl-dev": {"team": "data", "env": "dev"},
        "lab-web": {"team": "web", "env": "prod"},
        "lab-none": {},
    }
    for job_id, labels in made.items():
        r = api.http.post(f"/v1/jobs/{job_id}", json={**api.job(), "labels": labels}, headers=h)
        assert r.status_code == 201, r.text
    r = api.http.post(
        "/v1/jobs/lab-other",
        json={**api.job(), "labels": made["lab-etl"]},
        headers=api.as_("globex"),
    )
    assert r.status_code == 201  # another tenant's job with the same labels

    def listed(selector: str, limit: int = 100) -> list[str]:
        got = api.http.get("/v1/jobs", params={"label": selector, "limit": limit}, headers=h)
        assert got.status_code == 200, got.text
        return [j["job_id"] for j in got.json() if j["job_id"].startswith("lab-")]

    assert listed("team=data") == ["lab-etl", "lab-etl-dev"]
    assert listed("team=data,env!=dev") == ["lab-etl"]
    assert listed("env") == ["lab-etl", "lab-etl-dev", "lab-web"]
    assert listed("!team") == ["lab-none"]
    assert listed("team=ops") == []
    first = api.http.get("/v1/jobs", params={"label": "env=prod", "limit": 1}, headers=h).json()
    after = f"acme/{first[0]['job_id']}"
    rest = api.http.get("/v1/jobs", params={"label": "env=prod", "after": after}, headers=h).json()
    assert [j["job_id"] for j in first + rest if j["job_id"].startswith("lab-")] == [
        "lab-etl",
        "lab-web",
    ]  # paged, still filtered
    bad = api.http.get("/v1/jobs", params={"label": "Team=data"}, headers=h)
    assert bad.status_code == 422 and "label selector part 'Team=data'" in bad.text
    r = api.http.post("/v1/jobs/lab-bad", json={**api.job(), "labels": {"Team": "x"}}, headers=h)
    assert r.status_code == 422 and "label key 'Team'" in r.text

    assert cli.main(["jobs", "--label", "team=data,env=prod"]) == 0
    table = capsys.readouterr().out
    assert "lab-etl " in table and "env=prod,team=data" in table
    assert "lab-etl-dev" not in table and "lab-web" not in table
    assert cli.main(["jobs", "--label", "team=data", "--json"]) == 0
    assert {j["job_id"] for j in json.loads(capsys.readouterr().out)} == {"lab-etl", "lab-etl-dev"}

    url = f"{api.url}/#token={TOKENS['acme']}&view=jobs&label=team%3Ddata"
    dom = _chromium(url, tmp_path, "--dump-dom").stdout
    assert ">lab-etl</a>" in dom and ">lab-etl-dev</a>" in dom
    assert ">lab-web</a>" not in dom and ">lab-none</a>" not in dom
    assert '<td class="labels">env=prod, team=data</td>' in dom


def test_a_note_on_pause_and_resume_is_kept_in_history_and_shown(
    as_acme: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = as_acme
    h = api.as_("acme")
    assert api.http.post("/v1/jobs/noted", json=api.job(), headers=h).status_code == 201
    why = "ana: the partner API is down until Monday (INC-42)"
    r = api.http.post("/v1/jobs/noted/pause", json={"reason": why}, headers=h)
    assert r.status_code == 202, r.text
    api.wait(lambda: api.http.get("/v1/jobs/noted", headers=h).json()["state"] == "paused")
    assert api.http.get("/v1/jobs/noted", headers=h).json()["paused_reason"] == why
    dom = _chromium(
        f"{api.url}/#token={TOKENS['acme']}&view=job&job=noted", tmp_path, "--dump-dom"
    ).stdout
    paused_by = api.http.get("/v1/jobs/noted", headers=h).json()["paused_by"]
    assert paused_by.startswith("token:")  # who paused it: the token's name, never the token
    assert f'id="paused-note">Paused by <span class="who">{paused_by}</span>: {why}</div>' in dom
    assert cli.main(["resume", "noted", "--reason", "bo: partner back (INC-42 closed)"]) == 0
    capsys.readouterr()

    def kept() -> list[tuple[str, str]]:
        events = api.http.get("/v1/jobs/noted/history", headers=h).json()
        return [(e.get("decision"), e.get("reason")) for e in events if e["kind"] == "decision"]

    api.wait(lambda: ("resumed", "bo: partner back (INC-42 closed)") in kept(), what="resumed")
    assert ("paused", why) in kept()
    assert api.http.get("/v1/jobs/noted", headers=h).json()["state"] == "active"
    assert cli.main(["history", "noted"]) == 0
    assert "INC-42 closed" in capsys.readouterr().out
    too_long = api.http.post("/v1/jobs/noted/pause", json={"reason": "x" * 513}, headers=h)
    assert too_long.status_code == 422


def test_excluded_occurrences_do_not_run_and_are_not_listed(
    as_acme: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = as_acme
    h = api.as_("acme")
    today = datetime.now(UTC).date()
    holiday = {
        "kind": "dates",
        "start": today.isoformat(),
        "end": (today + timedelta(1)).isoformat(),
    }
    every_second = {
        "kind": "cron",
        "expression": "* * * * * *",
        "spread_s": 0,
        "exclude": [holiday, {"kind": "cron", "expression": "* 0-5 * * *"}],
    }
    job = {**api.job(path="/excluded"), "schedule": every_second}
    r = api.http.post("/v1/jobs/excluded", json=job, headers=h)
    assert r.status_code == 201, r.text
    first = (today + timedelta(2)).isoformat()
    assert api.http.get("/v1/jobs/excluded/next?n=2", headers=h).json() == [
        f"{first}T06:00:00Z",
        f"{first}T06:00:01Z",
    ]
    assert cli.main(["next", "excluded", "-n", "1"]) == 0
    assert f"{first}T06:00:00" in capsys.readouterr().out
    assert cli.main(["jobs"]) == 0
    assert "* * * * * * UTC, 2 exclusions" in capsys.readouterr().out
    dom = _chromium(f"{api.url}/#token={TOKENS['acme']}", tmp_path, "--dump-dom").stdout
    assert "* * * * * * UTC, 2 exclusions" in dom
    time.sleep(3)  # a per-second job: three runs would have come without the exclusions
    assert api.target.seen("/excluded") == []
    nothing = {**every_second, "exclude": [{"kind": "cron", "expression": "* * * * *"}]}
    r = api.http.post("/v1/jobs/excluded-all", json={**job, "schedule": nothing}, headers=h)
    assert r.status_code == 422 and "the exclusions leave no occurrence to run" in r.text


def test_max_runs_completes_a_job_and_pause_after_failures_pauses_one(
    as_acme: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = as_acme
    h = api.as_("acme")
    every_second = {"kind": "cron", "expression": "* * * * * *", "spread_s": 0}
    limited = {**api.job(path="/limited"), "schedule": every_second, "max_runs": 3}
    assert api.http.post("/v1/jobs/limited", json=limited, headers=h).status_code == 201
    failing = {
        **api.job(path="/fail"),
        "schedule": every_second,
        "retry": {"max_attempts": 1},
        "pause_after_failures": 2,
    }
    assert api.http.post("/v1/jobs/failing", json=failing, headers=h).status_code == 201
    yearly = {**api.job("0 0 1 1 *"), "max_runs": 2}
    assert api.http.post("/v1/jobs/twice", json=yearly, headers=h).status_code == 201
    assert len(api.http.get("/v1/jobs/twice/next?n=5", headers=h).json()) == 2  # all it has
    api.wait(
        lambda: api.http.get("/v1/jobs/limited", headers=h).json()["state"] == "completed",
        what="completed",
    )
    done = api.http.get("/v1/jobs/limited", headers=h).json()
    assert done["next_runs"] == []
    time.sleep(2)  # a per-second job: more runs would come now if it went on
    assert len(api.target.seen("/limited")) == 3
    api.wait(
        lambda: api.http.get("/v1/jobs/failing", headers=h).json()["state"] == "paused",
        what="paused after failures",
    )
    paused = api.http.get("/v1/jobs/failing", headers=h).json()
    assert "paused after 2 runs in a row failed" in paused["paused_reason"]
    assert "503" in paused["paused_reason"]
    page = _chromium(
        f"{api.url}/#token={TOKENS['acme']}&view=job&job=failing", tmp_path, "--dump-dom"
    ).stdout
    assert 'id="paused-note">Paused: paused after 2 runs in a row failed' in page
    assert cli.main(["jobs", "--json"]) == 0
    states = {j["job_id"]: j["state"] for j in json.loads(capsys.readouterr().out)}
    assert (states["limited"], states["failing"]) == ("completed", "paused")
    dom = _chromium(f"{api.url}/#token={TOKENS['acme']}", tmp_path, "--dump-dom").stdout
    assert '<td class="completed">completed</td>' in dom
    more = {**limited, "max_runs": 5}
    assert api.http.put("/v1/jobs/limited", json=more, headers=h).status_code == 200
    api.target.wait(5, "/limited")  # a version allowing 5 runs 2 more
    api.wait(
        lambda: api.http.get("/v1/jobs/limited", headers=h).json()["state"] == "completed",
        what="completed again",
    )
    time.sleep(2)
    assert len(api.target.seen("/limited")) == 5


def test_a_one_off_with_delete_after_completion_is_gone_after_its_run(as_acme: Api) -> None:
    api = as_acme
    h = api.as_("acme")
    run_at = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    once = {
        **api.job(path="/once-deleted"),
        "schedule": {"kind": "once", "run_at": run_at},
        "delete_after_completion": True,
    }
    kept = {**once, "target": {"kind": "http", "url": f"{api.target.url}/once-kept"}}
    kept["delete_after_completion"] = False
    assert api.http.post("/v1/jobs/once-deleted", json=once, headers=h).status_code == 201
    assert api.http.post("/v1/jobs/once-kept", json=kept, headers=h).status_code == 201
    api.target.wait(1, "/once-deleted")
    api.target.wait(1, "/once-kept")
    api.wait(
        lambda: api.http.get("/v1/jobs/once-deleted", headers=h).status_code == 404,
        what="the one-off deleted after its run",
    )
    assert api.http.get("/v1/jobs/once-kept", headers=h).status_code == 200  # without: kept
    assert cli.main(["get", "once-deleted"]) == 4  # not found
    assert cli.main(["get", "once-kept"]) == 0
    listed = [j["job_id"] for j in api.http.get("/v1/jobs", headers=h).json()]
    assert "once-deleted" not in listed and "once-kept" in listed
    again = api.http.post("/v1/jobs/once-deleted", json=once, headers=h)
    assert again.status_code == 201, again.text  # the id is free again


def test_several_expressions_in_one_job_run_at_each(
    as_acme: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = as_acme
    h = api.as_("acme")
    both = {
        "kind": "cron",
        "expression": "0 9 * * 1-5",
        "also": ["30 10 * * 6", "0 9 * * 1"],
        "timezone": "America/Chicago",
        "spread_s": 0,
    }
    r = api.http.post("/v1/jobs/weekly-mix", json={**api.job(), "schedule": both}, headers=h)
    assert r.status_code == 201, r.text
    runs = api.http.get("/v1/jobs/weekly-mix/next?n=12", headers=h).json()
    local = [
        datetime.fromisoformat(t.replace("Z", "+00:00")).astimezone(ZoneInfo("America/Chicago"))
        for t in runs
    ]
    assert {(t.weekday(), t.hour, t.minute) for t in local} == {
        *((d, 9, 0) for d in range(5)),
        (5, 10, 30),
    }
    assert len(set(runs)) == len(runs)  # Monday 9:00, named twice, runs once
    assert cli.main(["jobs"]) == 0
    assert "0 9 * * 1-5 | 30 10 * * 6 | 0 9 * * 1 America/Chicago" in capsys.readouterr().out
    dom = _chromium(f"{api.url}/#token={TOKENS['acme']}", tmp_path, "--dump-dom").stdout
    assert "0 9 * * 1-5 | 30 10 * * 6 | 0 9 * * 1 America/Chicago" in dom
    bad = {**both, "also": ["0 25 * * *"]}
    r = api.http.post("/v1/jobs/weekly-bad", json={**api.job(), "schedule": bad}, headers=h)
    assert r.status_code == 422 and "schedule.also[0]" in r.text
