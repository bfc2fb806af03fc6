"""Issue 28, item 7: /readyz answers anyone (probes carry no token). It must not hand an
outsider, or a tenant, the internals an error carries (broker hosts, view addresses, exception
text): they get ready or not and generic problems; the admin token gets the details, and the
details are logged."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient

from apps.api.app import create_app
from apps.api.auth import token_hash
from kadence.errors import KadenceError
from kadence.settings import KadenceSettings

VIEW_ERROR = "the query view is unavailable: [Errno 111] connect to 10.9.8.7:8766 refused"
BROKER_ERROR = "broker sasl_ssl://kafka-3.internal.corp:9093: SASL authentication failed"
SECRETS = ("10.9.8.7", "Errno", "kafka-3.internal.corp", "SASL")


class View:
    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def get(self, path: str) -> dict[str, Any]:
        if self.fail:
            raise HTTPException(503, VIEW_ERROR)
        return {"ready": True}


class Client:
    topics = SimpleNamespace(schedules="kadence.schedules")

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def partitions(self, topic: str) -> list[int]:
        if self.fail:
            raise KadenceError(BROKER_ERROR)
        return [0]


def client(fail: bool) -> TestClient:
    settings = KadenceSettings.model_validate(
        {"api_tokens": {token_hash("tok-acme"): "acme", token_hash("tok-admin"): "*"}}
    )
    app = create_app(settings)
    app.state.services._view = View(fail)
    app.state.services._client = Client(fail)
    return TestClient(app)


@pytest.mark.parametrize("token", [None, "tok-acme", "not-a-token"])
def test_without_the_admin_token_readyz_shows_no_internals(
    token: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = client(fail=True).get("/readyz", headers=headers)
    assert r.status_code == 503
    assert r.json() == {
        "ready": False,
        "problems": ["query view unreachable", "broker unreachable"],
    }
    assert not any(s in r.text for s in SECRETS)
    logged = caplog.text
    assert VIEW_ERROR in logged and BROKER_ERROR in logged  # the operator still learns why


def test_the_admin_token_gets_the_details() -> None:
    r = client(fail=True).get("/readyz", headers={"Authorization": "Bearer tok-admin"})
    assert r.status_code == 503
    assert r.json()["problems"] == [
        f"query view unreachable: {VIEW_ERROR}",
        f"broker unreachable: {BROKER_ERROR}",
    ]


def test_ready_is_still_ready_for_anyone() -> None:
    r = client(fail=False).get("/readyz")
    assert r.status_code == 200
    assert r.json() == {"ready": True, "problems": []}
