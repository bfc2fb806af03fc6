"""A loopback HTTP/1.1 sink for benchmarks: answers every request 200 with keep-alive.

    python -m bench.http_sink            # prints `http sink listening on 127.0.0.1:<port>`
    KADENCE_BENCH_SINK_DELAY_MS=200 python -m bench.http_sink   # answers 200 ms late
    ... KADENCE_BENCH_SINK_PARTIAL_HEAD=100000   # and meanwhile sends 100 000 bytes of a head
    KADENCE_BENCH_SINK_TLS=<folder> python -m bench.http_sink    # HTTPS, with the certificate
                                                                 # testkit/tls.py made there

One asyncio process, no per-request thread: what the benchmark measures is the workers'
HTTP path (connections, signing, SSRF checks), not this server. It counts requests and
connections and prints them when it stops (SIGTERM or SIGINT), then one line
`http sink summary: {json}`: requests, connections, the most requests it held at once, and
each request's lateness as received (its arrival minus its `kadence-due-at`), p50/p90/p99/max.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import ssl
import time
from datetime import datetime
from typing import Any

import uvloop

from bench.scheduler import percentiles

SUMMARY = "http sink summary: "
"""What the last line the sink prints as it stops starts with; `summary_of` reads it back."""

RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n\r\nok"


DELAY_S = int(os.environ.get("KADENCE_BENCH_SINK_DELAY_MS", "0")) / 1000
"""ChildProcess(..., BENCH_SINK_DELAY_MS=200) sets KADENCE_BENCH_SINK_DELAY_MS."""
PARTIAL_HEAD = int(os.environ.get("KADENCE_BENCH_SINK_PARTIAL_HEAD", "0"))
"""With a delay: this many bytes of a head are sent at once, the rest never (a receiver that
stalls in the middle of its answer)."""
TLS = os.environ.get("KADENCE_BENCH_SINK_TLS", "")
"""A folder where testkit.tls.make_certificates made a CA and a certificate for 127.0.0.1 and
localhost: the sink answers HTTPS with it."""


def _tls() -> ssl.SSLContext | None:
    if not TLS:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(os.path.join(TLS, "broker.pem"), os.path.join(TLS, "broker.key"))
    return context


class Counts:
    requests = 0
    connections = 0
    before_due = 0
    """Connections accepted before the due time of the first request they carried (opened
    ahead by the workers: connectors/http_warm.py)."""
    holding = 0
    most_held = 0
    lateness: list[float] = []  # noqa: RUF012 - one process, one sink


def _arrived(accepted: float | None, received: float, due_at: bytes) -> None:
    """A request due at `due_at` arrived at `received`, the first on a connection accepted at
    `accepted` (None: not the first)."""
    due = datetime.fromisoformat(due_at.strip().decode().replace("Z", "+00:00")).timestamp()
    Counts.lateness.append(received - due)
    if accepted is not None and accepted < due:
        Counts.before_due += 1


async def _hold(writer: asyncio.StreamWriter) -> None:
    """DELAY_S before the answer (sending PARTIAL_HEAD bytes of a head meanwhile)."""
    if PARTIAL_HEAD:
        writer.write(b"HTTP/1.1 200 OK\r\nx-pad: " + b"a" * PARTIAL_HEAD)
    Counts.holding += 1
    Counts.most_held = max(Counts.most_held, Counts.holding)
    try:
        await asyncio.sleep(DELAY_S)
    finally:
        Counts.holding -= 1


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    Counts.connections += 1
    accepted = time.time()
    first = True
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            received = time.time()
            length = 0
            close = False
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value.strip() or b"0")
                elif name == b"connection" and value.strip().lower() == b"close":
                    close = True
                elif name == b"kadence-due-at":
                    _arrived(accepted if first else None, received, value)
                    first = False
            if length:
                await reader.readexactly(length)
            Counts.requests += 1
            if DELAY_S:
                await _hold(writer)
            writer.write(RESPONSE)
            await writer.drain()
            if close or head.startswith(b"POST / HTTP/1.0") or b" HTTP/1.0\r\n" in head[:200]:
                break
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    except asyncio.CancelledError:  # the sink stops with connections still open
        return
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def summary_of(output: str) -> dict[str, Any]:
    """The summary the sink printed last as it stopped (its output), {} without one."""
    lines = [line for line in output.splitlines() if line.startswith(SUMMARY)]
    return dict(json.loads(lines[-1].removeprefix(SUMMARY))) if lines else {}


async def main() -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0, backlog=4096, ssl=_tls())
    port = server.sockets[0].getsockname()[1]
    print(f"http sink listening on 127.0.0.1:{port}", flush=True)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    async with server:
        await done.wait()
    print(f"http sink: {Counts.requests} requests on {Counts.connections} connections", flush=True)
    summary = {
        "requests": Counts.requests,
        "connections": Counts.connections,
        "connections_opened_before_due": Counts.before_due,
        "most_held_at_once": Counts.most_held,
        "lateness_as_received_s": percentiles(Counts.lateness),
    }
    print(f"{SUMMARY}{json.dumps(summary)}", flush=True)


if __name__ == "__main__":
    uvloop.run(main())  # as the workers' event loop: the sink must not be the bottleneck
