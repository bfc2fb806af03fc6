"""Dead letters: the tenant's executions that gave up, and replaying one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, HTTPException
from pydantic import ValidationError

from apps.api.auth import tenant_of
from apps.api.deps import Auth, Services, Svc, invalid
from apps.api.routes.commands import RequestIn, request_id, send
from kadence.models import ExecutionRequested, ReplayDeadLetter

router = APIRouter(tags=["dead letters"])


@router.get("/v1/dead-letters")
def dead_letters(svc: Svc, who: Auth) -> Any:
    """Dead letters of the tenant (an admin without a tenant: all), with their state:
    dead, replayed, succeeded."""
    return svc.view.get("/dead-letters", tenant=who.tenant)


@router.post("/v1/dead-letters/{run_id:path}/replay", status_code=202)
def replay(svc: Svc, who: Auth, run_id: str, body: RequestIn | None = None) -> Any:
    """Run a dead-lettered execution again (same execution id, attempt 1): any dead letter the
    topic still holds (180 days), also one the job no longer remembers among its last 100, and
    one of a deleted job (that runs once, as the letter holds it, and is not retried)."""
    tenant = tenant_of(who)
    dead = svc.view.get(f"/dead-letters/{tenant}/{quote(run_id, safe='')}")
    letter = _read_back(svc, tenant, run_id, str(dead.get("source") or ""))
    if svc.view.maybe(f"/jobs/{tenant}/{dead['job_id']}") is not None:
        return send(
            svc, tenant, dead["job_id"], ReplayDeadLetter, body, execution_id=run_id, letter=letter
        )
    if letter is None:
        raise HTTPException(
            410,
            f"job {dead['job_id']} was deleted and its dead letter {run_id} is no longer on the "
            "dead-letter topic (retention): nothing to replay it from",
        )
    try:
        cmd = ReplayDeadLetter(
            tenant=tenant,
            job_id=dead["job_id"],
            request_id=request_id(body),
            issued_at=datetime.now(UTC),
            execution_id=run_id,
            letter=letter,
        )
    except ValidationError as exc:
        raise invalid(exc) from exc
    written = svc.write(lambda: svc.client.send(cmd, letter.concurrency_key))
    return {"request_id": cmd.request_id, "accepted": True, "offset": written.offset}


def _read_back(svc: Services, tenant: str, run_id: str, source: str) -> ExecutionRequested | None:
    """The dead letter's execution, read back where the view says the topic holds it."""
    partition, _, offset = source.partition(":")
    if not (partition.isdigit() and offset.isdigit()):
        return None  # a view record from before positions were kept
    found = svc.client.dead_letter(int(partition), int(offset))
    if found is None:
        return None
    ex = found.execution
    return ex if (ex.tenant, ex.execution_id) == (tenant, run_id) else None
