"""One real stack for the API tests: scheduler, reaper, a worker and the query view as child
processes on a namespace of their own, and the API in-process (FastAPI's TestClient)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient

from apps.api.app import create_app
from apps.api.auth import token_hash
from apps.processes import ChildProcess
from kadence.settings import KadenceSettings
from kadence.topics import delete_namespace
from tests.conftest import provisioned
from tests.integration.execution_harness import (
    Stack,
    TargetServer,
    execution_settings,
    free_port,
    until,
)

TOKENS = {"acme": "tok-acme", "globex": "tok-globex", "*": "tok-admin"}


@dataclass
class Api:
    settings: KadenceSettings
    http: TestClient
    target: TargetServer
    stack: Stack
    views: ChildProcess

    url: str = ""
    """The same app served over real HTTP (for the CLI and the browser)."""

    def as_(self, tenant: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKENS[tenant]}"}

    def job(self, expression: str = "0 0 1 1 *", path: str = "/ok", **kw: Any) -> dict[str, Any]:
        return {
            "schedule": {
                "kind": "cron",
                "expression": expression,
                "timezone": "UTC",
                "spread_s": 0,
            },
            "target": {"kind": "http", "url": f"{self.target.url}{path}"},
            "retry": {"max_attempts": 1},
            **kw,
        }

    def wait(self, check: Any, timeout_s: float = 30, what: str = "the condition") -> Any:
        return until(check, timeout_s, what)


@pytest.fixture(scope="module")
def api(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    tmp: Path = tmp_path_factory.mktemp("api")
    base = execution_settings(provisioned(kafka_bootstrap))
    view_port = free_port()
    settings = base.model_copy(
        update={
            "view_port": view_port,
            "view_url": f"http://127.0.0.1:{view_port}",
            "api_tokens": {token_hash(tok): tenant for tenant, tok in TOKENS.items()},
            "state_dir": tmp / "state",
        }
    )
    target = TargetServer().start()
    stack = Stack.start(settings, tmp)
    views = ChildProcess(
        "apps.views", settings.model_copy(update={"instance_id": "v"}), log=tmp / "views.log"
    ).start()
    views.wait_for("running on", timeout=60)
    app = create_app(settings)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
    )
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    try:
        with TestClient(app) as http:
            Api(settings, http, target, stack, views).wait(
                lambda: http.get("/readyz").status_code == 200, 60, "readiness"
            )
            yield Api(
                settings, http, target, stack, views, f"http://127.0.0.1:{server.config.port}"
            )
    finally:
        server.should_exit = True
        serving.join(10)
        views.stop()
        stack.stop()
        target.stop()
        delete_namespace(settings)
