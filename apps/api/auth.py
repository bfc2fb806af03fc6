"""The caller of a route (apps/api/callers.py says how one is known): the tenant it acts on,
its scopes and its name for the audit trail. A route asks for the scope it needs with
`require_scope` (`Reader`, `Operator`, `Manager`): 403 names the scope it lacks."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from apps.api.callers import Callers, NotAuthenticatedError
from apps.api.token_book import token_hash
from kadence.api_tokens import ADMIN, SCOPES, Scope
from kadence.models.base import IDENT_RE
from kadence.tenant_ids import reserved_tenant

__all__ = ["ADMIN", "Principal", "authenticate", "new_token", "require_scope", "token_hash"]

NEEDS = {
    "read": "reading the tenant's jobs, runs, history, dead letters and connections",
    "operate": "pause, resume, trigger, cancel, backfill and replay",
    "manage": "creating, changing and deleting the tenant's jobs and connections",
}


def new_token() -> tuple[str, str]:
    """A fresh token and the hash to configure (`kadence token`)."""
    token = "kdn_" + secrets.token_urlsafe(32)
    return token, token_hash(token)


@dataclass(frozen=True)
class Principal:
    tenant: str | None
    """The tenant every request acts on; None for an admin listing across tenants."""
    admin: bool
    actor: str = ""
    """Who, for the audit trail: `token:<name>` or `jwt:<sub>`."""
    scopes: frozenset[str] = frozenset(SCOPES)


def _unauthorized(status: int, why: str) -> HTTPException:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {"Retry-After": "5"}
    return HTTPException(status, why, headers=headers)


def authenticate(
    request: Request,
    authorization: str | None = Header(default=None),
    x_kadence_tenant: str | None = Header(default=None),
) -> Principal:
    callers: Callers = request.app.state.callers
    try:
        caller = callers.identify(authorization)
    except NotAuthenticatedError as exc:
        raise _unauthorized(exc.status, exc.why) from None
    if caller.tenant != ADMIN:
        return Principal(caller.tenant, False, caller.actor, caller.scopes)
    if x_kadence_tenant is not None and not IDENT_RE.fullmatch(x_kadence_tenant):
        raise HTTPException(422, "X-Kadence-Tenant: not a tenant identifier")
    if x_kadence_tenant is not None and (why := reserved_tenant(x_kadence_tenant)) is not None:
        raise HTTPException(422, f"X-Kadence-Tenant: {why}")
    return Principal(x_kadence_tenant, True, caller.actor, caller.scopes)


def require_scope(scope: Scope) -> Callable[[Principal], Principal]:
    """A dependency: the caller, if its token has `scope` (else 403 saying which it lacks)."""

    def scoped(who: Annotated[Principal, Depends(authenticate)]) -> Principal:
        if scope not in who.scopes:
            has = ", ".join(s for s in SCOPES if s in who.scopes) or "none"
            raise HTTPException(
                403,
                f"{who.actor} lacks the {scope!r} scope ({NEEDS[scope]} need it); its scopes: "
                f"{has}",
            )
        return who

    return scoped


Reader = Annotated[Principal, Depends(require_scope("read"))]
Operator = Annotated[Principal, Depends(require_scope("operate"))]
Manager = Annotated[Principal, Depends(require_scope("manage"))]


def tenant_of(p: Principal) -> str:
    """The tenant a job-scoped request acts on (an admin names it in X-Kadence-Tenant)."""
    if p.tenant is None:
        raise HTTPException(422, "X-Kadence-Tenant: an admin names the tenant to act on")
    return p.tenant
