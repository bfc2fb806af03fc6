"""A tenant's jobs: list, create, update, read, delete, and the next due times. A write
answers once the query view shows it, or 409 if the scheduler refused it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Query, Response
from pydantic import ValidationError

from apps.api.auth import Manager, Reader, tenant_of
from apps.api.deps import Services, Svc, check_id, invalid
from apps.api.notify_url import notify_url_refused
from apps.api.schemas import JobShown
from connectors.ssrf import AddressPolicy
from kadence.labels import MAX_SELECTOR, parse_selector
from kadence.models import ScheduleDefinition
from kadence.pools import unknown_pool

router = APIRouter(tags=["jobs"])

SPEC_DOC = (
    "A job definition without tenant, job_id and version (they come from the token, the "
    "path and the current version): schedule, target, payload, retry, timeout_ms, "
    "lease_ttl_ms, overlap, concurrency_key, missed, description. See docs/api.md."
)


@router.get("/v1/jobs", response_model=list[JobShown], response_model_exclude_unset=True)
def list_jobs(
    svc: Svc,
    who: Reader,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    after: Annotated[str, Query(max_length=300)] = "",
    label: Annotated[
        str,
        Query(
            max_length=MAX_SELECTOR,
            description="only jobs whose labels meet this selector: comma-separated "
            "key=value, key!=value, key (has it), !key (has it not)",
            examples=["team=data,env!=dev"],
        ),
    ] = "",
) -> list[dict[str, Any]]:
    """The tenant's jobs with state and next run (an admin without a tenant: all), in job id
    order: `limit` after the job `after` (tenant/job_id, a page's last)."""
    try:
        parse_selector(label)
    except ValueError as exc:
        raise HTTPException(422, f"label: {exc}") from None
    found = svc.view.get("/jobs", tenant=who.tenant, limit=limit, after=after, label=label)
    return found  # type: ignore[no-any-return]


@router.post(
    "/v1/jobs/{job_id}", status_code=201, response_model=JobShown, response_model_exclude_unset=True
)
def create_job(
    svc: Svc,
    who: Manager,
    job_id: str,
    spec: Annotated[dict[str, Any], Body(description=SPEC_DOC)],
) -> Any:
    """Create a job (409 if it exists; 429 past the tenant's job quota)."""
    tenant = tenant_of(who)
    check_id(job_id)
    if svc.view.maybe(f"/jobs/{tenant}/{job_id}") is not None:
        raise HTTPException(409, f"job {job_id} exists; PUT updates it")
    with svc.quotas.jobs.creating(tenant, lambda upto: _job_count(svc, tenant, upto)):
        return _put(svc, tenant, job_id, spec, 1, actor=who.actor)


@router.put("/v1/jobs/{job_id}", response_model=JobShown, response_model_exclude_unset=True)
def update_job(
    svc: Svc,
    who: Manager,
    job_id: str,
    spec: Annotated[dict[str, Any], Body(description=SPEC_DOC)],
) -> Any:
    """Replace a job's definition with a new version."""
    tenant = tenant_of(who)
    check_id(job_id)
    current = svc.job(tenant, job_id)
    return _put(svc, tenant, job_id, spec, int(current["version"]) + 1, actor=who.actor)


@router.get("/v1/jobs/{job_id}", response_model=JobShown, response_model_exclude_unset=True)
def get_job(svc: Svc, who: Reader, job_id: str) -> Any:
    check_id(job_id)
    return svc.job(tenant_of(who), job_id)


@router.delete("/v1/jobs/{job_id}", status_code=204)
def delete_job(svc: Svc, who: Manager, job_id: str) -> Response:
    tenant = tenant_of(who)
    check_id(job_id)
    job = svc.job(tenant, job_id)
    ck = job["definition"].get("concurrency_key")
    home = job.get("home")  # one tombstone where the job has only ever lived (client.delete)
    written = svc.write(lambda: svc.client.delete(tenant, job_id, ck, home=home))
    svc.view.get("/ready", [written])
    return Response(status_code=204)


@router.get("/v1/jobs/{job_id}/next")
def next_runs(
    svc: Svc, who: Reader, job_id: str, n: Annotated[int, Query(ge=1, le=100)] = 10
) -> list[str]:
    """The next n due times (UTC), by the job's schedule and zone."""
    check_id(job_id)
    job = svc.view.get(f"/jobs/{tenant_of(who)}/{job_id}", preview=n)
    return job["next_runs"]  # type: ignore[no-any-return]


def _put(
    svc: Services, tenant: str, job_id: str, spec: dict[str, Any], version: int, *, actor: str
) -> Any:
    doc = {**spec, "tenant": tenant, "job_id": job_id, "version": version}
    if "actor" in spec:
        raise HTTPException(422, [{"loc": ["body", "actor"], "msg": "set by Kadence: the caller"}])
    doc["actor"] = actor or None
    try:
        definition = ScheduleDefinition.model_validate(doc)
    except ValidationError as exc:
        raise invalid(exc) from exc
    cfg = svc.settings
    policy = AddressPolicy(cfg.target_allow_cidrs, cfg.target_allow_cidrs_by_tenant)
    unsafe = notify_url_refused(definition, policy)
    if unsafe is not None:
        msg = f"the workers would refuse it: {unsafe}"
        raise HTTPException(422, [{"loc": ["body", "notify", "url"], "msg": msg}])
    unknown = unknown_pool(definition.target, svc.settings.known_pools)
    if unknown is not None:  # the scheduler would refuse it too: say so now
        raise HTTPException(422, [{"loc": ["body", "target", "pool"], "msg": unknown}])
    written = svc.write(lambda: svc.client.put(definition))
    job = svc.job(tenant, job_id, [written])
    if _applied_at(job, written.partition) < written.offset:  # the scheduler refused it
        refused = job.get("refused") or {}
        why = (
            refused.get("reason")
            if refused.get("source") == f"{written.partition}:{written.offset}"
            else "a concurrent write of this job was applied instead"
        )
        raise HTTPException(409, f"version {version} of job {job_id} was not applied: {why}")
    return job  # ours, or a newer write that followed it (one partition: offsets order)


def _applied_at(job: dict[str, Any], partition: int) -> int:
    """The schedules offset of the job's accepted definition on `partition` (-1: none)."""
    where, _, offset = str(job.get("source") or "").partition(":")
    return int(offset) if where == str(partition) and offset.isdigit() else -1


def _job_count(svc: Services, tenant: str, upto: int) -> int:
    """The tenant's jobs in the query view, counted up to `upto` (the job quota)."""
    return int(svc.view.get("/jobs-count", tenant=tenant, upto=upto)["jobs"])
