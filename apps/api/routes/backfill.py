"""Backfill: the occurrences of a past window a real run would dispatch (dry run, the
default), or those occurrences sent to the scheduler, paced by the tenant's quota."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import Field

from apps.api.auth import tenant_of
from apps.api.deps import Auth, Services, Svc, check_id
from apps.api.routes.commands import RequestIn, send
from kadence.clock import datetime_to_ms, ms_to_datetime
from kadence.models import Backfill, ScheduleDefinition
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.identity import execution_id
from streams.views.apply import definition_of

router = APIRouter(tags=["commands"])


class BackfillIn(RequestIn):
    start: datetime
    end: datetime
    dry_run: bool = True
    force: bool = False
    max_occurrences: int = Field(default=1_000, ge=1, le=10_000)


@router.post("/v1/jobs/{job_id}/backfill")
def backfill(svc: Svc, who: Auth, job_id: str, body: BackfillIn) -> Any:
    """Dry run (the default): the occurrences in [start, end) a real run would dispatch.
    A real run sends them to the scheduler (at most max_occurrences per request; the CLI
    splits a long window and paces it); 429 past the tenant's occurrences per minute."""
    tenant = tenant_of(who)
    check_id(job_id)
    if body.start.tzinfo is None or body.end.tzinfo is None:
        raise HTTPException(
            422, [{"loc": ["body", "start"], "msg": "start and end need a UTC offset"}]
        )
    if body.end <= body.start:
        raise HTTPException(422, [{"loc": ["body", "end"], "msg": "end must be after start"}])
    job = svc.job(tenant, job_id)
    plan = _plan(svc, tenant, job_id, job, body)
    if body.dry_run:
        return plan
    if plan["truncated"]:
        raise HTTPException(
            422,
            [
                {
                    "loc": ["body", "max_occurrences"],
                    "msg": f"the window has more than {body.max_occurrences} occurrences; "
                    "split it "
                    "(kadence backfill does) or raise max_occurrences",
                }
            ],
        )
    svc.quotas.backfill.take(tenant, len(plan["occurrences"]))  # 429 past the tenant's pace
    out = send(
        svc,
        tenant,
        job_id,
        Backfill,
        body,
        start=body.start,
        end=body.end,
        force=body.force,
        max_occurrences=body.max_occurrences,
    )
    return {**plan, **out, "dry_run": False}


def _plan(svc: Services, tenant: str, job_id: str, job: Any, body: BackfillIn) -> dict[str, Any]:
    """The window's occurrences up to now, less those already run (unless `force`)."""
    d = ScheduleDefinition.model_validate(definition_of(job["definition"]))
    compiled = compile_schedule(d.schedule, d.key)
    end_ms = min(datetime_to_ms(body.end), int(time.time() * 1000) + 1)
    cursor = datetime_to_ms(body.start) - 1
    seen = {
        r["execution_id"]
        for r in svc.view.get(f"/jobs/{tenant}/{job_id}/runs", limit=500)
        if r["status"] != "pending"
    }
    out: list[dict[str, str]] = []
    skipped: list[dict[str, str]] = []
    truncated = False
    while (occ := compiled.next_after(cursor)) is not None and occ.nominal_ms < end_ms:
        cursor = occ.nominal_ms
        eid = execution_id(d.key, occ.nominal_ms)
        entry = {"execution_id": eid, "nominal_at": ms_to_datetime(occ.nominal_ms).isoformat()}
        if eid in seen and not body.force:
            skipped.append(entry)
        elif len(out) >= body.max_occurrences:
            truncated = True
            break
        else:
            out.append(entry)
    return {
        "dry_run": True,
        "occurrences": out,
        "already_dispatched": skipped,
        "truncated": truncated,
    }
