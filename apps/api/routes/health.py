"""Liveness, readiness and the API's own metrics (no token needed)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from apps.api.deps import Svc
from kadence.errors import KadenceError

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(svc: Svc) -> JSONResponse:
    """The broker answers and the query view has caught up with the topics."""
    problems = []
    try:
        ready = svc.view.get("/ready")
        if ready.get("stopped_by"):
            problems.append(f"the query view stopped reading the topics: {ready['stopped_by']}")
        elif not ready["ready"]:
            problems.append("the query view is still reading the topics")
    except HTTPException as exc:
        problems.append(str(exc.detail))
    try:
        svc.client.partitions(svc.client.topics.schedules)
    except KadenceError as exc:
        problems.append(str(exc))
    return JSONResponse(
        {"ready": not problems, "problems": problems}, status_code=503 if problems else 200
    )


@router.get("/metrics", response_class=Response)
def metrics(svc: Svc) -> Response:
    return Response(generate_latest(svc.registry), media_type=CONTENT_TYPE_LATEST)
