"""One real stack for the API tests: scheduler, reaper, a worker and the query view as child
processes on a namespace of their own, and the API in-process (FastAPI's TestClient)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient
from pydantic import SecretStr

from apps.api.app import create_app
from apps.api.auth import token_hash
from apps.processes import ChildProcess
from kadence.provisioning import delete_namespace
from kadence.sealing import new_key
from kadence.settings import KadenceSettings
from testkit.stack import Stack, execution_settings, until
from testkit.target_server import TargetServer
from tests.conftest import provisioned

TOKENS = {"acme": "tok-acme", "globex": "tok-globex", "*": "tok-admin"}
VIEW_TOKEN = "api-tests-view-token"
"""What the API shows the query view (every view request must carry it)."""


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
    keys = {"k1": SecretStr(new_key())}  # connections enabled, as `make run` has them
    with api_stack(kafka_bootstrap, tmp_path_factory.mktemp("api"), secrets_keys=keys) as started:
        yield started


@contextmanager
def api_stack(kafka_bootstrap: str, tmp: Path, **extra: Any) -> Iterator[Api]:
    """Every child binds a port the system picks and says which: a port chosen here could be
    taken by anything else before the child binds it. Whatever was started is stopped, also
    when a later step fails. `extra`: settings of every process and the API."""
    base = execution_settings(provisioned(kafka_bootstrap)).model_copy(
        update={
            "api_tokens": {token_hash(tok): tenant for tenant, tok in TOKENS.items()},
            "state_dir": tmp / "state",
            "view_token": SecretStr(VIEW_TOKEN),
            **extra,
        }
    )
    with ExitStack() as cleanup:
        cleanup.callback(delete_namespace, base)
        target = TargetServer().start()
        cleanup.callback(target.stop)
        stack = Stack.start(base, tmp)
        cleanup.callback(stack.stop)
        views = ChildProcess(
            "apps.views",
            base.model_copy(update={"instance_id": "v", "view_port": 0}),
            log=tmp / "views.log",
        )
        cleanup.callback(views.stop)
        view_port = views.start().listening("view", timeout=60)
        settings = base.model_copy(
            update={"view_port": view_port, "view_url": f"http://127.0.0.1:{view_port}"}
        )
        app = create_app(settings)
        url = cleanup.enter_context(_served(app))
        http = cleanup.enter_context(TestClient(app))
        Api(settings, http, target, stack, views).wait(
            lambda: http.get("/readyz").status_code == 200, 60, "readiness"
        )
        yield Api(settings, http, target, stack, views, url)


@contextmanager
def _served(app: Any) -> Iterator[str]:
    """`app` over real HTTP on a port the system picks (bound before the server starts)."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    sock = config.bind_socket()
    sock.listen(config.backlog)
    server = uvicorn.Server(config)
    serving = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    serving.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        serving.join(10)
        sock.close()
