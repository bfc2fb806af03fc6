"""Issue 42, item 4, live: a webhook run against a local receiver and a handler run keep what
they returned, shown by the API (runs and history, per attempt), `kadence runs` and the
dashboard's job page in headless Chromium; another tenant sees none of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apps import cli
from tests.api.conftest import TOKENS, Api
from tests.api.test_dashboard import _chromium

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture
def as_acme(api: Api, monkeypatch: pytest.MonkeyPatch) -> Api:
    monkeypatch.setenv("KADENCE_API_URL", api.url)
    monkeypatch.setenv("KADENCE_TOKEN", TOKENS["acme"])
    monkeypatch.setenv("COLUMNS", "240")
    return api


def _create(api: Api, tmp_path: Path, job_id: str, spec: dict[str, Any]) -> None:
    path = tmp_path / f"{job_id}.json"
    path.write_text(json.dumps(spec))
    assert cli.main(["create", job_id, str(path)]) == 0


def _final_runs(api: Api, job_id: str) -> list[dict[str, Any]]:
    h = api.as_("acme")
    return api.wait(  # type: ignore[no-any-return]
        lambda: [
            r
            for r in api.http.get(f"/v1/jobs/{job_id}/runs", headers=h).json()
            if r["status"] in ("succeeded", "dead_lettered") and r["result"]
        ],
        what=f"a finished run of {job_id} with its result",
    )


def test_results_through_the_api_the_cli_and_the_dashboard(
    as_acme: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = as_acme
    hook = api.job(path="/ok")
    hook["target"]["result_headers"] = ["Server", "x-absent"]
    _create(api, tmp_path, "res-hook", hook)
    _create(api, tmp_path, "res-down", api.job(path="/fail"))
    calc = {**api.job(), "target": {"kind": "handler", "name": "echo-value"}, "payload": "[1, 2]"}
    _create(api, tmp_path, "res-calc", calc)
    capsys.readouterr()
    assert cli.main(["trigger", "res-hook", "--wait", "60"]) == 0
    assert "result 200 ok server: BaseHTTP" in capsys.readouterr().out  # trigger --wait says it
    for job_id in ("res-down", "res-calc"):
        assert cli.main(["trigger", job_id, "--request-id", "r1"]) == 0

    [ok] = _final_runs(api, "res-hook")
    assert ok["result"]["status_code"] == 200
    assert ok["result"]["body"] == "ok"
    assert list(ok["result"]["headers"]) == ["server"]  # named and sent; x-absent was not
    assert ok["result"]["headers"]["server"].startswith("BaseHTTP/")
    [down] = _final_runs(api, "res-down")
    assert (down["status"], down["result"]) == (
        "dead_lettered",
        {"status_code": 503, "body": "target is down"},
    )
    [calc_run] = _final_runs(api, "res-calc")
    assert calc_run["result"] == {"value": {"echo": [1, 2]}}

    h = api.as_("acme")
    events = api.http.get("/v1/jobs/res-down/history", headers=h).json()
    [attempt] = [e for e in events if e["kind"] == "outcome"]  # each attempt keeps its own
    assert attempt["result"] == {"status_code": 503, "body": "target is down"}
    assert api.http.get("/v1/jobs/res-hook/runs", headers=api.as_("globex")).status_code == 404

    capsys.readouterr()
    assert cli.main(["runs", "res-hook"]) == 0
    table = capsys.readouterr().out
    assert "200 ok server: BaseHTTP" in table, table
    assert cli.main(["runs", "res-calc"]) == 0
    assert '{"echo": [1, 2]}' in capsys.readouterr().out
    assert cli.main(["runs", "res-down", "--json"]) == 0
    [shown] = json.loads(capsys.readouterr().out)
    assert shown["result"] == {"status_code": 503, "body": "target is down"}

    url = f"{api.url}/#token={TOKENS['acme']}&view=job&job=res-hook"
    dom = _chromium(url, tmp_path, "--dump-dom").stdout
    assert 'data-rendered="job"' in dom, dom[:2000]
    cell = dom[dom.index('<td class="result">') :].split("</td>", 1)[0]
    assert "200\nok\nserver: BaseHTTP/" in cell, cell
    calc_dom = _chromium(url.replace("res-hook", "res-calc"), tmp_path, "--dump-dom").stdout
    assert '<td class="result">{"echo":[1,2]}</td>' in calc_dom.replace("&quot;", '"')
