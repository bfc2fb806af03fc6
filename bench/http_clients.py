"""Which asyncio HTTP client the webhook target uses, by measurement: CPU per request of each
against the loopback keep-alive sink (bench/http_sink.py), on asyncio's loop and on uvloop.

    python -m bench.http_clients [--requests 5000] [--at-once 64]

kadence-exchange: connectors/http_exchange.py's `exchange` (pinned connection, limits,
parsing, timeout); kadence-webhook: the whole webhook run (plus headers, HMAC signature, SSRF
check); aiohttp and httpx when installed (neither signs nor checks addresses); bare-streams: a
request on asyncio streams with no checks at all (the floor); fresh-connection: a new
connection per request, all at once (what a burst of runs to one target costs).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import ipaddress
import ssl
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

import uvloop
from pydantic import SecretStr

from apps.processes import ChildProcess
from connectors.http import HttpCaller
from connectors.http_exchange import exchange
from connectors.http_pool import ConnectionPool, Key
from connectors.ssrf import AddressPolicy
from kadence.models import ExecutionRequested, HttpTarget
from kadence.settings import KadenceSettings
from kadence.targets import Stop

BODY = b'{"a":1}'
HEADERS = {
    "content-type": "application/json",
    "user-agent": "bench",
    "webhook-id": "acme/job@2026-12-01T09:00:00.000Z",
    "idempotency-key": "acme/job@2026-12-01T09:00:00.000Z",
    "kadence-attempt": "1",
}
Request = Callable[[], Awaitable[None]]


async def timed(request: Request, n: int, at_once: int) -> float:
    """CPU µs per request of `n` requests, `at_once` at a time (after one to warm up)."""
    await request()
    gate = asyncio.Semaphore(at_once)

    async def one() -> None:
        async with gate:
            await request()

    cpu = time.process_time()
    await asyncio.gather(*(one() for _ in range(n)))
    return (time.process_time() - cpu) / n * 1e6


async def kadence_exchange(port: int, n: int, at_once: int) -> float:
    pool = ConnectionPool(ssl.create_default_context())
    key: Key = ("http", "127.0.0.1", port, ipaddress.ip_address("127.0.0.1"))

    async def request() -> None:
        deadline = time.monotonic() + 30
        await exchange(
            pool, key, method="POST", path="/", body=BODY, headers=dict(HEADERS),
            deadline=deadline, name="sink", timeout_ms=30_000,
        )  # fmt: skip

    return await timed(request, n, at_once)


async def kadence_webhook(port: int, n: int, at_once: int) -> float:
    caller = HttpCaller(AddressPolicy(["127.0.0.0/8"]), {"acme": {"s": SecretStr("secret")}})
    now = datetime.now(UTC)
    ex = ExecutionRequested(
        execution_id="acme/job@2026-12-01T09:00:00.000Z",
        tenant="acme",
        job_id="job",
        definition_version=1,
        nominal_at=now,
        due_at=now,
        dispatched_at=now,
        target=HttpTarget(url=f"http://127.0.0.1:{port}/", secret_ref="s"),  # noqa: S106 - a name
        payload=BODY,
        timeout_ms=30_000,
        lease_ttl_ms=30_000,
    )

    async def request() -> None:
        await caller.send(ex, Stop(), time.monotonic() + 30)

    return await timed(request, n, at_once)


async def aiohttp_client(port: int, n: int, at_once: int) -> float:
    import aiohttp  # noqa: PLC0415 - optional: not a dependency of Kadence

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=at_once)) as session:

        async def request() -> None:
            async with session.post(f"http://127.0.0.1:{port}/", data=BODY, headers=HEADERS) as r:
                await r.read()

        return await timed(request, n, at_once)


async def httpx_client(port: int, n: int, at_once: int) -> float:
    import httpx  # noqa: PLC0415 - measured only

    limits = httpx.Limits(max_connections=at_once, max_keepalive_connections=at_once)
    async with httpx.AsyncClient(limits=limits) as client:

        async def request() -> None:
            r = await client.post(f"http://127.0.0.1:{port}/", content=BODY, headers=HEADERS)
            await r.aread()

        return await timed(request, n, at_once)


def _request_bytes() -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items())
    return f"POST / HTTP/1.1\r\nhost: x\r\n{head}content-length: {len(BODY)}\r\n\r\n".encode()


async def _one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(_request_bytes() + BODY)
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)


async def bare_streams(port: int, n: int, at_once: int) -> float:
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def request() -> None:
        reader, writer = idle.pop() if idle else await asyncio.open_connection("127.0.0.1", port)
        await _one(reader, writer)
        idle.append((reader, writer))

    return await timed(request, n, at_once)


async def fresh_connection(port: int, n: int, _at_once: int) -> float:
    async def request() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await _one(reader, writer)
        writer.transport.abort()

    return await timed(request, n, n)


CLIENTS: dict[str, Callable[[int, int, int], Coroutine[Any, Any, float]]] = {
    "kadence-exchange": kadence_exchange,
    "kadence-webhook": kadence_webhook,
    "aiohttp": aiohttp_client,
    "httpx": httpx_client,
    "bare-streams": bare_streams,
    "fresh-connection": fresh_connection,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.http_clients", description=__doc__)
    parser.add_argument("--requests", type=int, default=5_000)
    parser.add_argument("--at-once", type=int, default=64)
    args = parser.parse_args(argv)
    sink = ChildProcess("bench.http_sink", KadenceSettings()).start()
    try:
        port = sink.listening("http sink")
        print(f"{args.requests} requests, {args.at_once} at once: client CPU per request")
        for name, client in CLIENTS.items():
            module = name.split("-")[0]
            if module in ("aiohttp", "httpx") and importlib.util.find_spec(module) is None:
                print(f"{name:18s} not installed")
                continue
            n = min(args.requests, 3_000) if name == "fresh-connection" else args.requests
            plain = asyncio.run(client(port, n, args.at_once))
            fast = uvloop.run(client(port, n, args.at_once))
            print(f"{name:18s} asyncio {plain:7.0f} us   uvloop {fast:7.0f} us")
            sys.stdout.flush()
    finally:
        sink.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
