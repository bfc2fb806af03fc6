"""One HTTP/1.1 request and its answer over a pooled connection to a checked address: what the
webhook and the queue targets share (connectors/http.py, connectors/sqs.py), as a coroutine on
the targets' event loop (connectors/aio.py).

The request is sent once; only when a kept-alive connection turns out to have been closed by the
server while idle (the request never got there) is it sent once more on a new connection.
Stopping the run cancels the coroutine (its connection is aborted); the deadline is
`timed_out`; any other transport error is a retryable failure. The errors are named as Python's
http.client names them (`RemoteDisconnected`, `IncompleteRead`, `LineTooLong`, ...).
"""

from __future__ import annotations

import asyncio
import functools
import http.client
import ipaddress
import re
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from connectors.http_pool import ConnectionPool, Key
from connectors.ssrf import AddressPolicy, AddressRefused
from kadence.models import ErrorInfo, OutcomeStatus
from kadence.target_allow import IPAddress
from kadence.targets import Result

BODY_LIMIT = 4096
"""Bytes of the response body kept (in a failure's error message, or to parse an answer)."""
DRAIN_LIMIT = 65_536
"""Bytes of a response read past BODY_LIMIT so its connection can be reused (a longer body
closes the connection instead)."""
MAX_HEADERS = 100
STALE = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
"""What a kept-alive connection the server has closed fails with (RemoteDisconnected too)."""
_LEGAL_NAME = re.compile(rb"[^:\s][^:\r\n]*")
_ILLEGAL_VALUE = re.compile(rb"\n(?![ \t])|\r(?![ \t\n])")
_BAD_PATH = re.compile("[\x00-\x20\x7f]")
"""As http.client: a header name or value, or a path, that would change the request's framing."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    reason: str
    headers: dict[str, str]
    """Lower-cased names; a repeated header's values joined by `, `."""

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)


def request_bytes(method: str, path: str, host: str, headers: dict[str, str], body: bytes) -> bytes:
    """The request as http.client would send it: `Host`, `Accept-Encoding: identity` and
    `Content-Length` unless `headers` has them; names and values checked the same way."""
    if _BAD_PATH.search(path) or _BAD_PATH.search(method):
        raise http.client.InvalidURL(f"can't send {method} {path!r}: control characters")
    names = {name.lower() for name in headers}
    lines = [f"{method} {path} HTTP/1.1".encode("ascii")]
    if "host" not in names:
        lines.append(b"Host: " + (host.encode("ascii") if host.isascii() else host.encode("idna")))
    if "accept-encoding" not in names:
        lines.append(b"Accept-Encoding: identity")
    if "content-length" not in names and "transfer-encoding" not in names:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    for name, value in headers.items():
        raw_name, raw_value = name.encode("ascii"), value.encode("latin-1")
        if not _LEGAL_NAME.fullmatch(raw_name):
            raise ValueError(f"Invalid header name {raw_name!r}")
        if _ILLEGAL_VALUE.search(raw_value):
            raise ValueError(f"Invalid header value {raw_value!r}")
        lines.append(raw_name + b": " + raw_value)
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def host_header(host: str, port: int, scheme: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port == (443 if scheme == "https" else 80) else f"{shown}:{port}"


async def _head(reader: asyncio.StreamReader) -> tuple[str, int, str, dict[str, str]]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            closed = "Remote end closed connection without response"
            raise http.client.RemoteDisconnected(closed) from None
        raise http.client.IncompleteRead(exc.partial) from None
    except asyncio.LimitOverrunError:
        raise http.client.LineTooLong("header") from None
    status_line, *lines = head[:-4].decode("iso-8859-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/") or len(code) != 3 or not code.isdigit():
        raise http.client.BadStatusLine(status_line)
    if len(lines) > MAX_HEADERS:
        raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return version, int(code), reason.strip(), headers


async def _exactly(reader: asyncio.StreamReader, n: int) -> bytes:
    try:
        return await reader.readexactly(n)
    except asyncio.IncompleteReadError as exc:
        raise http.client.IncompleteRead(exc.partial, n - len(exc.partial)) from None


async def _chunked(reader: asyncio.StreamReader, limit: int) -> tuple[bytes, bool]:
    """The body read up to `limit` bytes; whether it was read to its end."""
    body = bytearray()
    while True:
        try:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";", 1)[0].strip(), 16)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            raise http.client.IncompleteRead(bytes(body)) from None
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return bytes(body), True
        if len(body) + size > limit:
            body += await _exactly(reader, limit - len(body))
            return bytes(body), False
        body += await _exactly(reader, size)
        await _exactly(reader, 2)


async def read_answer(reader: asyncio.StreamReader, method: str) -> tuple[Answer, str, bool]:
    """The answer, the start of its body, and whether the connection may serve again (the
    body was read to its end within BODY_LIMIT + DRAIN_LIMIT and nobody asked to close)."""
    while True:
        version, status, reason, headers = await _head(reader)
        if not 100 <= status < 200 or status == 101:
            break  # 100 Continue and other interim answers are skipped, as http.client does
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    closes = "close" in tokens or (version == "HTTP/1.0" and "keep-alive" not in tokens)
    closes |= status == 101  # switched to another protocol: not HTTP any more
    limit = BODY_LIMIT + DRAIN_LIMIT
    length = headers.get("content-length")
    if method == "HEAD" or status in (101, 204, 304):
        body, complete = b"", True
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        body, complete = await _chunked(reader, limit)
    elif length is not None and length.strip().isdigit():
        size = int(length)
        body = await _exactly(reader, min(size, limit))
        complete = size <= limit
    else:  # the body ends with the connection
        parts: list[bytes] = []
        got = 0
        while got < limit and (part := await reader.read(limit - got)):
            parts.append(part)
            got += len(part)
        body, complete = b"".join(parts), False
    text = body[:BODY_LIMIT].decode(errors="replace")
    return Answer(status, reason, headers), text, complete and not closes


async def exchange(
    pool: ConnectionPool,
    key: Key,
    *,
    method: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    deadline: float,
    name: str,
    timeout_ms: int,
) -> Result | tuple[Answer, str]:
    """The response and the start of its body, or how the exchange failed. `name` says what was
    called in error messages (the URL); `timeout_ms` is the run's timeout, for the message."""
    scheme, host, port, _ = key
    request = request_bytes(method, path, host_header(host, port, scheme), headers, body)
    while True:
        conn = pool.take(key)
        reused, reusable = conn is not None, False
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                if conn is None:
                    conn = await pool.open(key)
                conn.writer.write(request)
                await conn.writer.drain()
                answer, text, reusable = await read_answer(conn.reader, method)
            return answer, text
        except TimeoutError:
            return Result(OutcomeStatus.timed_out, True, timeout_error(name, timeout_ms))
        except (OSError, http.client.HTTPException) as exc:
            if time.monotonic() >= deadline:
                return Result(OutcomeStatus.timed_out, True, timeout_error(name, timeout_ms))
            if not (reused and isinstance(exc, STALE)):
                return Result.failed(type(exc).__name__, f"{name}: {exc}", retryable=True)
            # a kept connection the server closed while idle: the request never got there
        finally:
            pool.give(key, conn, reusable)


async def checked_exchange(
    pool: ConnectionPool,
    policy: AddressPolicy,
    url: str,
    *,
    tenant: str,
    method: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    deadline: float,
    timeout_ms: int,
) -> Result | tuple[Answer, str]:
    """`exchange` to the host of `url`, resolved now and checked by `policy` for a target of
    `tenant` (its own allow-list entries apply, no other tenant's): the connection goes only to
    the address checked (no second lookup to rebind). A refused address fails for good, a
    failed lookup retryably."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        address = await resolve(policy, host, port, tenant)
    except AddressRefused as exc:
        return Result.failed("AddressRefused", str(exc), retryable=False)
    except OSError as exc:
        return Result.failed("ResolveError", str(exc), retryable=True)
    key: Key = (parts.scheme, host, port, address)
    return await exchange(
        pool,
        key,
        method=method,
        path=path,
        body=body,
        headers=headers,
        deadline=deadline,
        name=url,
        timeout_ms=timeout_ms,
    )


async def resolve(policy: AddressPolicy, host: str, port: int, tenant: str) -> IPAddress:
    """`policy.resolve`: at once for an address, on the loop's threads for a name (a DNS lookup
    must not stall every other run on the loop)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        lookup = functools.partial(policy.resolve, host, port, tenant)
        return await asyncio.get_running_loop().run_in_executor(None, lookup)
    return policy.resolve(host, port, tenant)


def timeout_error(name: str, timeout_ms: int) -> ErrorInfo:
    return ErrorInfo(type="Timeout", message=f"{name} did not answer within {timeout_ms} ms")
