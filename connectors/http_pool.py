"""Kept-alive connections of the HTTP target, so a run does not pay a TCP (and TLS) handshake.

A connection is pooled under (scheme, host, port, address): the address is the one the address
policy checked for the run that opened it, and a run takes a pooled connection only for the
address its own check just returned. So the policy is exactly as strict as without the pool:
every run resolves and checks the host, and its request goes to the address checked.
A connection goes back only when its response was read to the end, the server did not ask to
close it, and its run was not stopped (a stop shuts the socket down). Idle connections are
closed after `IDLE_S`, before most servers drop them (Node's default is 5 s).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field

from kadence.target_allow import IPAddress

IDLE_S = 4.0
"""A connection idle this long is closed rather than reused."""
MAX_IDLE_PER_KEY = 32
"""Idle connections kept to one (scheme, host, port, address); more are closed."""

Key = tuple[str, str, int, IPAddress]


class Pinned(http.client.HTTPConnection):
    """Connects to the vetted address, whatever the host name resolves to by then."""

    def __init__(self, host: str, port: int, address: IPAddress, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((str(self.address), self.port), self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class PinnedTLS(Pinned):
    def __init__(
        self, host: str, port: int, address: IPAddress, timeout: float, context: ssl.SSLContext
    ) -> None:
        super().__init__(host, port, address, timeout)
        self.context = context

    def connect(self) -> None:
        super().connect()
        self.sock = self.context.wrap_socket(self.sock, server_hostname=self.host)


@dataclass
class Borrowed:
    """A connection one run holds; `interrupt` (from the run's stop, on any thread) shuts its
    socket down only while that run still holds it, never once it is back in the pool."""

    conn: Pinned
    reused: bool
    interrupted: bool = False
    _held: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def interrupt(self) -> None:
        with self._lock:
            if not self._held:
                return
            self.interrupted = True
            sock = self.conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def give_back(self) -> bool:
        """End the run's hold; False if a stop interrupted it meanwhile."""
        with self._lock:
            self._held = False
            return not self.interrupted


class ConnectionPool:
    def __init__(self, tls: ssl.SSLContext) -> None:
        self.tls = tls
        self._idle: dict[Key, list[tuple[Pinned, float]]] = {}
        self._lock = threading.Lock()
        self._swept = time.monotonic()
        self.opened = 0
        """Connections opened so far (for tests and metrics)."""

    def take(self, key: Key, timeout: float) -> Borrowed:
        """A kept-alive connection to exactly `key`'s address, else a new (unconnected) one."""
        now = time.monotonic()
        with self._lock:
            idle = self._idle.get(key, [])
            while idle:
                conn, since = idle.pop()
                if now - since < IDLE_S and conn.sock is not None:
                    conn.timeout = timeout
                    conn.sock.settimeout(timeout)
                    return Borrowed(conn, reused=True)
                conn.close()
            self.opened += 1
        scheme, host, port, address = key
        conn = (
            PinnedTLS(host, port, address, timeout, self.tls)
            if scheme == "https"
            else Pinned(host, port, address, timeout)
        )
        return Borrowed(conn, reused=False)

    def give(self, key: Key, borrowed: Borrowed, response: http.client.HTTPResponse | None) -> None:
        """Keep the connection for the next run to `key` if it can serve one, else close it."""
        conn = borrowed.conn
        clean = borrowed.give_back()
        if not clean or response is None or response.will_close or not response.isclosed():
            conn.close()
            return
        now = time.monotonic()
        with self._lock:
            idle = self._idle.setdefault(key, [])
            kept = len(idle) < MAX_IDLE_PER_KEY and conn.sock is not None
            if kept:
                idle.append((conn, now))
            stale = self._sweep(now)
        if not kept:
            conn.close()
        for old in stale:
            old.close()

    def _sweep(self, now: float) -> list[Pinned]:
        """Take out the connections idle too long (every `IDLE_S`), to be closed."""
        if now - self._swept < IDLE_S:
            return []
        self._swept = now
        stale: list[Pinned] = []
        for key, idle in list(self._idle.items()):
            fresh = [(c, t) for c, t in idle if now - t < IDLE_S]
            stale.extend(c for c, t in idle if now - t >= IDLE_S)
            if fresh:
                self._idle[key] = fresh
            else:
                del self._idle[key]
        return stale

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn, _ in conns:
                conn.close()
