"""The dashboard's roll-ups in headless Chromium (issue 31, item 4): a job whose history went
past its hot period shows a row per day — runs by outcome, occurrences not run, dead letters,
start lateness — from the real API over a real query view, its store swept the way the view
sweeps it (the clock set 31 days on, so the test waits for no retention)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from apps.api.app import create_app
from apps.api.auth import token_hash
from kadence.clock import FakeClock, datetime_to_ms
from kadence.settings import KadenceSettings
from streams.views.access import ViewAccess
from streams.views.materializer import Materializer
from streams.views.server import serve
from tests.api.conftest import _served
from tests.api.test_dashboard import _chromium
from tests.views.test_view import T0, filled

VIEW_TOKEN = "rollup-view-token"
TOKEN = "kdn_rollup_test_token"


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[str]:
    store = filled(tmp_path)  # acme/tick: a run succeeded 0.25 s late, one skipped, one failed
    clock = FakeClock(datetime_to_ms(T0 + timedelta(days=31)))
    settings = KadenceSettings(history_retention_days=30)
    materializer = Materializer(settings, store, clock)
    assert materializer.sweep() == 6  # every event of 1 December folded into its roll-up
    view = serve(0, materializer, access=ViewAccess(VIEW_TOKEN))
    try:
        port = view.server_address[1]
        api = settings.model_copy(
            update={
                "api_tokens": {token_hash(TOKEN): "acme"},
                "view_url": f"http://127.0.0.1:{port}",
                "view_token": SecretStr(VIEW_TOKEN),
            }
        )
        with _served(create_app(api)) as url:
            yield url
    finally:
        view.shutdown()
        view.server_close()
        store.close()


def test_the_job_page_shows_each_rolled_up_day(dashboard: str, tmp_path: Path) -> None:
    url = f"{dashboard}/#token={TOKEN}&view=job&job=tick"
    dom = _chromium(url, tmp_path, "--dump-dom").stdout
    assert 'data-rendered="job"' in dom, dom[:2000]
    assert '<table id="rollups">' in dom
    row = dom[dom.index("<td>2026-12-01</td>") :].split("</tr>", 1)[0]
    cells = [c.split(">", 1)[1].strip() for c in row.split("</td>")[:-1]]
    # day, succeeded, failed, dead letters, not run, lateness p50, p99, max
    assert cells == ["2026-12-01", "1", "1", "1", "1", "≤ 0.250 s", "≤ 0.250 s", "≤ 0.250 s"]
