"""One HTTP request and its answer over a pooled connection to a checked address: what the
webhook and the queue targets share (connectors/http.py, connectors/sqs.py).

The request is sent once; only when a kept-alive connection turns out to have been closed by the
server while idle (the request never got there) is it sent once more on a new connection.
Stopping the run interrupts the socket; the deadline is `timed_out`; any other transport error
is a retryable failure.
"""

from __future__ import annotations

import http.client
import time
from urllib.parse import urlsplit

from connectors.http_pool import ConnectionPool, Key
from connectors.ssrf import AddressPolicy, AddressRefused
from kadence.models import ErrorInfo, OutcomeStatus
from kadence.targets import Result, Stop

BODY_LIMIT = 4096
"""Bytes of the response body kept (in a failure's error message, or to parse an answer)."""
DRAIN_LIMIT = 65_536
"""Bytes of a response read past BODY_LIMIT so its connection can be reused (a longer body
closes the connection instead)."""
STALE = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
"""What a kept-alive connection the server has closed fails with (RemoteDisconnected too)."""


def exchange(
    pool: ConnectionPool,
    key: Key,
    *,
    method: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    stop: Stop,
    deadline: float,
    name: str,
    timeout_ms: int,
) -> Result | tuple[http.client.HTTPResponse, str]:
    """The response and the start of its body, or how the exchange failed. `name` says what was
    called in error messages (the URL); `timeout_ms` is the run's timeout, for the message."""
    while True:
        borrowed = pool.take(key, max(0.001, deadline - time.monotonic()))
        stop.on_stop(borrowed.interrupt)
        response: http.client.HTTPResponse | None = None
        try:
            borrowed.conn.request(method, path, body=body, headers=headers)
            response = borrowed.conn.getresponse()
            text = response.read(BODY_LIMIT).decode(errors="replace")
            response.read(DRAIN_LIMIT)  # to the end, so the connection can serve again
            return response, text
        except TimeoutError:
            return Result(OutcomeStatus.timed_out, True, timeout_error(name, timeout_ms))
        except (OSError, http.client.HTTPException) as exc:
            if stop.is_set():
                return Result(stop.reason or OutcomeStatus.cancelled)
            if time.monotonic() >= deadline:
                return Result(OutcomeStatus.timed_out, True, timeout_error(name, timeout_ms))
            if not (borrowed.reused and isinstance(exc, STALE)):
                return Result.failed(type(exc).__name__, f"{name}: {exc}", retryable=True)
            # a kept connection the server closed while idle: the request never got there
        finally:
            pool.give(key, borrowed, response)


def checked_exchange(
    pool: ConnectionPool,
    policy: AddressPolicy,
    url: str,
    *,
    tenant: str,
    method: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    stop: Stop,
    deadline: float,
    timeout_ms: int,
) -> Result | tuple[http.client.HTTPResponse, str]:
    """`exchange` to the host of `url`, resolved now and checked by `policy` for a target of
    `tenant` (its own allow-list entries apply, no other tenant's): the connection goes only to
    the address checked (no second lookup to rebind). A refused address fails for good, a
    failed lookup retryably."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        address = policy.resolve(host, port, tenant)
    except AddressRefused as exc:
        return Result.failed("AddressRefused", str(exc), retryable=False)
    except OSError as exc:
        return Result.failed("ResolveError", str(exc), retryable=True)
    key: Key = (parts.scheme, host, port, address)
    return exchange(
        pool,
        key,
        method=method,
        path=path,
        body=body,
        headers=headers,
        stop=stop,
        deadline=deadline,
        name=url,
        timeout_ms=timeout_ms,
    )


def timeout_error(name: str, timeout_ms: int) -> ErrorInfo:
    return ErrorInfo(type="Timeout", message=f"{name} did not answer within {timeout_ms} ms")
