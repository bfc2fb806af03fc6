"""What one webhook costs the worker's CPU, like for like: the exchange alone and the whole run,
to the receiver by IP literal and by host name, over HTTP and over HTTPS, beside the clients
that could replace it, against the loopback keep-alive sink (bench/http_sink.py).

    python -m bench.http_clients [--requests 5000] [--at-once 64] [--loop uvloop|asyncio|both]

exchange: connectors/http_exchange.py's `checked_exchange` (the resolver and its cache, the address
policy, the pool, llhttp's framing with h11 for legacy heads, the deadline); run: the whole webhook
run (`HttpCaller.send`: plus headers and the HMAC signature); aiohttp and httpx (neither signs nor
checks addresses; by IP literal); bare-streams: a request on asyncio streams with no checks at all
(the floor); fresh-connection: a new connection per request, all at once (what a burst of
runs to one target costs without kept connections). By host name, the name is `localhost`
(the hosts file, through c-ares); its answer is kept for the resolver's TTL floor, so a host
name costs one dictionary lookup per run more than a literal.

`--stalled N [--partial-head BYTES]` instead holds N runs against a receiver that never
answers (or sends that much of a head, then nothing) and reports the worker's memory per
stalled run (what a slow receiver costs while its runs wait for their deadline).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import resource
import ssl
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvloop
from pydantic import SecretStr

from apps.processes import ChildProcess
from connectors.http import HttpCaller
from connectors.http_dns import Resolver
from connectors.http_exchange import checked_exchange
from connectors.http_pool import ConnectionPool
from connectors.ssrf import AddressPolicy
from kadence.models import ExecutionRequested, HttpTarget
from kadence.settings import KadenceSettings
from kadence.targets import Stop
from testkit.tls import make_certificates

BODY = b'{"a":1}'
HEADERS = {
    "content-type": "application/json",
    "user-agent": "bench",
    "webhook-id": "acme/job@2026-12-01T09:00:00.000Z",
    "idempotency-key": "acme/job@2026-12-01T09:00:00.000Z",
    "kadence-attempt": "1",
}
ALLOW = ["127.0.0.0/8", "::1/128"]
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


class Sink:
    """Where the clients send: a URL by IP literal or by host name, and the TLS to trust."""

    def __init__(self, port: int, tls: ssl.SSLContext | None) -> None:
        self.port, self.tls = port, tls

    def url(self, by_name: bool) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{'localhost' if by_name else '127.0.0.1'}:{self.port}/"


def exchange_client(by_name: bool) -> Callable[[Sink, int, int], Coroutine[Any, Any, float]]:
    async def measure(sink: Sink, n: int, at_once: int) -> float:
        pool = ConnectionPool(sink.tls or ssl.create_default_context())
        resolver = Resolver(AddressPolicy(ALLOW))
        url = sink.url(by_name)

        async def request() -> None:
            await checked_exchange(
                pool, resolver, url, tenant="acme", method="POST", body=BODY,
                headers=dict(HEADERS), deadline=time.monotonic() + 30, timeout_ms=30_000,
            )  # fmt: skip

        return await timed(request, n, at_once)

    return measure


def execution(url: str) -> ExecutionRequested:
    now = datetime.now(UTC)
    return ExecutionRequested(
        execution_id="acme/job@2026-12-01T09:00:00.000Z",
        tenant="acme",
        job_id="job",
        definition_version=1,
        nominal_at=now,
        due_at=now,
        dispatched_at=now,
        target=HttpTarget(url=url, secret_ref="s"),  # noqa: S106 - a name
        payload=BODY,
        timeout_ms=30_000,
        lease_ttl_ms=30_000,
    )


def run_client(by_name: bool) -> Callable[[Sink, int, int], Coroutine[Any, Any, float]]:
    async def measure(sink: Sink, n: int, at_once: int) -> float:
        caller = HttpCaller(
            AddressPolicy(ALLOW), {"acme": {"s": SecretStr("secret")}}, sink.tls, warm_s=0
        )
        ex = execution(sink.url(by_name))

        async def request() -> None:
            await caller.send(ex, Stop(), time.monotonic() + 30)

        return await timed(request, n, at_once)

    return measure


async def aiohttp_client(sink: Sink, n: int, at_once: int) -> float:
    import aiohttp  # noqa: PLC0415 - optional: not a dependency of Kadence

    connector = aiohttp.TCPConnector(limit=at_once, ssl=sink.tls or True)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def request() -> None:
            async with session.post(sink.url(False), data=BODY, headers=HEADERS) as r:
                await r.read()

        return await timed(request, n, at_once)


async def httpx_client(sink: Sink, n: int, at_once: int) -> float:
    import httpx  # noqa: PLC0415 - measured only

    limits = httpx.Limits(max_connections=at_once, max_keepalive_connections=at_once)
    async with httpx.AsyncClient(limits=limits, verify=sink.tls or True) as client:

        async def request() -> None:
            r = await client.post(sink.url(False), content=BODY, headers=HEADERS)
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


async def bare_streams(sink: Sink, n: int, at_once: int) -> float:
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def request() -> None:
        reader, writer = (
            idle.pop()
            if idle
            else await asyncio.open_connection("127.0.0.1", sink.port, ssl=sink.tls)
        )
        await _one(reader, writer)
        idle.append((reader, writer))

    return await timed(request, n, at_once)


async def fresh_connection(sink: Sink, n: int, _at_once: int) -> float:
    async def request() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", sink.port, ssl=sink.tls)
        await _one(reader, writer)
        writer.transport.abort()

    return await timed(request, n, n)


CLIENTS: dict[str, Callable[[Sink, int, int], Coroutine[Any, Any, float]]] = {
    "exchange by IP": exchange_client(False),
    "exchange by name": exchange_client(True),
    "run by IP": run_client(False),
    "run by name": run_client(True),
    "aiohttp": aiohttp_client,
    "httpx": httpx_client,
    "bare-streams": bare_streams,
    "fresh-connection": fresh_connection,
}


def measure(sink: Sink, args: argparse.Namespace) -> None:
    for name, client in CLIENTS.items():
        module = name.split("-")[0]
        if module in ("aiohttp", "httpx") and importlib.util.find_spec(module) is None:
            print(f"  {name:18s} not installed")
            continue
        n = min(args.requests, 3_000) if name == "fresh-connection" else args.requests
        shown = []
        if args.loop in ("asyncio", "both"):
            shown.append(f"asyncio {asyncio.run(client(sink, n, args.at_once)):7.0f} us")
        if args.loop in ("uvloop", "both"):
            shown.append(f"uvloop {uvloop.run(client(sink, n, args.at_once)):7.0f} us")
        print(f"  {name:18s} " + "   ".join(shown), flush=True)


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def stalled(count: int, partial_head: int) -> None:
    """Memory per run held by a receiver that never answers (the sink in a process of its own,
    answering in ten minutes, after `partial_head` bytes of a head), on the targets' own loop
    in this process."""
    sink = ChildProcess(
        "bench.http_sink",
        KadenceSettings(),
        None,
        BENCH_SINK_DELAY_MS=600_000,
        BENCH_SINK_PARTIAL_HEAD=partial_head,
    )
    caller = HttpCaller(AddressPolicy(ALLOW), {"acme": {"s": SecretStr("secret")}}, warm_s=0)
    futures = []
    try:
        url = f"http://127.0.0.1:{sink.start().listening('http sink')}/"
        gc.collect()
        before = rss_kib()
        futures = [caller.start(execution(url), Stop()) for _ in range(count)]
        deadline = time.monotonic() + 60
        while caller.pool.opened < count and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # the last requests written
        gc.collect()
        after = rss_kib()
        per_run = (after - before) * 1024 / max(caller.pool.opened, 1)
        ended = sum(f.done() for f in futures)
        print(
            f"{caller.pool.opened} runs to a receiver that stalls after {partial_head} bytes of "
            f"its answer ({ended} ended at once): worker RSS {before} KiB -> {after} KiB, "
            f"{per_run:.0f} bytes per run"
        )
    finally:
        for future in futures:
            future.cancel()
        caller.loop.close()
        sink.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.http_clients", description=__doc__)
    parser.add_argument("--requests", type=int, default=5_000)
    parser.add_argument("--at-once", type=int, default=64)
    parser.add_argument("--loop", choices=("uvloop", "asyncio", "both"), default="uvloop")
    parser.add_argument("--stalled", type=int, default=0, metavar="N")
    parser.add_argument("--partial-head", type=int, default=0, metavar="BYTES")
    args = parser.parse_args(argv)
    if args.stalled:
        stalled(args.stalled, args.partial_head)
        return 0
    with tempfile.TemporaryDirectory() as folder:
        certs = make_certificates(Path(folder))
        tls = ssl.create_default_context(cafile=str(certs.ca))
        print(f"{args.requests} requests, {args.at_once} at once: client CPU per request")
        for label, context in (("HTTP", None), ("HTTPS", tls)):
            env = {"BENCH_SINK_TLS": folder} if context else {}
            sink_process = ChildProcess("bench.http_sink", KadenceSettings(), None, **env).start()
            try:
                port = sink_process.listening("http sink")
                print(label)
                measure(Sink(port, context), args)
            finally:
                sink_process.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
