"""Kept-alive connections of the HTTP and SQS targets, so a run does not pay a TCP (and TLS)
handshake. Used on the targets' event loop only (connectors/aio.py).

A connection is pooled under (scheme, host, port, address, tenant): the address is one the
tenant's address policy allowed when it was opened (connectors/http_dns.py), and only runs of
that tenant take it, so a run never reads what was sent on another tenant's connection and the
policy is exactly as strict as without the pool. A connection goes back only when its answer was
read to the end and nothing else arrived (connectors/http_conn.py), the receiver did not ask to
close it, and its run ended normally (a stopped run's connection is aborted). Idle connections
are closed after `IDLE_S`, before most receivers drop them (Node's default is 5 s).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Sequence

import aiohappyeyeballs

from connectors.http_conn import HttpConnection
from kadence.target_allow import IPAddress

IDLE_S = 4.0
"""A connection idle this long is closed rather than reused."""
MAX_IDLE_PER_KEY = 8_192
"""Idle connections kept to one key; more are closed. Runs come in bursts (every job of a
`* * * * * *` schedule at each second's start): a worker sending 5 000 at once to one target
reuses them the next second instead of opening 5 000 new ones, and opens them ahead of the
first (connectors/http_warm.py). The default `worker_async_max_in_flight`: a worker never has
more runs in flight to use them."""
HAPPY_EYEBALLS_S = 0.25
"""A receiver with several addresses: the next is tried this long after the one before, while
it is still connecting (RFC 8305's connection attempt delay)."""

Key = tuple[str, str, int, IPAddress, str]
"""(scheme, host, port, address, tenant)."""


class ConnectError(OSError):
    """No address of the receiver took a connection (refused, unreachable, TLS refused)."""


class ConnectionPool:
    def __init__(self, tls: ssl.SSLContext) -> None:
        self.tls = tls
        self._idle: dict[Key, list[tuple[HttpConnection, float]]] = {}
        self._swept = time.monotonic()
        self.opened = 0
        """Connections opened so far (for tests and metrics)."""
        self.live: dict[Key, int] = {}
        """Connections open to each key, idle or serving a run (connectors/http_warm.py opens
        ahead only what this lacks)."""

    def take(self, keys: Sequence[Key]) -> tuple[Key, HttpConnection] | None:
        """A kept-alive connection to one of `keys` (in their order), else None (open one)."""
        now = time.monotonic()
        for key in keys:
            idle = self._idle.get(key)
            while idle:
                conn, since = idle.pop()
                if now - since < IDLE_S and not conn.closed:
                    return key, conn
                self._close(key, conn)
        return None

    async def open(self, keys: Sequence[Key]) -> tuple[Key, HttpConnection]:
        """A new connection to the first of `keys`' addresses that takes one (each tried in
        turn, the next one HAPPY_EYEBALLS_S after the one before while it still connects); TLS
        checks the certificate against the host. Raises ConnectError."""
        self.opened += 1
        scheme, host, port, _, _ = keys[0]
        infos = [
            (
                socket.AF_INET6 if address.version == 6 else socket.AF_INET,
                socket.SOCK_STREAM,
                socket.IPPROTO_TCP,
                "",
                (str(address), port),
            )
            for _, _, _, address, _ in keys
        ]
        try:
            sock = await aiohappyeyeballs.start_connection(
                infos, happy_eyeballs_delay=HAPPY_EYEBALLS_S if len(infos) > 1 else None
            )
        except OSError as exc:
            raise ConnectError(f"cannot connect to {host} port {port}: {_why(exc)}") from None
        try:
            connected = _address_of(sock)
            key = next(k for k in keys if str(k[3]) == connected)
            tls = scheme == "https"
            _, conn = await asyncio.get_running_loop().create_connection(
                HttpConnection,
                sock=sock,
                ssl=self.tls if tls else None,
                server_hostname=host if tls else None,
            )
        except ssl.SSLError as exc:
            sock.close()
            raise ConnectError(f"TLS with {host} port {port} failed: {exc}") from None
        except BaseException:
            sock.close()
            raise
        self.live[key] = self.live.get(key, 0) + 1
        return key, conn

    def give(self, key: Key, conn: HttpConnection | None, reusable: bool) -> None:
        """Keep the connection for the next run to `key` if it can serve one, else close it."""
        if conn is None:
            return
        now = time.monotonic()
        idle = self._idle.setdefault(key, [])
        if reusable and len(idle) < MAX_IDLE_PER_KEY and not conn.closed:
            idle.append((conn, now))
        else:
            self._close(key, conn)
        self._sweep(now)

    def _close(self, key: Key, conn: HttpConnection) -> None:
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
            fresh = [(c, t) for c, t in idle if now - t < IDLE_S and not c.closed]
            for conn, since in idle:
                if now - since >= IDLE_S or conn.closed:
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


def _address_of(sock: socket.socket) -> str:
    peer = sock.getpeername()
    return str(peer[0]).split("%", 1)[0]


def _why(exc: OSError) -> str:
    """aiohappyeyeballs raises the first error, or one naming them all ("Multiple exceptions")."""
    return exc.strerror or str(exc) or type(exc).__name__
