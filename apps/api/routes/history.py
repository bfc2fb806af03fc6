"""What happened to a job: every recorded event, and one entry per occurrence."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from apps.api.auth import Principal, Reader, tenant_of
from apps.api.deps import Services, Svc, check_id
from apps.api.schemas import HistoryEvent, RollupShown, RunShown

router = APIRouter(tags=["history"])


def _of_job(svc: Services, who: Principal, job_id: str, what: str, limit: int) -> Any:
    """The view's `what` of the caller's job (404 when the tenant has no such job)."""
    tenant = tenant_of(who)
    check_id(job_id)
    svc.job(tenant, job_id)
    return svc.view.get(f"/jobs/{tenant}/{job_id}/{what}", limit=limit)


@router.get(
    "/v1/jobs/{job_id}/history",
    response_model=list[HistoryEvent],
    response_model_exclude_unset=True,
)
def history(
    svc: Svc,
    who: Reader,
    job_id: str,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Any:
    """Every recorded event of the job, newest first: decisions with their reasons,
    attempts with outcome and error, dead letters."""
    return _of_job(svc, who, job_id, "history", limit)


@router.get(
    "/v1/jobs/{job_id}/runs", response_model=list[RunShown], response_model_exclude_unset=True
)
def runs(
    svc: Svc,
    who: Reader,
    job_id: str,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> Any:
    """One entry per occurrence, newest first: status, when it started, how late, attempts
    and deliveries, the last error, or the reason it did not run."""
    return _of_job(svc, who, job_id, "runs", limit)


@router.get(
    "/v1/jobs/{job_id}/rollups",
    response_model=list[RollupShown],
    response_model_exclude_unset=True,
)
def rollups(
    svc: Svc,
    who: Reader,
    job_id: str,
    limit: Annotated[int, Query(ge=1, le=400)] = 90,
) -> Any:
    """The job's history past its hot period (KADENCE_HISTORY_RETENTION_DAYS), a day at a
    time, newest first: attempts by status, decisions, dead letters, start lateness p50/p99."""
    return _of_job(svc, who, job_id, "rollups", limit)
