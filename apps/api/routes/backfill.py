"""Backfill: the occurrences of a past window a real run fires (dry run, the default), or that
run sent to the scheduler, and its progress as runs fired.

What a backfill fires is decided by one function, `streams.scheduler.backfill.plan`, on the
scheduler's facts: a dry run asks the scheduler for them (a Backfill with dry_run, answered by a
`backfill_planned` history record) and calls the same function on them here."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from fastapi import APIRouter, HTTPException

from apps.api.auth import Operator, Principal, Reader, tenant_of
from apps.api.deps import Services, Svc, check_id
from apps.api.routes.commands import send
from apps.api.schemas import BackfillProgress, BackfillShown
from kadence.api_requests import BackfillIn, RequestIn, window_problems
from kadence.clock import datetime_to_ms, ms_to_datetime
from kadence.models import Backfill
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.identity import execution_id
from streams.scheduler.backfill import DispatchFacts, plan
from streams.views.apply import shown_definition

router = APIRouter(tags=["commands"])
PLAN_WAIT_S = 15.0
"""How long a dry run waits for the scheduler's facts before answering 504."""
PLAN_SCAN = 200_000
"""Occurrences a dry run looks at at most; past them it says where to ask again."""
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
LISTED = 1_000
"""Already dispatched occurrences listed one by one at most (all are counted)."""


@router.post(
    "/v1/jobs/{job_id}/backfill", response_model=BackfillShown, response_model_exclude_unset=True
)
def backfill(svc: Svc, who: Operator, job_id: str, body: BackfillIn) -> Any:
    """Dry run (the default): the occurrences in [start, end) a real run fires, computed on the
    scheduler's facts. A real run sends them to the scheduler, which fires them paced (at most
    max_occurrences; 422 when the window has more: split it); 429 past the tenant's
    occurrences per minute. Follow it with GET .../backfill/{request_id}."""
    tenant = tenant_of(who)
    check_id(job_id)
    problems = window_problems(body.start, body.end)
    if problems:
        raise HTTPException(422, problems)
    job = svc.job(tenant, job_id)
    planned = _plan(svc, who, job_id, job, body)
    if body.dry_run:
        return planned
    if planned["left_out"]:
        raise HTTPException(
            422,
            [
                {
                    "loc": ["body", "max_occurrences"],
                    "msg": f"the window has more than {body.max_occurrences} occurrences to "
                    f"run ({planned['left_out']} more from {planned['resume_at']}); split it "
                    "(kadence backfill does) or raise max_occurrences",
                }
            ],
        )
    svc.quotas.backfill.take(tenant, len(planned["occurrences"]))  # 429 past the tenant's pace
    out = send(
        svc,
        who,
        job_id,
        Backfill,
        body,
        start=body.start,
        end=body.end,
        force=body.force,
        max_occurrences=body.max_occurrences,
    )
    return {**planned, **out, "dry_run": False}


@router.get(
    "/v1/jobs/{job_id}/backfill/{request_id}",
    response_model=BackfillProgress,
    response_model_exclude_unset=True,
)
def progress(svc: Svc, who: Reader, job_id: str, request_id: str) -> Any:
    """A backfill's progress as the scheduler reports it: runs fired so far, occurrences left
    out as already dispatched, whether it is done, and (when done) what was left out past
    max_occurrences and the part of the window the job had not reached. 404 until its first
    step."""
    tenant = tenant_of(who)
    check_id(job_id)
    if not REQUEST_ID.fullmatch(request_id):
        raise HTTPException(404, f"no backfill {request_id[:64]!r}")
    doc = svc.view.maybe(f"/jobs/{tenant}/{job_id}/backfills/{request_id}")
    if doc is None or doc["decision"] != "backfill_progress":
        raise HTTPException(404, f"no progress of backfill {request_id} yet")
    d = doc["details"]
    return {
        "request_id": request_id,
        "fired": int(d["fired"]),
        "already_dispatched": int(d["already_dispatched"]),
        "done": d["done"] == "true",
        "left_out": int(d.get("left_out", "0")),
        "left_out_counted_all": d.get("left_out_counted_all", "true") == "true",
        "resume_at": d.get("resume_at"),
        "not_reached_from": d.get("not_reached_from"),
        "reason": doc["reason"],
        "at": doc["at"],
    }


def _plan(svc: Services, who: Principal, job_id: str, job: Any, body: BackfillIn) -> dict[str, Any]:
    """The plan the scheduler would follow now: its facts for the window, asked with a dry-run
    Backfill, given to the scheduler's own plan function. Asking costs the scheduler a command
    and a history record, so it counts against the tenant's triggers per minute (429)."""
    tenant = tenant_of(who)
    svc.quotas.triggers.take(tenant)
    rid = f"plan-{uuid.uuid4().hex[:16]}"
    send(
        svc,
        who,
        job_id,
        Backfill,
        RequestIn(request_id=rid),
        start=body.start,
        end=body.end,
        force=body.force,
        dry_run=True,
    )
    doc = _await_facts(svc, tenant, job_id, rid)
    facts = DispatchFacts.from_details(doc["details"])
    d = shown_definition(job["definition"])
    start_ms, end_ms = datetime_to_ms(body.start), datetime_to_ms(body.end)
    p = plan(
        compile_schedule(d.schedule, d.key),
        facts,
        start_ms,
        end_ms,
        force=body.force,
        limit=body.max_occurrences,
        scan=PLAN_SCAN,
    )

    def entry(nominal_ms: int) -> dict[str, str]:
        at = ms_to_datetime(nominal_ms).isoformat()
        return {"execution_id": execution_id(d.key, nominal_ms), "nominal_at": at}

    resume = None if p.resume_at_ms is None else ms_to_datetime(p.resume_at_ms)
    return {
        "dry_run": True,
        "occurrences": [entry(o.nominal_ms) for o in p.runs],
        "already_dispatched": [entry(n) for n in p.dispatched[:LISTED]],
        "already_dispatched_count": len(p.dispatched),
        "left_out": p.left_out,
        "truncated": p.resume_after_ms is not None,
        "resume_at": None if resume is None else resume.isoformat(),
        "not_reached_from": None
        if p.until_ms >= end_ms
        else ms_to_datetime(p.until_ms).isoformat(),
        "definition_version": int(doc["details"].get("definition_version", 0)),
    }


def _await_facts(svc: Services, tenant: str, job_id: str, rid: str) -> dict[str, Any]:
    deadline = time.monotonic() + PLAN_WAIT_S
    pause = 0.02
    while True:
        doc = svc.view.maybe(f"/jobs/{tenant}/{job_id}/backfills/{rid}")
        if doc is not None and doc["decision"] == "backfill_planned":
            return dict(doc)
        if time.monotonic() > deadline:
            raise HTTPException(
                504,
                f"the scheduler did not answer the backfill dry run within {PLAN_WAIT_S:.0f} s "
                "(is it running and caught up?); nothing was fired",
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.2)
