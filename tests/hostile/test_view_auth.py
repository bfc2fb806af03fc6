"""Issue 14, item 9: the query view answers the API only; metrics stay on loopback.

Before: the view answered every tenant's jobs and dead letters, payloads included, to any
process on the host and (no Host check) to a web page whose name was rebound to 127.0.0.1;
metrics listened on 0.0.0.0.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import HTTPException
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from apps.api.view_client import ViewClient
from apps.processes import settings_env
from apps.stack import view_token
from apps.views import build
from kadence.clock import FakeClock
from kadence.metrics import ANY_PORT
from kadence.metrics import serve as serve_metrics
from kadence.settings import KadenceSettings
from streams.views.access import TOKEN_HEADER, ViewAccess, ViewTokenMissingError
from streams.views.server import serve
from streams.views.store import ViewStore

TOKEN = "s3cret-view-token"


@pytest.fixture
def view(tmp_path: Path) -> Iterator[str]:
    """The view's HTTP endpoint over an empty store, on a port the system picks."""
    store = ViewStore(tmp_path / "view")
    materializer: Any = SimpleNamespace(
        store=store,
        clock=FakeClock(0),
        changed=threading.Condition(),
        caught_up=True,
        applied=0,
        skipped=0,
        wait_applied=lambda *_: True,
    )
    server = serve(0, materializer, access=ViewAccess(TOKEN, ["views.internal"]))
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    store.close()


def get(url: str, path: str = "/jobs", **headers: str) -> httpx.Response:
    return httpx.get(url + path, headers=headers, timeout=10)


def test_without_the_token_the_view_answers_nothing(view: str) -> None:
    for path in ("/jobs", "/dead-letters", "/jobs/acme/nightly", "/ready"):
        assert get(view, path).status_code == 401
    assert get(view, **{TOKEN_HEADER: "guess"}).status_code == 401
    assert get(view, **{TOKEN_HEADER: TOKEN + "x"}).status_code == 401
    assert get(view, **{TOKEN_HEADER: TOKEN}).status_code == 200


def test_a_foreign_host_is_refused_even_with_the_token(view: str) -> None:
    port = view.rsplit(":", 1)[1]
    for host in ("evil.example", f"evil.example:{port}", "localhost.evil.example", "127.0.0.2"):
        answer = get(view, Host=host, **{TOKEN_HEADER: TOKEN})
        assert answer.status_code == 403, host
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "views.internal"):
        assert get(view, Host=host, **{TOKEN_HEADER: TOKEN}).status_code == 200, host


def test_the_api_client_shows_the_token_and_names_a_refusal(view: str) -> None:
    assert ViewClient(view, TOKEN).get("/jobs") == []
    with pytest.raises(HTTPException) as refused:
        ViewClient(view, "another").get("/jobs")
    assert refused.value.status_code == 503
    assert "KADENCE_VIEW_TOKEN" in str(refused.value.detail)


def test_a_view_without_a_token_does_not_start(tmp_path: Path) -> None:
    with pytest.raises(ViewTokenMissingError, match="KADENCE_VIEW_TOKEN"):
        build(KadenceSettings(state_dir=tmp_path))


def test_make_run_gives_its_children_one_random_token() -> None:
    first, second = view_token(KadenceSettings()), view_token(KadenceSettings())
    secret = first.view_token.get_secret_value()
    assert len(secret) >= 32
    assert secret != second.view_token.get_secret_value()
    assert settings_env(first)["KADENCE_VIEW_TOKEN"] == secret  # the real value, not '****'
    assert KadenceSettings(view_token=SecretStr("set")).view_token.get_secret_value() == "set"
    chosen = KadenceSettings(view_token=SecretStr("chosen"))
    assert view_token(chosen).view_token.get_secret_value() == "chosen"


def test_metrics_listen_on_loopback_unless_told(caplog: pytest.LogCaptureFixture) -> None:
    assert KadenceSettings().metrics_host == "127.0.0.1"
    caplog.set_level(logging.INFO, "kadence.metrics")
    port = serve_metrics(ANY_PORT, CollectorRegistry())
    assert f"metrics listening on 127.0.0.1:{port}" in caplog.text
    assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).status_code == 200
