"""A loopback HTTP/1.1 sink for benchmarks: answers every request 200 with keep-alive.

    python -m bench.http_sink            # prints `http sink listening on 127.0.0.1:<port>`

One asyncio process, no per-request thread: what the benchmark measures is the workers'
HTTP path (connections, signing, SSRF checks), not this server. It counts requests and
connections and prints them when it stops (SIGTERM or SIGINT).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n\r\nok"


class Counts:
    requests = 0
    connections = 0


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    Counts.connections += 1
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            close = False
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value.strip() or b"0")
                elif name == b"connection" and value.strip().lower() == b"close":
                    close = True
            if length:
                await reader.readexactly(length)
            Counts.requests += 1
            writer.write(RESPONSE)
            await writer.drain()
            if close or head.startswith(b"POST / HTTP/1.0") or b" HTTP/1.0\r\n" in head[:200]:
                break
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def main() -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    print(f"http sink listening on 127.0.0.1:{port}", flush=True)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    async with server:
        await done.wait()
    print(f"http sink: {Counts.requests} requests on {Counts.connections} connections", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
