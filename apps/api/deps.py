"""What every route shares: the `Services` of the running app (settings, the writer, the query
view's reader, quotas, metrics), reached through `Svc`; the caller, through `Auth`; the job id
check and the answer to a refused input.

The app factory builds one `Services` and keeps it on `app.state.services`; routes ask for
it by type instead of capturing it, so each router module stands on its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from apps.api.auth import Principal, authenticate
from apps.api.quotas import Quotas
from apps.api.replays import ReplayGuard
from apps.api.view_client import ViewClient
from kadence.client import KadenceClient, Written
from kadence.codec import describe_validation_error
from kadence.errors import InvalidInputError, KadenceError
from kadence.models.base import IDENT_RE
from kadence.settings import KadenceSettings
from streams.connections import ConnectionStore
from streams.kafkaio.clients import KafkaClients


@dataclass
class Services:
    """One app's shared parts. Settings, quotas and metrics exist from the start; the writer
    and the reader connect when the app starts (`open`, from its lifespan) and close when it
    stops. Routes that never reach them (auth, validation) work without a lifespan."""

    settings: KadenceSettings
    quotas: Quotas
    """Per-tenant quotas; a refusal answers 429 naming the quota."""
    registry: CollectorRegistry
    """The API's own metrics (`/metrics`)."""
    replays: ReplayGuard = field(default_factory=ReplayGuard)
    """One replay of a dead letter at a time (409 for a second while the first is pending)."""
    _client: KadenceClient | None = None
    _view: ViewClient | None = None
    connections: ConnectionStore | None = None
    """The tenants' connections as read from their topic; None without KADENCE_SECRETS_KEYS
    (the connection routes answer 503)."""

    def open(self) -> None:
        self._client = KadenceClient(self.settings)
        self._view = ViewClient(self.settings.view_url, self.settings.view_token.get_secret_value())
        if self.settings.secrets_keys:
            ns = self.settings.namespace
            clients = KafkaClients(self.settings)
            self.connections = ConnectionStore(clients, ns, f"{ns}.api").start()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._view is not None:
            self._view.close()
        if self.connections is not None:
            self.connections.close()

    @property
    def client(self) -> KadenceClient:
        """Writes: records to the topics, through the client SDK."""
        if self._client is None:
            raise RuntimeError("the API has not started: its lifespan opens the Kafka client")
        return self._client

    @property
    def view(self) -> ViewClient:
        """Reads: the query view process."""
        if self._view is None:
            raise RuntimeError("the API has not started: its lifespan opens the view client")
        return self._view

    def job(self, tenant: str, job_id: str, after: list[Written] | None = None) -> Any:
        """The tenant's job as the view shows it once `after` is applied (404 if none)."""
        return self.view.get(f"/jobs/{tenant}/{job_id}", after)

    def write(self, fn: Callable[[], Written]) -> Written:
        """Run a write: refused input answers 422, a broker that cannot take it 503."""
        try:
            return fn()
        except InvalidInputError as exc:
            raise invalid(exc) from exc
        except KadenceError as exc:
            raise HTTPException(503, str(exc)) from exc


async def services(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]


Svc = Annotated[Services, Depends(services)]
Auth = Annotated[Principal, Depends(authenticate)]
"""Any known caller, whatever its scopes: a route asks for the scope it needs instead
(`Reader`, `Operator`, `Manager`, or `require_scope`, apps/api/auth.py)."""


def invalid(exc: InvalidInputError | ValidationError) -> HTTPException:
    """422 naming each refused field."""
    errors = exc.errors if isinstance(exc, InvalidInputError) else describe_validation_error(exc)
    return HTTPException(422, [{"msg": e, "loc": [e.split(":", 1)[0]]} for e in errors])


def check_id(job_id: str) -> None:
    if not IDENT_RE.fullmatch(job_id) or len(job_id) > 128:
        raise HTTPException(422, [{"loc": ["path", "job_id"], "msg": "not a job identifier"}])
