"""The dashboard in headless Chromium (Debian's chromium): a job page with real history and
a lateness chart, the job list and the dead-letter queue, rendered from the live API."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from apps.api.auth import token_hash
from tests.api.conftest import TOKENS, Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parents[2] / ".run" / "screenshots"


def _chromium(url: str, tmp: Path, *what: str) -> subprocess.CompletedProcess[str]:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI") == "true":
            pytest.fail("Debian chromium is missing (.ci/run installs it)")
        pytest.skip("no chromium (apt-get install chromium)")
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp / 'profile'}",
            "--window-size=1200,1000",
            "--virtual-time-budget=10000",
            *what,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_job_page_shows_history_and_lateness_chart(api: Api, tmp_path: Path) -> None:
    h = api.as_("acme")
    job = api.job("* * * * * *")
    assert api.http.post("/v1/jobs/dash", json=job, headers=h).status_code == 201
    api.wait(
        lambda: (
            len(
                [
                    r
                    for r in api.http.get("/v1/jobs/dash/runs", headers=h).json()
                    if r["status"] == "succeeded"
                ]
            )
            >= 4
        ),
        what="four runs",
    )
    api.http.post("/v1/jobs/dash/trigger", json={"request_id": "dash-t"}, headers=h)
    api.http.post("/v1/jobs/dash/pause", json={"reason": "db work"}, headers=h)
    api.wait(
        lambda: api.http.get("/v1/jobs/dash", headers=h).json()["state"] == "paused",
        what="paused",
    )
    url = f"{api.url}/#token={TOKENS['acme']}&view=job&job=dash"
    dom = _chromium(url, tmp_path, "--dump-dom").stdout
    assert 'data-rendered="job"' in dom, dom[:2000]
    who = f"token:sha256:{token_hash(TOKENS['acme'])[:12]}"  # the token's name, never itself
    assert f'Paused by <span class="who">{who}</span>: db work' in dom, dom[:3000]
    authors = dom.split('id="authors">', 1)[1].split("</div>", 1)[0]
    assert "created" in authors and f'<span class="who">{who}</span>' in authors, authors
    assert f'<td class="actor"><span class="who">{who}</span></td>' in dom  # the triggered run
    assert TOKENS["acme"] not in dom.replace(url, "")
    assert dom.count('class="point"') >= 4  # one point per started run in the lateness chart
    assert dom.count('<td class="succeeded">succeeded</td>') >= 4  # the history table
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / "dashboard-job.png"
    _chromium(url, tmp_path, f"--screenshot={shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one


def test_job_list_and_dead_letters_and_no_token(api: Api, tmp_path: Path) -> None:
    h = api.as_("globex")
    assert (
        api.http.post("/v1/jobs/listed", json=api.job(path="/fail"), headers=h).status_code == 201
    )
    api.http.post("/v1/jobs/listed/trigger", json={"request_id": "d1"}, headers=h)
    api.wait(lambda: api.http.get("/v1/dead-letters", headers=h).json(), what="a dead letter")
    jobs = _chromium(f"{api.url}/#token={TOKENS['globex']}", tmp_path, "--dump-dom").stdout
    assert ">listed</a>" in jobs
    assert ">dash</a>" not in jobs  # another tenant's job
    page = _chromium(f"{api.url}/#view=job&job=listed", tmp_path, "--dump-dom").stdout
    failed = page[page.index('<td class="dead_lettered">') :].split("</tr>", 1)[0]
    assert "503" in failed, failed  # the failed run's cause: the target's answer
    dlq = _chromium(f"{api.url}/#view=dlq", tmp_path, "--dump-dom").stdout  # token remembered
    assert "globex/listed@manual:d1" in dlq
    assert "Replay</button>" in dlq
    anonymous = _chromium(f"{api.url}/#view=jobs", tmp_path / "fresh", "--dump-dom").stdout
    assert "Not signed in" in anonymous
