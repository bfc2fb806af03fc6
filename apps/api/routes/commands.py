"""Commands to a job: pause, resume, trigger now, cancel a run. Each answers 202 once the
command is on its topic; `send` is also how backfill and dead-letter replay send theirs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import ValidationError

from apps.api.auth import Operator, Principal, tenant_of
from apps.api.deps import Services, Svc, check_id, invalid
from apps.api.schemas import Accepted, Triggered
from kadence.api_requests import RequestIn, TriggerIn
from kadence.envelope import payload_refusal
from kadence.models import CancelRun, Command, DeliveryFormat, PauseJob, ResumeJob, TriggerNow
from kadence.timeengine.identity import manual_execution_id

router = APIRouter(tags=["commands"])


def send(
    svc: Services,
    who: Principal,
    job_id: str,
    kind: type[Command],
    body: RequestIn | None,
    **fields: Any,
) -> Any:
    """Send `kind` for the caller's job (404 if it has none), naming the caller as its actor:
    the request id from the body (or a new one), the rest from `fields`."""
    tenant = tenant_of(who)
    check_id(job_id)
    job = svc.job(tenant, job_id)
    ck = job["definition"].get("concurrency_key")
    try:
        cmd = kind(
            tenant=tenant,
            job_id=job_id,
            request_id=request_id(body),
            issued_at=datetime.now(UTC),
            actor=who.actor or None,
            **fields,
        )
    except ValidationError as exc:
        raise invalid(exc) from exc
    if isinstance(cmd, TriggerNow) and cmd.payload is not None:
        fits_target(job["definition"].get("target") or {}, cmd.payload)
    written = svc.write(lambda: svc.client.send(cmd, ck))
    return {"request_id": cmd.request_id, "accepted": True, "offset": written.offset}


def fits_target(target: dict[str, Any], payload: bytes) -> None:
    """422 when the job's target is a JSON-format Kafka topic whose envelope cannot hold
    `payload` (the scheduler would refuse the trigger: kadence/envelope.py)."""
    if target.get("kind") == "kafka" and target.get("format") == DeliveryFormat.json.value:
        reason = payload_refusal(payload)
        if reason is not None:
            raise HTTPException(422, [{"loc": ["body", "payload"], "msg": reason}])


def request_id(body: RequestIn | None) -> str:
    return (body.request_id if body and body.request_id else None) or uuid.uuid4().hex


@router.post(
    "/v1/jobs/{job_id}/pause",
    status_code=202,
    response_model=Accepted,
    response_model_exclude_unset=True,
)
def pause(svc: Svc, who: Operator, job_id: str, body: RequestIn | None = None) -> Any:
    reason = body.reason if body else ""
    return send(svc, who, job_id, PauseJob, body, reason=reason)


@router.post(
    "/v1/jobs/{job_id}/resume",
    status_code=202,
    response_model=Accepted,
    response_model_exclude_unset=True,
)
def resume(svc: Svc, who: Operator, job_id: str, body: RequestIn | None = None) -> Any:
    reason = body.reason if body else ""
    return send(svc, who, job_id, ResumeJob, body, reason=reason)


@router.post(
    "/v1/jobs/{job_id}/trigger",
    status_code=202,
    response_model=Triggered,
    response_model_exclude_unset=True,
)
def trigger(svc: Svc, who: Operator, job_id: str, body: TriggerIn | None = None) -> Any:
    """Run once now. Idempotent by request_id: the run's execution id derives from it.
    429 past the tenant's triggers per minute; 422 when a JSON-format Kafka target's envelope
    cannot hold the payload."""
    svc.quotas.triggers.take(tenant_of(who))
    body = body or TriggerIn()
    body.request_id = request_id(body)  # fixed here: the execution id derives from it
    out = send(svc, who, job_id, TriggerNow, body, payload=body.payload)
    eid = manual_execution_id(f"{tenant_of(who)}/{job_id}", body.request_id)
    return {**out, "execution_id": eid}


@router.post(
    "/v1/jobs/{job_id}/runs/{run_id:path}/cancel",
    status_code=202,
    response_model=Accepted,
    response_model_exclude_unset=True,
)
def cancel(svc: Svc, who: Operator, job_id: str, run_id: str, body: RequestIn | None = None) -> Any:
    """Stop a run in flight, a pending retry, or a run dispatched ahead of its due time."""
    tenant = tenant_of(who)
    if not run_id.startswith(f"{tenant}/{job_id}@"):
        raise HTTPException(404, f"no run {run_id} of job {job_id}")
    reason = body.reason if body else ""
    return send(svc, who, job_id, CancelRun, body, execution_id=run_id, reason=reason)
