"""A loopback HTTP receiver that answers in unusual ways, legal and not: the conformance corpus of
the webhook and queue targets (tests/connectors/test_receiver_conformance.py).

Each path names a behaviour (`CASES`): what the receiver writes for each request on a connection
— a canned answer in any framing, an extra answer while the connection is idle, a close or a
reset at a chosen moment, an answer that trickles. Requests are read with h11 (the receiver's
own parsing is not under test) and recorded with the run's `webhook-id` (its execution id), so
a test can tell a run that reached the receiver from one that did not.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import h11

Step = tuple[str, object]
"""("send", bytes), ("sleep", seconds), ("close", None), ("reset", None), ("trickle", bytes): one
byte every TRICKLE_S; ("hold", None): never answer (until the receiver stops)."""

TRICKLE_S = 0.01
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


def answer(status: int, body: bytes = b"", *extra: str) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"content-length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


@dataclass(frozen=True)
class Case:
    """What the receiver does for the `n`-th request (from 0) on one connection."""

    steps: Callable[[int], Sequence[Step]]
    why: str


def always(*steps: Step) -> Callable[[int], Sequence[Step]]:
    return lambda _n: steps


CHUNKED = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"

CASES: dict[str, Case] = {
    # -- legal, if unusual ------------------------------------------------------------------
    "plain": Case(always(("send", OK)), "200 with a length, kept alive"),
    "no-content": Case(always(("send", b"HTTP/1.1 204 No Content\r\n\r\n")), "204, no body"),
    "chunked": Case(
        always(("send", CHUNKED + b"2;ext=1\r\nok\r\n3\r\n!!!\r\n0\r\nx-trailer: 1\r\n\r\n")),
        "chunked with an extension and a trailer",
    ),
    "until-close": Case(
        always(("send", b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nbody"), ("close", None)),
        "a body that ends with the connection",
    ),
    "http10": Case(always(("send", b"HTTP/1.0 200 OK\r\n\r\nold"), ("close", None)), "HTTP/1.0"),
    "interim": Case(
        always(("send", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\n" + OK)),
        "interim 100 and 103 answers before the final one",
    ),
    "obs-fold": Case(
        always(("send", b"HTTP/1.1 200 OK\r\nx-long: a\r\n  b\r\ncontent-length: 2\r\n\r\nok")),
        "a header folded over two lines (obs-fold)",
    ),
    "bare-lf": Case(always(("send", b"HTTP/1.1 200 OK\ncontent-length: 2\n\nok")), "LF line ends"),
    "equal-lengths": Case(
        always(("send", b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nok")),
        "Content-Length twice, equal (RFC 9112 6.3 lets a recipient take it)",
    ),
    "no-reason": Case(always(("send", b"HTTP/1.1 200\r\ncontent-length: 0\r\n\r\n")), "no reason"),
    "byte-by-byte": Case(always(("trickle", OK)), "the answer one byte at a time"),
    "closes-each": Case(
        always(("send", answer(200, b"ok", "connection: close")), ("close", None)),
        "Connection: close after each answer",
    ),
    "idle-close": Case(
        always(("send", OK), ("sleep", 0.3), ("close", None)),
        "kept alive, then closed while idle (a short keep-alive timeout)",
    ),
    "slow-body": Case(
        always(("send", b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\no"), ("hold", None)),
        "a 2xx whose body never ends",
    ),
    "fail-big": Case(always(("send", answer(500, b"x" * 200_000))), "500 with a 200 kB body"),
    "redirect": Case(
        always(("send", answer(302, b"", "location: http://10.0.0.1/"))), "a redirect"
    ),
    # -- not legal ----------------------------------------------------------------------------
    "twice-then-close": Case(
        always(("send", OK), ("sleep", 0.05), ("send", OK), ("sleep", 0.05), ("close", None)),
        "answers twice, then closes while idle",
    ),
    "extra-500": Case(
        always(("send", OK), ("sleep", 0.05), ("send", answer(500))),
        "answers 200, then an unsolicited 500 on the open connection",
    ),
    "idle-408": Case(
        always(
            ("send", OK),
            ("sleep", 0.05),
            ("send", answer(408, b"", "connection: close")),
            ("close", None),
        ),
        "a 408 sent while idle, then closed",
    ),
    "past-length": Case(
        always(("send", b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokX")),
        "one byte past Content-Length",
    ),
    "superscript-length": Case(
        always(("send", "HTTP/1.1 200 OK\r\ncontent-length: ²\r\n\r\nok".encode())),
        "Content-Length: ² (a digit to str.isdigit, not to HTTP)",
    ),
    "negative-chunk": Case(
        always(("send", CHUNKED + b"-2\r\nok\r\n0\r\n\r\n")), "a negative chunk size"
    ),
    "hex-prefix-chunk": Case(
        always(("send", CHUNKED + b"0x2\r\nok\r\n0\r\n\r\n")), "a chunk size of 0x2"
    ),
    "plus-chunk": Case(always(("send", CHUNKED + b"+2\r\nok\r\n0\r\n\r\n")), "a chunk size +2"),
    "no-chunk-crlf": Case(
        always(("send", CHUNKED + b"2\r\nokXX0\r\n\r\n")), "no CRLF after a chunk's data"
    ),
    "eof-after-last-chunk": Case(
        always(("send", CHUNKED + b"2\r\nok\r\n0\r\n"), ("close", None)),
        "closed after the last chunk, before the final CRLF",
    ),
    "not-chunked": Case(
        always(
            (
                "send",
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: notchunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
            )
        ),
        "a transfer coding that only contains the word chunked: the body ends with the "
        "connection (RFC 9112 6.3)",
    ),
    "not-http": Case(always(("send", b"SMTP ready\r\n\r\n"), ("close", None)), "not HTTP"),
    "huge-head": Case(
        always(("send", b"HTTP/1.1 200 OK\r\nx-big: " + b"y" * 200_000 + b"\r\n\r\n")),
        "a 200 kB header",
    ),
    "reset": Case(always(("reset", None)), "reset as soon as the request arrived"),
    "gone-on-second": Case(
        lambda n: [("send", OK)] if n == 0 else [("close", None)],
        "answers the first request, closes on the second without answering (it got it)",
    ),
    "close-silently": Case(always(("close", None)), "closed without a word"),
    "hang": Case(always(("hold", None)), "never answers"),
    "slow-head": Case(
        always(("trickle", b"HTTP/1.1 200 OK\r\n" + b"x: y\r\n" * 40)), "a head that trickles"
    ),
}


@dataclass
class Received:
    path: str
    run: str
    """The request's webhook-id (the run's execution id), or "" without one."""
    connection: int
    at: float


@dataclass
class Receiver:
    """`start()` listens on 127.0.0.1, port 0; `url(case)` is the case's address."""

    cases: dict[str, Case] = field(default_factory=lambda: dict(CASES))
    received: list[Received] = field(default_factory=list)
    connections: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Receiver:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=256)
        self.port = self.sock.getsockname()[1]
        self._open: set[socket.socket] = set()
        threading.Thread(target=self._accept, name="receiver", daemon=True).start()
        return self

    def url(self, case: str) -> str:
        return f"http://127.0.0.1:{self.port}/{case}"

    def runs(self, case: str) -> list[str]:
        with self.lock:
            return [r.run for r in self.received if r.path == f"/{case}"]

    def stop(self) -> None:
        self.stopping.set()
        self.sock.close()
        with self.lock:
            conns = list(self._open)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.close()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                number = self.connections
                self._open.add(conn)
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        parser = h11.Connection(h11.SERVER)
        served = 0
        try:
            while not self.stopping.is_set():
                request = self._read_request(conn, parser)
                if request is None:
                    return
                path, run = request
                with self.lock:
                    self.received.append(Received(path, run, number, time.time()))
                case = self.cases.get(path.lstrip("/").split("?")[0])
                steps = case.steps(served) if case else [("send", answer(404))]
                served += 1
                if not self._play(conn, steps):
                    return
                # the next request on this connection: h11 reads it after our canned answer
                parser = h11.Connection(h11.SERVER)
        except OSError:
            return
        finally:
            with self.lock:
                self._open.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

    def _read_request(self, conn: socket.socket, parser: h11.Connection) -> tuple[str, str] | None:
        path, run = "", ""
        while True:
            event = parser.next_event()
            if event is h11.NEED_DATA:
                data = conn.recv(65536)
                parser.receive_data(data)
                if not data:
                    return None
                continue
            if isinstance(event, h11.Request):
                path = event.target.decode()
                run = dict(event.headers).get(b"webhook-id", b"").decode()
            elif isinstance(event, h11.EndOfMessage):
                return path, run
            elif isinstance(event, h11.ConnectionClosed):
                return None

    def _play(self, conn: socket.socket, steps: Sequence[Step]) -> bool:
        """Whether the connection stays open for another request."""
        for kind, arg in steps:
            if kind == "send":
                assert isinstance(arg, bytes)
                conn.sendall(arg)
            elif kind == "trickle":
                assert isinstance(arg, bytes)
                for i in range(len(arg)):
                    if self.stopping.wait(TRICKLE_S):
                        return False
                    conn.sendall(arg[i : i + 1])
            elif kind == "sleep":
                assert isinstance(arg, float)
                time.sleep(arg)
            elif kind == "hold":
                self.stopping.wait()
                return False
            elif kind == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return False
            elif kind == "close":
                conn.shutdown(socket.SHUT_RDWR)
                return False
        return True
