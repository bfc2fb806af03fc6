"""OAuth2 client credentials (RFC 6749 4.4) for the webhook target's connections: a token
fetched from the connection's token endpoint, kept until shortly before it expires, and shared
by every run of that connection.

oauthlib writes the request's form and reads the answer (its errors, a missing token, the
token's type). The request itself goes the way every webhook goes (connectors/http_exchange.py):
the token endpoint's address checked for the tenant (no private or metadata address unless
allowed), within a deadline of its own. One fetch at a time per connection: the runs that need
the token meanwhile wait for that fetch; a failed fetch is the answer for FAILED_FOR_S to the
runs that come, so a broken endpoint sees a request a second, not one per run. A token is kept
per sealed value: a rotated connection fetches a new one; a 401 from the target drops the token
so the next attempt fetches another.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from oauthlib.oauth2 import BackendApplicationClient, OAuth2Error

from connectors.http_dns import Resolver
from connectors.http_exchange import checked_exchange
from connectors.http_pool import ConnectionPool
from kadence.models.connections import OAuth2Credential
from kadence.targets import Result

FETCH_TIMEOUT_S = 10.0
"""A token fetch's own deadline (whatever the runs waiting for it have left)."""
TOKEN_BODY_LIMIT = 64 * 1024
"""Bytes of a token endpoint's answer read (a JWT access token with many claims is a few KiB)."""
DEFAULT_LIFETIME_S = 300.0
"""How long a token without `expires_in` is kept."""
EARLY_S = 60.0
"""A token is fetched again this long before it expires (a tenth of its life when shorter)."""
FAILED_FOR_S = 1.0
TOKENS_KEPT = 10_000

Key = tuple[str, str, bytes]
"""(tenant, connection name, the sealed value's nonce)."""


@dataclass(frozen=True, slots=True)
class Token:
    value: str
    renew_at: float
    """On time.monotonic()."""


class TokenError(Exception):
    """Why a token could not be had, as the run's failure."""

    def __init__(self, result: Result) -> None:
        super().__init__(result.error.message if result.error else "token fetch failed")
        self.result = result


class OAuth2Tokens:
    def __init__(self, pool: ConnectionPool, resolver: Resolver) -> None:
        self.pool = pool
        self.resolver = resolver
        self._tokens: OrderedDict[Key, Token] = OrderedDict()
        self._fetching: dict[Key, asyncio.Future[Token]] = {}
        self._failed: dict[Key, tuple[float, Result]] = {}
        self.fetches = 0

    async def token(self, key: Key, cred: OAuth2Credential, deadline: float) -> str:
        """A live token for the connection; raises TokenError with the run's failure."""
        now = time.monotonic()
        kept = self._tokens.get(key)
        if kept is not None and now < kept.renew_at:
            return kept.value
        failed = self._failed.get(key)
        if failed is not None and now < failed[0]:
            raise TokenError(failed[1])
        fetching = self._fetching.get(key)
        if fetching is None:
            fetching = asyncio.get_running_loop().create_future()
            self._fetching[key] = fetching
            task = asyncio.ensure_future(self._fetch(key, cred))
            task.add_done_callback(lambda t: self._settle(key, t))
        try:
            async with asyncio.timeout(max(0.0, deadline - now)):
                return (await asyncio.shield(fetching)).value
        except TimeoutError:
            why = f"no token from {cred.token_url} before the run's deadline"
            raise TokenError(Result.failed("OAuth2TokenFailed", why, retryable=True)) from None

    def drop(self, key: Key, value: str) -> None:
        """The target refused `value` (401): the next run fetches another."""
        kept = self._tokens.get(key)
        if kept is not None and kept.value == value:
            del self._tokens[key]

    def _settle(self, key: Key, task: asyncio.Task[Token]) -> None:
        fetching = self._fetching.pop(key)
        exc: BaseException | None = (
            TokenError(Result.failed("OAuth2TokenFailed", "token fetch cancelled", retryable=True))
            if task.cancelled()
            else task.exception()
        )
        if exc is None:
            token = task.result()
            self._tokens[key] = token
            self._tokens.move_to_end(key)
            while len(self._tokens) > TOKENS_KEPT:
                self._tokens.popitem(last=False)
            self._failed.pop(key, None)
            fetching.set_result(token)
            return
        result = (
            exc.result
            if isinstance(exc, TokenError)
            else Result.failed("OAuth2TokenFailed", f"token fetch failed: {exc}", retryable=True)
        )
        if len(self._failed) >= TOKENS_KEPT:
            self._failed.clear()
        self._failed[key] = (time.monotonic() + FAILED_FOR_S, result)
        fetching.set_exception(TokenError(result))
        fetching.exception()  # retrieved: no "never retrieved" warning when nobody waits

    async def _fetch(self, key: Key, cred: OAuth2Credential) -> Token:
        self.fetches += 1
        client = BackendApplicationClient(client_id=cred.client_id)
        extra: dict[str, str] = {}
        if cred.audience:
            extra["audience"] = cred.audience
        secret = cred.client_secret.get_secret_value()
        headers = {
            "content-type": "application/x-www-form-urlencoded",
            "accept": "application/json",
            "user-agent": "Kadence-Webhook/1",
        }
        body = client.prepare_request_body(
            scope=cred.scope or None,
            include_client_id=cred.client_auth == "body",
            client_secret=secret if cred.client_auth == "body" else None,
            **extra,
        )
        if cred.client_auth == "basic":
            pair = f"{quote(cred.client_id, safe='')}:{quote(secret, safe='')}"  # RFC 6749 2.3.1
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        started = time.monotonic()
        answer = await checked_exchange(
            self.pool,
            self.resolver,
            cred.token_url,
            tenant=key[0],
            method="POST",
            body=body.encode(),
            headers=headers,
            deadline=started + FETCH_TIMEOUT_S,
            timeout_ms=int(FETCH_TIMEOUT_S * 1000),
            body_limit=TOKEN_BODY_LIMIT,
        )
        if isinstance(answer, Result):
            error = answer.error
            why = f"token endpoint: {error.message if error else answer.status.value}"
            raise TokenError(Result.failed("OAuth2TokenFailed", why, retryable=True))
        response, body_start = answer
        return _token_of(cred, response.status, body_start.decode(errors="replace"), started)


def _token_of(cred: OAuth2Credential, status: int, text: str, started: float) -> Token:
    """The token in a token endpoint's answer; raises TokenError saying why there is none
    (never echoing the answer's token)."""
    where = f"token endpoint {cred.token_url}"
    retryable = status in (408, 425, 429) or status >= 500
    client = BackendApplicationClient(client_id=cred.client_id)
    fields: Mapping[str, object]
    try:
        fields = client.parse_request_body_response(text)
    except OAuth2Error as exc:
        why = f"{where} answered {status}: {exc.error}"
        if exc.description:
            why += f" ({exc.description[:200]})"
        raise TokenError(Result.failed("OAuth2TokenFailed", why, retryable=retryable)) from None
    except Warning as warning:  # the granted scope differs from the asked one: still a token
        fields = getattr(warning, "token", {})
    except ValueError:
        why = f"{where} answered {status} without a JSON token"
        raise TokenError(Result.failed("OAuth2TokenFailed", why, retryable=retryable)) from None
    if not 200 <= status < 300:
        why = f"{where} answered {status}"
        raise TokenError(Result.failed("OAuth2TokenFailed", why, retryable=retryable))
    value = fields.get("access_token")
    token_type = str(fields.get("token_type", "")).lower()
    if not isinstance(value, str) or not value:
        raise TokenError(
            Result.failed("OAuth2TokenFailed", f"{where}: no access_token", retryable=False)
        )
    if token_type != "bearer":  # noqa: S105 - a token type, not a secret
        why = f"{where}: token_type {token_type[:40]!r}, not bearer"
        raise TokenError(Result.failed("OAuth2TokenFailed", why, retryable=False))
    if any(c < " " or c > "~" for c in value):
        why = f"{where}: the access token holds characters a header cannot carry"
        raise TokenError(Result.failed("OAuth2TokenFailed", why, retryable=False))
    lifetime = _lifetime(fields.get("expires_in"))
    return Token(value, started + lifetime - min(EARLY_S, lifetime / 10))


def _lifetime(expires_in: object) -> float:
    try:
        seconds = float(str(expires_in))
    except ValueError:
        return DEFAULT_LIFETIME_S
    return seconds if 0 < seconds < 10 * 365 * 86_400 else DEFAULT_LIFETIME_S
