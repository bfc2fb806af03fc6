"""Kept-alive connections of the HTTP and SQS targets, so a run does not pay a TCP (and TLS)
handshake. Used on the targets' event loop only (connectors/aio.py).

A connection is pooled under (scheme, host, port, address): the address is the one the address
policy checked for the run that opened it, and a run takes a pooled connection only for the
address its own check just returned. So the policy is exactly as strict as without the pool:
every run resolves and checks the host, and its request goes to the address checked.
A connection goes back only when its response was read to the end, the server did not ask to
close it, and its run ended normally (a stopped run's connection is aborted). Idle connections
are closed after `IDLE_S`, before most servers drop them (Node's default is 5 s).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from dataclasses import dataclass

from kadence.target_allow import IPAddress

IDLE_S = 4.0
"""A connection idle this long is closed rather than reused."""
MAX_IDLE_PER_KEY = 8_192
"""Idle connections kept to one (scheme, host, port, address); more are closed. Runs come in
bursts (every job of a `* * * * * *` schedule at each second's start): a worker sending 5 000
at once to one target reuses them the next second instead of opening 5 000 new ones, and opens
them ahead of the first (connectors/http_warm.py). The default `worker_async_max_in_flight`: a
worker never has more runs in flight to use them. About 3.5 KB of the worker's memory each.
"""
HEAD_LIMIT = 131_072
"""Bytes of a response's status line and headers at most."""

Key = tuple[str, str, int, IPAddress]


@dataclass(eq=False)
class Conn:
    """One connection to the vetted address of its key, whatever the host name resolves to."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    @property
    def sock(self) -> socket.socket | None:
        sock: socket.socket | None = self.writer.get_extra_info("socket")
        return sock

    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.transport.abort()


class ConnectionPool:
    def __init__(self, tls: ssl.SSLContext) -> None:
        self.tls = tls
        self._idle: dict[Key, list[tuple[Conn, float]]] = {}
        self._swept = time.monotonic()
        self.opened = 0
        """Connections opened so far (for tests and metrics)."""
        self.live: dict[Key, int] = {}
        """Connections open to each key, idle or serving a run (connectors/http_warm.py opens
        ahead only what this lacks)."""

    def take(self, key: Key) -> Conn | None:
        """A kept-alive connection to exactly `key`'s address, else None (open one)."""
        now = time.monotonic()
        idle = self._idle.get(key, [])
        while idle:
            conn, since = idle.pop()
            if now - since < IDLE_S and conn.usable():
                return conn
            self._close(key, conn)
        return None

    async def open(self, key: Key) -> Conn:
        """A new connection to `key`'s address (TLS checks the certificate against the host)."""
        self.opened += 1
        scheme, host, port, address = key
        tls = scheme == "https"
        reader, writer = await asyncio.open_connection(
            str(address),
            port,
            ssl=self.tls if tls else None,
            server_hostname=host if tls else None,
            limit=HEAD_LIMIT,
        )
        self.live[key] = self.live.get(key, 0) + 1
        return Conn(reader, writer)

    def give(self, key: Key, conn: Conn | None, reusable: bool) -> None:
        """Keep the connection for the next run to `key` if it can serve one, else close it."""
        if conn is None:
            return
        now = time.monotonic()
        idle = self._idle.setdefault(key, [])
        if reusable and len(idle) < MAX_IDLE_PER_KEY and conn.usable():
            idle.append((conn, now))
        else:
            self._close(key, conn)
        self._sweep(now)

    def _close(self, key: Key, conn: Conn) -> None:
        conn.close()
        left = self.live.get(key, 0) - 1
        if left > 0:
            self.live[key] = left
        else:
            self.live.pop(key, None)

    def _sweep(self, now: float) -> None:
        """Close the connections idle too long (every `IDLE_S`)."""
        if now - self._swept < IDLE_S:
            return
        self._swept = now
        for key, idle in list(self._idle.items()):
            fresh = [(c, t) for c, t in idle if now - t < IDLE_S]
            for conn, since in idle:
                if now - since >= IDLE_S:
                    self._close(key, conn)
            if fresh:
                self._idle[key] = fresh
            else:
                del self._idle[key]

    def close(self) -> None:
        idle, self._idle = self._idle, {}
        self.live.clear()
        for conns in idle.values():
            for conn, _ in conns:
                conn.close()
