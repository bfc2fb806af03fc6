"""JWT bearer tokens, validated against a JWKS (KADENCE_API_JWKS_URL): an identity provider's
token acts as the tenant its tenant claim names, with the scopes its scopes claim lists; its
`sub` is the actor.

What is checked, in order: the token's size and shape; its header's `alg` among the accepted
asymmetric algorithms (never `none`, never HS*: a public key is no secret) and its `kid`; the
key of that id in the JWKS (cached; an unknown id fetches the set again at most once every
30 s, PyJWKClient's cooldown), whose algorithm must be the header's (PyJWT binds it); the
signature; `exp` (required), `nbf`, `iat`, `iss` and `aud`; then the claims Kadence reads, each
bounded. A JWKS that cannot be fetched is the service's fault, not the caller's: 503."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import jwt
from jwt import PyJWK, PyJWKClient
from jwt.exceptions import PyJWKClientConnectionError, PyJWKClientError

from kadence.api_tokens import ADMIN, SCOPES, check_tenant
from kadence.settings import KadenceSettings

MAX_JWT = 8192
"""Characters of a JWT at most (identity providers' stay far below)."""
MAX_SUB = 256
MAX_SCOPES = 64
"""Entries of a scopes claim looked at, at most (a longer one is refused)."""
JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
KID = re.compile(r"[\x21-\x7e]{1,256}")
SUB = re.compile(r"[^\x00-\x1f\x7f]{1,256}")


class JwtRefusedError(Exception):
    """The JWT is not accepted: `status` 401 (the caller's token), 503 (the JWKS)."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status
        self.why = why


@dataclass(frozen=True)
class JwtCaller:
    tenant: str
    scopes: frozenset[str]
    actor: str
    """`jwt:` and the token's `sub`."""


def looks_like_jwt(token: str) -> bool:
    return token.startswith("eyJ") and JWT_SHAPE.fullmatch(token) is not None


class JwtBearer:
    """One API's JWT check, with its JWKS client (and cache)."""

    def __init__(self, settings: KadenceSettings, client: PyJWKClient | None = None) -> None:
        self.issuer = settings.api_jwt_issuer
        self.audience = settings.api_jwt_audience
        self.algorithms = list(settings.api_jwt_algorithms)
        self.tenant_claim = settings.api_jwt_tenant_claim
        self.scopes_claim = settings.api_jwt_scopes_claim
        self.leeway = settings.api_jwt_leeway_s
        self.client = client or PyJWKClient(
            settings.api_jwks_url,
            cache_keys=False,
            lifespan=settings.api_jwks_cache_s,
            timeout=settings.api_jwks_timeout_s,
        )

    def caller(self, token: str, *, fetch: bool = True) -> JwtCaller:
        """The caller a JWT names; JwtRefusedError otherwise. Without `fetch`, only a JWKS already
        fetched and not expired is used (else 401: the caller is not known yet)."""
        if len(token) > MAX_JWT:
            raise JwtRefusedError(401, f"JWT over {MAX_JWT} characters")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise JwtRefusedError(401, "JWT: malformed header") from None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in self.algorithms:
            raise JwtRefusedError(
                401,
                f"JWT: algorithm {str(alg)[:16]!r} not accepted (accepted: "
                f"{', '.join(self.algorithms)})",
            )
        if not isinstance(kid, str) or not KID.fullmatch(kid):
            raise JwtRefusedError(401, "JWT: no key id (kid) in its header")
        try:
            key = self.client.get_signing_key(kid) if fetch else self._cached(kid)
        except PyJWKClientConnectionError:
            raise JwtRefusedError(
                503, "the identity provider's JWKS cannot be fetched now"
            ) from None
        except PyJWKClientError:
            raise JwtRefusedError(401, f"JWT: no key {kid[:64]!r} in the JWKS") from None
        try:
            claims = jwt.decode(  # the key's own algorithm must be the header's
                token,
                key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "sub", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise JwtRefusedError(401, "JWT: expired") from None
        except jwt.InvalidAudienceError:
            raise JwtRefusedError(401, "JWT: not for this audience (aud)") from None
        except jwt.InvalidIssuerError:
            raise JwtRefusedError(401, "JWT: not from the accepted issuer (iss)") from None
        except jwt.InvalidSignatureError:
            raise JwtRefusedError(401, "JWT: bad signature") from None
        except jwt.InvalidAlgorithmError:
            raise JwtRefusedError(401, f"JWT: key {kid[:64]!r} is not an {alg} key") from None
        except jwt.InvalidTokenError as exc:
            raise JwtRefusedError(401, f"JWT: {str(exc)[:200]}") from None
        return self._caller(claims)

    def _cached(self, kid: str) -> PyJWK:
        cache = self.client.jwk_set_cache
        found = None if cache is None else cache.get()
        key = next((k for k in (found.keys if found else []) if k.key_id == kid), None)
        if key is None:
            raise PyJWKClientError(f"no cached key {kid}")
        return key

    def _caller(self, claims: dict[str, Any]) -> JwtCaller:
        sub = claims.get("sub")
        if not isinstance(sub, str) or not SUB.fullmatch(sub):
            raise JwtRefusedError(401, f"JWT: sub must be 1-{MAX_SUB} printable characters")
        tenant = claims.get(self.tenant_claim)
        if not isinstance(tenant, str) or len(tenant) > 128:
            raise JwtRefusedError(401, f"JWT: no tenant in its {self.tenant_claim!r} claim")
        try:
            check_tenant(tenant)
        except ValueError as exc:
            raise JwtRefusedError(401, f"JWT: {self.tenant_claim}: {exc}") from None
        if tenant == ADMIN:
            raise JwtRefusedError(401, "JWT: a JWT never acts as admin (`*`); use an admin token")
        raw = claims.get(self.scopes_claim, [])
        if isinstance(raw, str):
            raw = raw.split(" ", MAX_SCOPES)
        if not isinstance(raw, list) or len(raw) > MAX_SCOPES:
            raise JwtRefusedError(
                401, f"JWT: {self.scopes_claim} must be a string or a list of {MAX_SCOPES} at most"
            )
        if not all(isinstance(s, str) for s in raw):
            raise JwtRefusedError(401, f"JWT: {self.scopes_claim} holds something not a string")
        scopes = frozenset(s for s in raw if s in SCOPES)
        return JwtCaller(tenant, scopes, f"jwt:{sub}")
