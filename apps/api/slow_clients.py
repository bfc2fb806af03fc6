"""Idle and slow clients cannot hold the API: each request head must arrive whole within
KADENCE_API_HEAD_TIMEOUT_S of the connection's start (or of the previous answer on it), and the
connections that have not shown a known bearer token are bounded apart from, and below,
KADENCE_API_MAX_CONNECTIONS.

uvicorn bounds connections (`limit_concurrency`, 503 past it) and idle keep-alive connections
(`timeout_keep_alive`, until the first byte of the next request), but nothing bounds how long a
request head may take, and h11 has no such timeout: a few connections that sent a request line
and stopped, or connected and sent nothing, held every slot and every caller got 503, token or
not (issue 41). So uvicorn's h11 protocol is served with a `Guard` watching each connection.

The bound on connections without a token is kept by eviction, not refusal: every connection
starts without one, and refusing new connections at the bound would lock out the callers with
tokens as surely as before. When one more arrives at the bound, the oldest connection without
a token that is not in the middle of a request (else the oldest) is closed. An outsider then
holds at most that many connections, each for at most the head timeout, and a caller whose head
arrives within milliseconds is evicted only if that many connections arrive in those
milliseconds. A connection leaves the bound for good once a request head on it carries a known
token (one SHA-256, or a JWT checked against the JWKS already fetched: apps/api/callers.py);
every later head on it still has the deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class Guard:
    """The connections of one server: each one's head deadline, and those without a token,
    oldest first. Runs on the server's event loop only (no locks)."""

    def __init__(
        self,
        known: Callable[[str | None], bool],
        head_timeout_s: float,
        max_unauthenticated: int,
    ) -> None:
        self.known = known
        """Whether an Authorization header names a caller (apps/api/callers.py `known`)."""
        self.head_timeout_s = head_timeout_s
        self.max_unauthenticated = max_unauthenticated
        self._deadlines: dict[H11Protocol, asyncio.TimerHandle | None] = {}
        """Every open connection, and its head's deadline while it waits for one."""
        self._unauthenticated: dict[H11Protocol, None] = {}
        """Connections no request has shown a known token on, in the order they came."""

    def opened(self, conn: H11Protocol) -> None:
        if len(self._unauthenticated) >= self.max_unauthenticated:
            self._evict()
        self._unauthenticated[conn] = None
        self._deadlines[conn] = None
        self.changed(conn)

    def changed(self, conn: H11Protocol) -> None:
        """After bytes came in or an answer went out: a head that became whole is checked for
        a token, a connection that waits for a head again gets its deadline."""
        if conn not in self._deadlines or conn.transport.is_closing():
            return
        deadline = self._deadlines[conn]
        if conn.conn.their_state is h11.IDLE:  # a head is awaited or on its way
            if deadline is None:
                self._deadlines[conn] = conn.loop.call_later(
                    self.head_timeout_s, self._timed_out, conn
                )
            return
        if deadline is not None:  # the head is whole: the request is the app's now
            deadline.cancel()
            self._deadlines[conn] = None
            if conn in self._unauthenticated and self._known(conn.headers):
                del self._unauthenticated[conn]

    def closed(self, conn: H11Protocol) -> None:
        deadline = self._deadlines.pop(conn, None)
        if deadline is not None:
            deadline.cancel()
        self._unauthenticated.pop(conn, None)

    def _known(self, headers: list[tuple[bytes, bytes]]) -> bool:
        authorization = next((v for k, v in headers if k == b"authorization"), None)
        if authorization is None:
            return False
        return self.known(authorization.decode("latin-1"))

    def _evict(self) -> None:
        waiting = (c for c in self._unauthenticated if c.conn.their_state is h11.IDLE)
        victim = next(waiting, None) or next(iter(self._unauthenticated))
        self.closed(victim)
        victim.transport.close()

    def _timed_out(self, conn: H11Protocol) -> None:
        self.closed(conn)
        conn.transport.close()


def guarded_h11(guard: Guard) -> type[H11Protocol]:
    """uvicorn's h11 protocol with `guard` told of every connection it serves (uvicorn makes
    one protocol object per connection from the class it is given)."""

    class GuardedH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            guard.opened(self)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            guard.changed(self)

        def on_response_complete(self) -> None:
            super().on_response_complete()  # handles a pipelined request's head, if any
            guard.changed(self)

        def connection_lost(self, exc: Exception | None) -> None:
            guard.closed(self)
            super().connection_lost(exc)

    return GuardedH11Protocol
