"""The API's and the query view's settings (kadence/settings.py's KadenceSettings has them as its
own fields: KADENCE_API_PORT and the rest). Here so that each file stays one sitting long."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from kadence.api_tokens import MAX_TOKENS, TokenEntry, tokens_of

JwtAlgorithm = Literal[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"
]
CLAIM_NAME = r"^[A-Za-z0-9_.:/-]{1,128}$"


class ApiSettings(BaseModel):
    """Where the API listens, what it holds at once, who may call it, the tenants' quotas (the
    ingress applies them too), and where the query view is."""

    api_host: str = "127.0.0.1"
    api_port: Annotated[int, Field(ge=0, le=65_535)] = 8080
    """Where the HTTP API and dashboard listen (apps/api/; port 0: one the system picks)."""
    api_max_connections: Annotated[int, Field(ge=2, le=100_000)] = 256
    """Connections (and requests in progress) the API holds at once at most (uvicorn's
    `limit_concurrency`); past it a request is answered 503 at once. Bounds what a flood of
    clients makes the API hold: a body is read only from a caller with a known token, up to
    the payload limit plus 64 KiB each."""
    api_max_unauthenticated: Annotated[int, Field(ge=1, le=100_000)] | None = None
    """Of those, connections no request has shown a known token on (None: a quarter of
    `api_max_connections`; must be below it): one more closes the oldest of them that is not
    in a request, so clients without a token cannot crowd out those with one
    (apps/api/slow_clients.py)."""
    api_head_timeout_s: Annotated[float, Field(gt=0, le=300)] = 5.0
    """Each request's head (request line and headers) must arrive whole within this many
    seconds of the connection's opening or of the previous answer, or the connection is
    closed."""
    api_body_timeout_s: Annotated[float, Field(gt=0, le=3_600)] = 30.0
    """A known caller's request body must arrive whole within this many seconds of its head,
    or it is answered 408 and the connection closed."""
    api_tokens: Annotated[dict[str, TokenEntry], Field(max_length=MAX_TOKENS)] = Field(
        default_factory=dict
    )
    """Bearer tokens, stored hashed (JSON object): sha256 hex of the token -> the tenant it
    acts as, with every scope, named `sha256:` and the hash's first 12 digits; or -> `{"name":
    "ci", "tenant": "acme", "scopes": ["read", "operate"]}` (scopes: read, operate, manage;
    docs/security.md). The tenant `*` is the admin role (operators: every tenant, via the
    X-Kadence-Tenant header). `kadence token` makes a token and its entry. A tenant id starting
    with `kadence` is refused: those name Kadence's own principals (kadence/tenant_ids.py)."""
    api_tokens_file: Path | None = None
    """A JSON file of more tokens, in the form of `api_tokens`, that the API reads again when
    it changes (checked at most once a second): tokens are added, rotated and revoked without
    a restart. A file the API cannot read or parse keeps the tokens it had (and says why in its
    log); at start it must be valid. A hash or name in both is refused."""
    api_jwks_url: str = ""
    """Also accept JWT bearer tokens signed by a key of this JWKS (http or https URL; empty:
    no JWTs). Their `sub` is the actor; `api_jwt_tenant_claim` and `api_jwt_scopes_claim` say
    what they may do. A JWT never acts as admin."""
    api_jwt_issuer: Annotated[str, Field(max_length=1024)] = ""
    api_jwt_audience: Annotated[str, Field(max_length=1024)] = ""
    """The `iss` and `aud` a JWT must carry (both required with `api_jwks_url`)."""
    api_jwt_algorithms: Annotated[list[JwtAlgorithm], Field(min_length=1, max_length=10)] = [
        "RS256",
        "ES256",
    ]
    """Signature algorithms accepted (asymmetric only: `none` and HS* never are)."""
    api_jwt_tenant_claim: Annotated[str, Field(pattern=CLAIM_NAME)] = "kadence_tenant"
    """The claim naming the tenant a JWT acts as."""
    api_jwt_scopes_claim: Annotated[str, Field(pattern=CLAIM_NAME)] = "scope"
    """The claim with its scopes: a space-separated string (OAuth 2's `scope`) or a list;
    names other than read, operate and manage are ignored."""
    api_jwt_leeway_s: Annotated[int, Field(ge=0, le=300)] = 30
    """Clock skew allowed on `exp`, `nbf` and `iat`."""
    api_jwks_cache_s: Annotated[int, Field(ge=10, le=86_400)] = 300
    """How long the JWKS is kept before it is fetched again; a JWT with a key id the cached set
    lacks fetches it again at most once every 30 s (a rotation)."""
    api_jwks_timeout_s: Annotated[float, Field(gt=0, le=30)] = 5.0
    """A JWKS fetch's time limit; a JWKS that cannot be fetched answers 503."""
    api_quota_jobs: Annotated[int, Field(ge=0, le=100_000_000)] = 10_000
    """Jobs one tenant may have; creating one more is refused, through the API with 429, through
    its ingress topic with a `quota_exceeded` rejected record (0: no limit). Counted in the
    query view; updates and deletes are never refused."""
    api_quota_jobs_by_tenant: dict[str, Annotated[int, Field(ge=0, le=100_000_000)]] = Field(
        default_factory=dict
    )
    """`api_quota_jobs` of the tenants named (JSON object tenant -> jobs; 0: no limit)."""
    api_quota_backfill_per_minute: Annotated[int, Field(ge=0, le=10_000_000)] = 6_000
    """Occurrences one tenant's real (not dry-run) backfills may send per minute, paced by each
    API and ingress process (a token bucket holding one minute's worth); past it 429 with
    Retry-After, or `quota_exceeded` at the ingress, where a backfill counts its
    max_occurrences (0: no limit). A request with more occurrences than this is refused."""
    api_quota_backfill_per_minute_by_tenant: dict[
        str, Annotated[int, Field(ge=0, le=10_000_000)]
    ] = Field(default_factory=dict)
    """`api_quota_backfill_per_minute` of the tenants named (JSON object; 0: no limit)."""
    api_quota_triggers_per_minute: Annotated[int, Field(ge=0, le=10_000_000)] = 600
    """Trigger-now requests one tenant may make per minute, per API or ingress process (a token
    bucket holding one minute's worth); past it 429 with Retry-After, or `quota_exceeded` at
    the ingress (0: no limit)."""
    api_quota_triggers_per_minute_by_tenant: dict[
        str, Annotated[int, Field(ge=0, le=10_000_000)]
    ] = Field(default_factory=dict)
    """`api_quota_triggers_per_minute` of the tenants named (JSON object; 0: no limit)."""
    api_quota_replays_per_minute: Annotated[int, Field(ge=0, le=10_000_000)] = 600
    """Dead-letter replay requests one tenant may make per minute, per API or ingress process
    (a token bucket holding one minute's worth); past it 429 with Retry-After, or
    `quota_exceeded` at the ingress (0: no limit)."""
    api_quota_replays_per_minute_by_tenant: dict[
        str, Annotated[int, Field(ge=0, le=10_000_000)]
    ] = Field(default_factory=dict)
    """`api_quota_replays_per_minute` of the tenants named (JSON object; 0: no limit)."""
    view_port: Annotated[int, Field(ge=0, le=65_535)] = 8766
    """The query view process (jobs, history, dead letters) listens here on 127.0.0.1."""
    view_url: str = "http://127.0.0.1:8766"
    """Where the API and the ingress find the query view."""
    view_token: SecretStr = SecretStr("")
    """The secret the API and the ingress show the query view (header X-Kadence-View-Token);
    the view answers nobody else. Give them all the same value; `make run` makes a random one
    for its children when it is empty, and a view started without one refuses to start."""
    view_hosts: list[str] = Field(default_factory=list)
    """Host names the query view answers to besides loopback (127.0.0.1, ::1, localhost), for a
    view_url that names another host (JSON list). Any other Host header is refused (DNS
    rebinding)."""

    @field_validator("api_tokens")
    @classmethod
    def _tokens(cls, value: dict[str, TokenEntry]) -> dict[str, TokenEntry]:
        """Where a tenant comes into being: an identifier, and none Kadence keeps for itself
        (never echoing a key: it is a token's hash)."""
        tokens_of(value)
        return value

    @field_validator("api_jwks_url")
    @classmethod
    def _jwks_url(cls, url: str) -> str:
        if url and (len(url) > 2048 or urlsplit(url).scheme not in ("http", "https")):
            raise ValueError("api_jwks_url must be an http or https URL (2048 characters)")
        return url

    @model_validator(mode="after")
    def _jwt_complete(self) -> ApiSettings:
        if self.api_jwks_url and not (self.api_jwt_issuer and self.api_jwt_audience):
            raise ValueError(
                "api_jwks_url needs api_jwt_issuer and api_jwt_audience: a JWT of another "
                "issuer or for another service must not be accepted"
            )
        return self

    @model_validator(mode="after")
    def _unauthenticated_below_all(self) -> ApiSettings:
        limit = self.api_max_unauthenticated
        if limit is not None and limit >= self.api_max_connections:
            raise ValueError(
                f"api_max_unauthenticated ({limit}) must be below api_max_connections "
                f"({self.api_max_connections}): else clients without a token fill every slot"
            )
        return self
