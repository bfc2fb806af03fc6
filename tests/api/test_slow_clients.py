"""The API's guard against slow clients (apps/api/slow_clients.py) decides alone, without a
server: which connection without a token makes room for a new one, when a head's deadline is
set and cleared, and that a known token takes a connection out of the bound for good.
tests/hostile/test_api_early_auth.py and test_api_slow_clients.py prove it on real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

import h11
import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol

from apps.api.auth import token_hash
from apps.api.callers import Callers
from apps.api.slow_clients import Guard
from apps.api.token_book import TokenBook


@dataclass
class FakeTransport:
    closed: bool = False

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


@dataclass
class FakeState:
    their_state: type[h11.IDLE] | type[h11.SEND_BODY] = h11.IDLE


@dataclass(eq=False)  # hashed by identity, as the protocol objects are
class FakeConnection:
    """What the guard reads of uvicorn's h11 protocol object."""

    loop: asyncio.AbstractEventLoop
    transport: FakeTransport = field(default_factory=FakeTransport)
    conn: FakeState = field(default_factory=FakeState)
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)

    def head(self, token: str | None = None) -> None:
        """A whole request head arrived (with a bearer token, if given)."""
        self.conn.their_state = h11.SEND_BODY
        if token is not None:
            self.headers = [(b"authorization", f"Bearer {token}".encode())]

    def answered(self) -> None:
        self.conn.their_state = h11.IDLE


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    running = asyncio.new_event_loop()
    yield running
    running.close()


def as_protocol(conn: FakeConnection) -> H11Protocol:
    return cast(H11Protocol, conn)


def opened(guard: Guard, loop: asyncio.AbstractEventLoop, n: int) -> list[FakeConnection]:
    made = [FakeConnection(loop) for _ in range(n)]
    for conn in made:
        guard.opened(as_protocol(conn))
    return made


def test_room_is_made_by_the_oldest_idle_connection_then_the_oldest(
    loop: asyncio.AbstractEventLoop,
) -> None:
    guard = Guard(Callers(TokenBook({})).known, head_timeout_s=5, max_unauthenticated=2)
    busy, idle = opened(guard, loop, 2)
    busy.head()  # a probe's request in progress, no token
    guard.changed(as_protocol(busy))
    [third] = opened(guard, loop, 1)
    assert (busy.transport.closed, idle.transport.closed) == (False, True)  # not the oldest
    third.head()
    guard.changed(as_protocol(third))
    opened(guard, loop, 1)  # both left are in a request: the oldest goes
    assert (busy.transport.closed, third.transport.closed) == (True, False)


def test_a_known_token_takes_a_connection_out_of_the_bound_for_good(
    loop: asyncio.AbstractEventLoop,
) -> None:
    guard = Guard(
        Callers(TokenBook({token_hash("tok"): "acme"})).known,
        head_timeout_s=5,
        max_unauthenticated=1,
    )
    [liar] = opened(guard, loop, 1)
    liar.head("not-the-token")
    guard.changed(as_protocol(liar))  # a head without a known token: still in the bound
    [mine] = opened(guard, loop, 1)
    assert liar.transport.closed
    mine.head("tok")
    guard.changed(as_protocol(mine))
    mine.answered()
    guard.changed(as_protocol(mine))  # idle again, waiting for its next head: still exempt
    others = opened(guard, loop, 3)
    assert not mine.transport.closed
    assert [c.transport.closed for c in others] == [True, True, False]


def test_the_deadline_runs_from_opening_or_an_answer_and_stops_at_a_whole_head(
    loop: asyncio.AbstractEventLoop,
) -> None:
    guard = Guard(Callers(TokenBook({})).known, head_timeout_s=0.05, max_unauthenticated=10)
    slow, quick = opened(guard, loop, 2)
    quick.head()
    guard.changed(as_protocol(quick))  # whole: its deadline is cleared
    loop.run_until_complete(asyncio.sleep(0.2))
    assert (slow.transport.closed, quick.transport.closed) == (True, False)
    quick.answered()
    guard.changed(as_protocol(quick))  # waiting for its next head: the deadline again
    loop.run_until_complete(asyncio.sleep(0.2))
    assert quick.transport.closed
