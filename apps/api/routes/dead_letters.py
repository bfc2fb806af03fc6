"""Dead letters: the tenant's executions that gave up, and replaying one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Query
from pydantic import ValidationError

from apps.api.auth import Operator, Reader, tenant_of
from apps.api.deps import Services, Svc, invalid
from apps.api.replays import letter_request_id
from apps.api.routes.commands import send
from apps.api.schemas import Accepted, DeadLetterShown
from kadence.api_requests import RequestIn
from kadence.models import ExecutionRequested, ReplayDeadLetter

router = APIRouter(tags=["dead letters"])


@router.get(
    "/v1/dead-letters", response_model=list[DeadLetterShown], response_model_exclude_unset=True
)
def dead_letters(
    svc: Svc,
    who: Reader,
    *,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    after: Annotated[
        str, Query(max_length=600, description="the last execution_id of a page")
    ] = "",
    job_id: Annotated[str, Query(max_length=128)] = "",
    state: Annotated[Literal["", "dead", "replayed", "succeeded"], Query()] = "",
    reason: Annotated[str, Query(max_length=64)] = "",
) -> Any:
    """Dead letters of the tenant (an admin without a tenant: all), in execution id order, a
    page at a time (`after`: the previous page's last execution_id), with their state: dead,
    replayed, succeeded. `job_id`, `state` and `reason` keep only those that match."""
    return svc.view.get(
        "/dead-letters",
        tenant=who.tenant,
        limit=limit,
        after=after,
        job_id=job_id,
        state=state,
        reason=reason,
    )


@router.post(
    "/v1/dead-letters/{run_id:path}/replay",
    status_code=202,
    response_model=Accepted,
    response_model_exclude_unset=True,
)
def replay(svc: Svc, who: Operator, run_id: str, body: RequestIn | None = None) -> Any:
    """Run a dead-lettered execution again (same execution id, attempt 1): any dead letter the
    topic still holds (180 days), also one the job no longer remembers among its last 100, and
    one of a deleted job (that runs once, as the letter holds it, and is not retried).
    429 past the tenant's replays per minute; 409 (naming the first's request id) while a
    replay of the same letter is pending or running. The default request id derives from the
    letter, so a replay sent twice runs once."""
    tenant = tenant_of(who)
    svc.quotas.replays.take(tenant)
    dead = svc.view.get(f"/dead-letters/{tenant}/{quote(run_id, safe='')}")
    svc.replays.check(tenant, dead)
    body = body or RequestIn()
    body.request_id = body.request_id or letter_request_id(dead)
    letter = _read_back(svc, tenant, run_id, str(dead.get("source") or ""))
    if svc.view.maybe(f"/jobs/{tenant}/{dead['job_id']}") is not None:
        out = send(
            svc, who, dead["job_id"], ReplayDeadLetter, body, execution_id=run_id, letter=letter
        )
        svc.replays.sent(tenant, dead, body.request_id)
        return out
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
            request_id=body.request_id,
            issued_at=datetime.now(UTC),
            execution_id=run_id,
            letter=letter,
            actor=who.actor or None,
        )
    except ValidationError as exc:
        raise invalid(exc) from exc
    written = svc.write(lambda: svc.client.send(cmd, letter.concurrency_key))
    svc.replays.sent(tenant, dead, cmd.request_id)
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
