"""The API's and the query view's settings (kadence/settings.py's KadenceSettings has them as its
own fields: KADENCE_API_PORT and the rest). Here so that each file stays one sitting long."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from kadence.models.base import IDENT_RE
from kadence.tenant_ids import reserved_tenant


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
    api_tokens: dict[str, str] = Field(default_factory=dict)
    """Bearer tokens, stored hashed: sha256 hex of the token -> the tenant it acts as (JSON
    object). The tenant `*` is the admin role (operators: every tenant, via the
    X-Kadence-Tenant header). `kadence token` makes a token and its hash. A tenant id starting
    with `kadence` is refused: those name Kadence's own principals (kadence/tenant_ids.py)."""
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
    def _token_tenants(cls, value: dict[str, str]) -> dict[str, str]:
        """Where a tenant comes into being: an identifier, and none Kadence keeps for itself
        (never echoing a key: it is a token's hash)."""
        for tenant in value.values():
            if tenant == "*":
                continue
            if not IDENT_RE.fullmatch(tenant):
                raise ValueError(f'{tenant!r} is neither a tenant identifier nor "*" (admin)')
            why = reserved_tenant(tenant)
            if why is not None:
                raise ValueError(why)
        return value

    @model_validator(mode="after")
    def _unauthenticated_below_all(self) -> ApiSettings:
        limit = self.api_max_unauthenticated
        if limit is not None and limit >= self.api_max_connections:
            raise ValueError(
                f"api_max_unauthenticated ({limit}) must be below api_max_connections "
                f"({self.api_max_connections}): else clients without a token fill every slot"
            )
        return self
