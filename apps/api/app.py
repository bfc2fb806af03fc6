"""The app factory: the shared services, the middleware (body limit, request counter,
quotas) and the routers (apps/api/routes/). Every job route is scoped to the caller's tenant:
another tenant's job is simply not there (404). Validation errors are 422 and name the field."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Counter

from apps.api import openapi
from apps.api.body_limit import BodyLimit
from apps.api.callers import Callers
from apps.api.deps import Services
from apps.api.quotas import install as install_quotas
from apps.api.routes import (
    backfill,
    commands,
    connections,
    dashboard,
    dead_letters,
    health,
    history,
    jobs,
)
from kadence.metrics import build_info
from kadence.settings import KadenceSettings

BODY_OVERHEAD = 64 * 1024
"""Room for the definition around its payload in a request body."""

ROUTERS = (health, jobs, history, commands, backfill, dead_letters, connections, dashboard)
"""In this order (the order of the OpenAPI document)."""


def create_app(settings: KadenceSettings, callers: Callers | None = None) -> FastAPI:
    """The app; `callers` (who may call it) is built from the settings when not given."""
    callers = callers or Callers.of(settings)
    registry = CollectorRegistry()
    build_info(registry)
    requests = Counter(
        "kadence_api_requests",
        "API requests by route and status",
        ["route", "status"],
        registry=registry,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        services: Services = app.state.services
        services.open()
        yield
        services.close()

    app = FastAPI(
        title="Kadence",
        version="1",
        description="Jobs, runs, history and dead letters of one tenant (bearer token).",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.callers = callers  # authentication asks it who calls
    quotas = install_quotas(app, settings)  # refusals answer 429 naming the quota
    app.state.services = Services(settings, quotas, registry)  # what the routes share

    @app.middleware("http")
    async def count(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        route = request.scope.get("route")
        requests.labels(getattr(route, "path", "unmatched"), str(response.status_code)).inc()
        return response

    # Added last, so outermost: a body is counted, and needs a known token, before any route
    # reads it.
    app.add_middleware(
        BodyLimit,
        limit=settings.max_payload_bytes + BODY_OVERHEAD,
        what=f"payload limit {settings.max_payload_bytes}",
        callers=callers,
        timeout_s=settings.api_body_timeout_s,
    )
    for module in ROUTERS:
        app.include_router(module.router)
    openapi.install(app)  # a job's body typed as JobSpec
    return app
