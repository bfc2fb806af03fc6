"""The API's side of the per-tenant quotas (kadence/quotas.py holds the logic, shared with the
ingress): a QuotaExceededError raised by a route answers HTTP 429, naming the quota and its
limit, with Retry-After when waiting helps."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from kadence.quotas import (
    BACKFILL,
    JOBS,
    REPLAYS,
    TRIGGERS,
    JobQuota,
    QuotaExceededError,
    Quotas,
    RateQuota,
)
from kadence.settings import KadenceSettings

__all__ = [
    "BACKFILL",
    "JOBS",
    "REPLAYS",
    "TRIGGERS",
    "JobQuota",
    "QuotaExceededError",
    "Quotas",
    "RateQuota",
    "install",
    "refused",
]


async def refused(_request: Request, exc: Exception) -> JSONResponse:
    """429, naming the quota and its limit; Retry-After when waiting helps."""
    assert isinstance(exc, QuotaExceededError)
    wait = exc.retry_after_s
    headers = None if wait is None else {"Retry-After": str(wait)}
    return JSONResponse({"detail": exc.detail()}, status_code=429, headers=headers)


def install(app: FastAPI, settings: KadenceSettings) -> Quotas:
    """The app's quotas (also on `app.state.quotas`); a QuotaExceededError raised by a route
    answers 429."""
    quotas = Quotas.of(settings)
    app.state.quotas = quotas
    app.add_exception_handler(QuotaExceededError, refused)
    return quotas
