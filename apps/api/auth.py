"""Who is calling: a bearer token, looked up by its SHA-256 in KADENCE_API_TOKENS, names the
tenant it acts as; `*` is the admin role. Tokens are never stored or logged in clear."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from fastapi import Header, HTTPException, Request

from kadence.models.base import IDENT_RE
from kadence.tenant_ids import reserved_tenant

ADMIN = "*"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> tuple[str, str]:
    """A fresh token and the hash to configure (`kadence token`)."""
    token = "kdn_" + secrets.token_urlsafe(32)
    return token, token_hash(token)


@dataclass(frozen=True)
class Principal:
    tenant: str | None
    """The tenant every request acts on; None for an admin listing across tenants."""
    admin: bool


def _unauthorized(why: str) -> HTTPException:
    return HTTPException(401, why, headers={"WWW-Authenticate": "Bearer"})


def is_bearer(authorization: str | None) -> bool:
    return authorization is not None and authorization.lower().startswith("bearer ")


def token_tenant(tokens: Mapping[str, str], authorization: str | None) -> str | None:
    """The tenant (`*`: admin) the bearer token in an Authorization header acts as; None when
    the header is absent, not a bearer token, or the token is unknown. Cheap (one SHA-256), so
    it can run before a request's body is read (apps/api/body_limit.py)."""
    if authorization is None or not is_bearer(authorization):
        return None
    digest = token_hash(authorization[7:].strip())
    return next((t for h, t in tokens.items() if hmac.compare_digest(h, digest)), None)


def authenticate(
    request: Request,
    authorization: str | None = Header(default=None),
    x_kadence_tenant: str | None = Header(default=None),
) -> Principal:
    tokens: dict[str, str] = request.app.state.settings.api_tokens
    if not is_bearer(authorization):
        raise _unauthorized("missing bearer token (Authorization: Bearer <token>)")
    tenant = token_tenant(tokens, authorization)
    if tenant is None:
        raise _unauthorized("unknown token")
    if tenant != ADMIN:
        return Principal(tenant, admin=False)
    if x_kadence_tenant is not None and not IDENT_RE.fullmatch(x_kadence_tenant):
        raise HTTPException(422, "X-Kadence-Tenant: not a tenant identifier")
    if x_kadence_tenant is not None and (why := reserved_tenant(x_kadence_tenant)) is not None:
        raise HTTPException(422, f"X-Kadence-Tenant: {why}")
    return Principal(x_kadence_tenant, admin=True)


def tenant_of(p: Principal) -> str:
    """The tenant a job-scoped request acts on (an admin names it in X-Kadence-Tenant)."""
    if p.tenant is None:
        raise HTTPException(422, "X-Kadence-Tenant: an admin names the tenant to act on")
    return p.tenant
