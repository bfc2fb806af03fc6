"""One HTTP/1.1 request and its answer, to a checked address over a pooled connection: what the
webhook and the queue targets share (connectors/http.py, connectors/sqs.py), as a coroutine on
the targets' event loop (connectors/aio.py).

Within the run's deadline: the host is resolved and every address checked for the run's tenant
(connectors/http_dns.py), a kept connection taken or a new one opened (each address tried,
connectors/http_pool.py), the request sent once and the answer's head read (llhttp frames it,
h11 reads the legacy heads llhttp refuses: connectors/http_conn.py). The head decides the run:
once a receiver has said 2xx the run succeeded, however its body is framed or however slowly
it comes; the body is read for at most BODY_GRACE_S more only to keep its start (a failure's
message) and the connection.

A request is never sent twice by the client: a kept connection that the receiver closes as the
request reaches it fails the run retryably (the receiver may have got it), as RFC 9112 9.3.1.1
asks. Stopping the run cancels the coroutine (its connection is aborted); the deadline is
`timed_out`. Failures are named: `ResolveError`, `AddressRefused`, `ConnectError`,
`RemoteDisconnected`, `BadResponse` (not HTTP a client can frame), `InvalidRequest`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from urllib.parse import quote, urlsplit

from connectors.http_conn import (
    BODY_LIMIT,
    Answer,
    BadResponseError,
    HttpConnection,
    InvalidRequestError,
    RemoteDisconnectedError,
    request_bytes,
)
from connectors.http_dns import Resolver
from connectors.http_pool import ConnectError, ConnectionPool, Key
from connectors.ssrf import AddressRefused
from kadence.models import ErrorInfo, OutcomeStatus
from kadence.targets import Result

BODY_GRACE_S = 1.0
"""How long an answer's body may take after its head (within the deadline) before the run is
decided without the rest of it and the connection closed."""
URLS_KEPT = 4_096
"""Target URLs whose parse is kept (the least recently used goes)."""
_PATH_SAFE = "".join(chr(c) for c in range(0x21, 0x7F))
"""Visible ASCII stays as it is in a request target; anything else is percent-encoded."""


def host_header(host: str, port: int, scheme: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port == (443 if scheme == "https" else 80) else f"{shown}:{port}"


def request_headers(
    host: str, headers: dict[str, str], body: bytes | None
) -> list[tuple[str, str]]:
    """`headers` with `Host`, `Accept-Encoding: identity` and `Content-Length` unless given (a
    request without content, `body` None, has no `Content-Length`)."""
    names = {name.lower() for name in headers}
    fields: list[tuple[str, str]] = []
    if "host" not in names:
        fields.append(("Host", host))
    if "accept-encoding" not in names:
        fields.append(("Accept-Encoding", "identity"))
    if body is not None and "content-length" not in names and "transfer-encoding" not in names:
        fields.append(("Content-Length", str(len(body))))
    fields.extend(headers.items())
    return fields


async def checked_exchange(
    pool: ConnectionPool,
    resolver: Resolver,
    url: str,
    *,
    tenant: str,
    method: str,
    body: bytes | None,
    headers: dict[str, str],
    deadline: float,
    timeout_ms: int,
    body_limit: int = BODY_LIMIT,
    secret_query: str = "",
) -> Result | tuple[Answer, bytes]:
    """The answer to `method url` for a run of `tenant` and the start of its body (`body_limit`
    bytes, BODY_LIMIT by default: connectors/http_conn.py), or how the exchange failed. `body`
    None: a request without content. `deadline` is on time.monotonic(); `timeout_ms` names it
    in messages. `secret_query`: encoded query parameters added to the request only (an API
    key), never to `url` as messages show it."""
    conn: HttpConnection | None = None
    key: Key | None = None
    loop = asyncio.get_running_loop()
    try:
        scheme, host, port, target, shown = _parsed(url)
        if secret_query:
            target += ("&" if "?" in target else "?") + secret_query
        fields = request_headers(shown, headers, body)
        request = request_bytes(method, target, fields, body or b"")
        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
            addresses = await resolver.addresses(host, port, tenant)
            keys = [(scheme, host, port, address, tenant) for address in addresses]
            taken = pool.take(keys)
            key, conn = taken if taken is not None else await pool.open(keys)
            answer = await conn.exchange(request, body_limit)
        until = loop.time() + min(BODY_GRACE_S, max(0.0, deadline - time.monotonic()))
        text, complete = await conn.body(until)
        reusable = complete and conn.reusable()
        pool.give(key, conn, reusable)
        conn = None
        return answer, text
    except TimeoutError:
        return Result(OutcomeStatus.timed_out, True, timeout_error(url, timeout_ms))
    except (AddressRefused, OSError, BadResponseError, InvalidRequestError) as exc:
        return failure(url, exc, sent=key is not None)
    finally:
        if conn is not None and key is not None:
            pool.give(key, conn, reusable=False)


@functools.lru_cache(maxsize=URLS_KEPT)
def _parsed(url: str) -> tuple[str, str, int, str, str]:
    """`url`'s scheme, ASCII host, port, request target and Host header. A job's runs all go to
    the same URL: parsed once, not at every run. Raises InvalidRequestError (not kept)."""
    parts = urlsplit(url)
    scheme = parts.scheme
    port = parts.port or (443 if scheme == "https" else 80)
    target = quote(parts.path or "/", safe=_PATH_SAFE)
    if parts.query:
        target += "?" + quote(parts.query, safe=_PATH_SAFE)
    host = _ascii_host(parts.hostname or "")
    return scheme, host, port, target, host_header(host, port, scheme)


def _ascii_host(host: str) -> str:
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        raise InvalidRequestError(f"the host {host!r} is not a valid name") from None


def failure(url: str, exc: Exception, *, sent: bool) -> Result:
    """How an exchange that raised `exc` failed; `sent`: it had a connection (so the request
    may have reached the receiver)."""
    if isinstance(exc, AddressRefused):
        return Result.failed("AddressRefused", str(exc), retryable=False)
    if isinstance(exc, InvalidRequestError):  # nothing was sent
        return Result.failed("InvalidRequest", f"{url}: {exc}", retryable=False)
    if isinstance(exc, BadResponseError):
        why = f"{url}: the answer is not HTTP/1.1 a client can read: {exc}"
        return Result.failed("BadResponse", why, retryable=True)
    if isinstance(exc, ConnectError):
        return Result.failed("ConnectError", f"{url}: {exc}", retryable=True)
    if isinstance(exc, RemoteDisconnectedError) or sent:  # a write to a connection that broke
        return Result.failed("RemoteDisconnected", f"{url}: {exc}", retryable=True)
    return Result.failed("ResolveError", str(exc), retryable=True)  # a failed lookup


def timeout_error(name: str, timeout_ms: int) -> ErrorInfo:
    return ErrorInfo(type="Timeout", message=f"{name} did not answer within {timeout_ms} ms")
