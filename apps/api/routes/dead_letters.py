"""Dead letters: the tenant's executions that gave up, and replaying one."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter

from apps.api.auth import tenant_of
from apps.api.deps import Auth, Svc
from apps.api.routes.commands import RequestIn, send
from kadence.models import ReplayDeadLetter

router = APIRouter(tags=["dead letters"])


@router.get("/v1/dead-letters")
def dead_letters(svc: Svc, who: Auth) -> Any:
    """Dead letters of the tenant (an admin without a tenant: all), with their state:
    dead, replayed, succeeded."""
    return svc.view.get("/dead-letters", tenant=who.tenant)


@router.post("/v1/dead-letters/{run_id:path}/replay", status_code=202)
def replay(svc: Svc, who: Auth, run_id: str, body: RequestIn | None = None) -> Any:
    """Run a dead-lettered execution again (same execution id, attempt 1)."""
    tenant = tenant_of(who)
    dead = svc.view.get(f"/dead-letters/{tenant}/{quote(run_id, safe='')}")
    return send(svc, tenant, dead["job_id"], ReplayDeadLetter, body, execution_id=run_id)
