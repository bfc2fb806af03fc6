"""The HTTP webhook target: the payload, signed, to a vetted address, no redirects.

Headers (Standard Webhooks style, plus Kadence's own):
- `webhook-id` (= the execution id, the idempotency key), `webhook-timestamp` (unix seconds),
  `webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` when the target
  names a `secret_ref` the worker holds for the job's tenant (or for every tenant, "*");
- `idempotency-key`, `kadence-execution-id`, `kadence-attempt`, `kadence-delivery`,
  `kadence-due-at`, `kadence-tenant`, `kadence-job`.
Kadence's headers win over the job's own, whatever their case (kadence.headers.with_own).
The target's `method` (GET and DELETE without a body unless the run has a payload) and `query`
(after the URL's own). The target's `success_statuses` succeed (any 2xx by default); a failing
status in its `retryable_statuses` (408, 425, 429 and 5xx by default) fails retryably, any
other (3xx included: redirects are not followed) for good (kadence/models/statuses.py).
Connection errors are retryable; the deadline is `timed_out`.
Each attempt's result keeps the answer's status, its body's first KiB and the headers the target
names in `result_headers` (connectors/results.py).
The exchange (connectors/http_exchange.py): names resolved and cached (connectors/http_dns.py),
every address checked for the job's tenant and tried in turn, the answer read by llhttp (httptools;
h11 for the legacy heads llhttp refuses: connectors/http_conn.py) within the run's deadline; the
answer's head decides the run. Connections are kept alive and reused by the same tenant's runs to
the same checked address (connectors/http_pool.py), opened ahead of runs due soon
(connectors/http_warm.py), and closed when anything arrives that no request asked for. A request is
never sent twice by the client.
Requests run as coroutines on the target's event loop (connectors/aio.py): `start` holds no
thread while the target answers, and a stop aborts the request at once; the blocking call
waits for the same coroutine.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import ssl
import time
from collections.abc import Mapping
from concurrent.futures import Future
from typing import TypeVar
from urllib.parse import urlencode

from pydantic import SecretStr

from connectors.aio import EventLoop
from connectors.credentials import Applied, ConnectionRefused, Credentials
from connectors.http_conn import Answer
from connectors.http_dns import Resolver
from connectors.http_exchange import checked_exchange, timeout_error
from connectors.http_pool import ConnectionPool
from connectors.http_warm import LEAD_S, Warmer
from connectors.results import http_result
from connectors.ssrf import AddressPolicy
from kadence.connections import ConnectionSource
from kadence.headers import iso_utc, with_own
from kadence.models import ExecutionRequested, HttpTarget, OutcomeStatus
from kadence.models.statuses import DEFAULT_RETRYABLE, DEFAULT_SUCCESS, status_set
from kadence.models.targets import with_query
from kadence.sealing import Keyring
from kadence.targets import Result, Stop
from kadence.throttle import Throttle, destination_of

BODYLESS = frozenset({"GET", "DELETE"})
"""Methods whose request has no content unless the run has a payload (RFC 9110 9.3.1, 9.3.5:
content has no defined meaning there, and a receiver may refuse it)."""
USER_AGENT = "Kadence-Webhook/1"
SHARED = "*"
"""The secrets scope every tenant may use (KADENCE_WEBHOOK_SECRETS)."""

Secrets = Mapping[str, Mapping[str, SecretStr]]
"""tenant (or "*") -> secret_ref -> signing secret."""


S = TypeVar("S")


class UnknownSecretError(LookupError):
    """The job's secret_ref names no secret of its tenant."""


def unknown_secret(field: str, ref: str | None, tenant: str, setting: str) -> Result:
    """A job naming a secret its tenant does not have: fails for good, nothing sent; the same
    words whether or not another tenant has that name."""
    why = f"{field} {ref!r} is unknown for tenant {tenant!r} (KADENCE_{setting} of the workers)"
    return Result.failed("UnknownSecret", why, retryable=False)


def secret_for(secrets: Mapping[str, Mapping[str, S]], tenant: str, ref: str) -> S:
    """The tenant's own secret named `ref`, else the shared one; never another tenant's."""
    for scope in (tenant, SHARED):
        secret = secrets.get(scope, {}).get(ref)
        if secret is not None:
            return secret
    raise UnknownSecretError(ref)


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """`v1,<signature>`; secrets with a `whsec_` prefix are base64 (Standard Webhooks)."""
    key = (
        base64.b64decode(secret.removeprefix("whsec_"))
        if secret.startswith("whsec_")
        else secret.encode()
    )
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


class HttpCaller:
    def __init__(
        self,
        policy: AddressPolicy,
        secrets: Secrets,
        tls: ssl.SSLContext | None = None,
        *,
        loop: EventLoop | None = None,
        warm_s: float = LEAD_S,
        resolver: Resolver | None = None,
        connections: ConnectionSource | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        """`connections` and `keyring`: the tenants' connections as read from their topic
        and the keys that open them (without them, a target naming a connection fails)."""
        self.policy = policy
        self.secrets = secrets
        self.tls = tls or ssl.create_default_context()
        self.pool = ConnectionPool(self.tls)
        self.resolver = resolver or Resolver(policy)
        self.loop = loop or EventLoop("http")
        self.warmer = Warmer(self.pool, self.resolver, self.loop, warm_s)
        self.credentials = Credentials(connections, keyring, self.pool, self.resolver)
        self.pacer = Throttle()
        """Rate-limited destinations' requests as written (`_paced`); touched on the loop only."""

    async def _paced(self, ex: ExecutionRequested, deadline: float) -> bool:
        """A rate-limited run waits here, just before its request is written, until its
        destination's limit lets it go (False: not before its deadline). The worker hands
        such runs out at the limit already (streams/worker/lanes.py); this keeps the limit at
        the receiver when the loop stalls between the hand-out and the write, which would
        otherwise send every run it held at once. In the steady state nothing waits."""
        lane = destination_of(ex)
        assert lane is not None
        while True:
            now_ms = int(time.time() * 1000)
            at_ms = self.pacer.take(lane, now_ms)
            if at_ms <= now_ms:
                return True
            wait_s = (at_ms - now_ms) / 1000
            if time.monotonic() + wait_s > deadline:
                return False
            await asyncio.sleep(wait_s)

    def prepare(self, ex: ExecutionRequested) -> None:
        """An execution read ahead of its due time: have connections to its target open by
        then (connectors/http_warm.py); not for a connection's runs, whose pool may be its
        own (mTLS), nor for a rate-limited destination's: its runs are spread over seconds,
        and warming for all of them due at once opened thousands of connections it never
        needed (10 000 runs at 100/s: a connection per run, the receiver stalled)."""
        target = ex.target
        assert isinstance(target, HttpTarget)
        if target.connection is None and target.rate_limit is None:
            self.warmer.expect(target.url, ex.tenant, ex.due_at.timestamp())

    def headers(
        self,
        ex: ExecutionRequested,
        target: HttpTarget,
        body: bytes | None,
        secret: str | None = None,
        auth: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """The request's headers: the target's, then the connection's (`auth`), then
        Kadence's own (no `content-type` for a request without content, `body` None); signed
        with `secret`, else with the workers' secret the target names (UnknownSecretError when
        there is none)."""
        now = int(time.time())
        own = {
            "user-agent": USER_AGENT,
            "webhook-id": ex.execution_id,
            "webhook-timestamp": str(now),
            "idempotency-key": ex.execution_id,
            "kadence-execution-id": ex.execution_id,
            "kadence-attempt": str(ex.attempt),
            "kadence-delivery": str(ex.delivery),
            "kadence-due-at": iso_utc(ex.due_at),
            "kadence-tenant": ex.tenant,
            "kadence-job": ex.job_id,
        }
        if body is not None:
            own["content-type"] = ex.content_type
        if target.secret_ref is not None:
            if secret is None:
                secret = secret_for(self.secrets, ex.tenant, target.secret_ref).get_secret_value()
            own["webhook-signature"] = sign(secret, ex.execution_id, now, body or b"")
        return with_own({**target.headers, **auth} if auth else target.headers, own)

    def start(
        self, ex: ExecutionRequested, stop: Stop, record: bytes | None = None
    ) -> Future[Result]:
        """The request under way on the loop, its deadline the run's timeout from now."""
        deadline = time.monotonic() + ex.timeout_ms / 1000
        return self.loop.run(lambda: self.send(ex, stop, deadline), stop)

    def can_start(self, ex: ExecutionRequested) -> bool:
        return True

    def __call__(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        return self.loop.run(lambda: self.send(ex, stop, deadline), stop).result()

    async def send(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        target = ex.target
        assert isinstance(target, HttpTarget)
        body = None if target.method in BODYLESS and not ex.payload else ex.payload
        applied: Applied | None = None
        secret: str | None = None
        try:
            if target.connection is not None:
                applied = await self.credentials.apply(
                    ex.tenant, target.connection, target.url, deadline
                )
            if target.secret_ref is not None:
                secret = await self.credentials.signing_secret(
                    ex.tenant, target.secret_ref, deadline
                )
            auth = applied.headers if applied is not None else None
            headers = self.headers(ex, target, body, secret, auth)
        except ConnectionRefused as refused:
            return refused.result
        except UnknownSecretError:
            return unknown_secret("secret_ref", target.secret_ref, ex.tenant, "WEBHOOK_SECRETS")
        url = _url(target.url, tuple(target.query.items())) if target.query else target.url
        if target.rate_limit is not None and not await self._paced(ex, deadline):
            return Result(OutcomeStatus.timed_out, True, timeout_error(url, ex.timeout_ms))
        answer = await checked_exchange(
            applied.pool or self.pool if applied else self.pool,
            self.resolver,
            url,
            tenant=ex.tenant,
            method=target.method,
            body=body,
            headers=headers,
            deadline=deadline,
            timeout_ms=ex.timeout_ms,
            secret_query=urlencode(applied.query) if applied and applied.query else "",
        )
        if isinstance(answer, Result):
            return answer
        response, body_start = answer
        if response.status == 401 and applied is not None:
            self.credentials.refused_by_target(applied)
        if stop.is_set():
            return Result(stop.reason or OutcomeStatus.cancelled)
        return judged(target, url, response, body_start)


def judged(target: HttpTarget, url: str, response: Answer, body_start: bytes) -> Result:
    """The run's result from the answer's head: success, a retryable or a final failure, each
    with what the answer returned (connectors/results.py)."""
    status = response.status
    detail = http_result(status, response.headers, body_start, target.result_headers)
    if status in status_set(target.success_statuses, DEFAULT_SUCCESS):
        return Result.ok(detail)
    message = f"{status} {response.reason} from {url}"
    if 300 <= status < 400:
        location = response.getheader("location", "?")
        message += f": redirect to {location} not followed (targets must answer directly)"
    elif body_start:
        message += f": {body_start.decode(errors='replace')}"
    retryable = status in status_set(target.retryable_statuses, DEFAULT_RETRYABLE)
    return Result.failed(
        "HttpStatus", message, retryable=retryable, code=str(status), detail=detail
    )


@functools.lru_cache(maxsize=4_096)
def _url(url: str, query: tuple[tuple[str, str], ...]) -> str:
    """The URL a target with query parameters calls: built once per target, not at every run."""
    return with_query(url, dict(query))
