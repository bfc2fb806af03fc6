"""Liveness, readiness and the API's own metrics (no token needed; readiness details need the
admin token)."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from apps.api.deps import Svc
from apps.api.schemas import Health, Readiness
from kadence.errors import KadenceError

log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    responses={200: {"model": Readiness}, 503: {"model": Readiness, "description": "not ready"}},
)
def readyz(
    svc: Svc, request: Request, authorization: Annotated[str | None, Header()] = None
) -> JSONResponse:
    """The broker answers and the query view has caught up with the topics.

    Anyone may ask (probes carry no token) and is told only ready or not, with generic
    problems ("query view unreachable", "broker unreachable"); what went wrong (exception text
    from the view or the broker: hosts, topics, internals) is logged, and shown to the admin
    token only."""
    problems: list[tuple[str, str | None]] = []  # (generic, detail)
    try:
        ready = svc.view.get("/ready")
        if ready.get("stopped_by"):
            problems.append(("query view stopped reading the topics", str(ready["stopped_by"])))
        elif not ready["ready"]:
            problems.append(("query view not ready: still reading the topics", None))
    except HTTPException as exc:
        problems.append(("query view unreachable", str(exc.detail)))
    try:
        svc.client.partitions(svc.client.topics.schedules)
    except KadenceError as exc:
        problems.append(("broker unreachable", str(exc)))
    details = [f"{generic}: {detail}" for generic, detail in problems if detail is not None]
    if details:
        log.warning("not ready: %s", "; ".join(details))
    admin = request.app.state.callers.is_admin(authorization)
    shown = [
        f"{generic}: {detail}" if admin and detail is not None else generic
        for generic, detail in problems
    ]
    return JSONResponse(
        {"ready": not problems, "problems": shown}, status_code=503 if problems else 200
    )


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
def metrics(svc: Svc) -> Response:
    return Response(generate_latest(svc.registry), media_type=CONTENT_TYPE_LATEST)
