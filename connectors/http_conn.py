"""One HTTP/1.1 connection of the webhook and queue targets: an asyncio protocol whose answers are
framed by maintained parsers, so what Kadence owns is only when a connection may serve again.

- llhttp (Node's parser, through httptools) reads every answer, strictly, at C speed.
- A head llhttp refuses is read once more by h11, which takes the legacy forms RFC 9112 lets a
  recipient accept (line ends without CR, folded header lines, a Content-Length given twice
  with one value); what neither can read is a `BadResponseError`. Such a connection is closed
  after its answer: its framing is not one to trust twice.
- The answer's head decides the run: once it is read, a body that is cut short, framed wrongly,
  too long or too slow no longer changes what the receiver said; it only closes the connection.

A connection serves one run at a time and is reused only when its answer ended as framed, the
receiver did not ask to close, and nothing more arrived: bytes past the end of an answer, or any
byte while the connection sits idle in the pool (an answer nobody asked for, a `408` before a
close), close it. So an answer is only ever read by the run whose request it answers.

Limits per connection, small: an answer's head at most HEAD_LIMIT bytes; of its body,
BODY_LIMIT bytes are kept and at most DRAIN_LIMIT more read so the connection can serve again.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from typing import cast

import h11
import httptools

HEAD_LIMIT = 16_384
"""Bytes of an answer's status line and headers at most."""
BODY_LIMIT = 4_096
"""Bytes of an answer's body kept (a failure's message, an answer to parse)."""
DRAIN_LIMIT = 16_384
"""Bytes of an answer's body read past BODY_LIMIT so its connection can serve again."""
_NAME = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
"""A header's name (a token) and value (RFC 9110 5.5: no control character but HTAB)."""


class RemoteDisconnectedError(ConnectionError):
    """The receiver closed or reset the connection before its answer's head."""


class BadResponseError(Exception):
    """What the receiver sent is not an HTTP/1.1 answer a client can frame."""


class InvalidRequestError(ValueError):
    """A request that would not be HTTP (a control character in a header): nothing is sent."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    reason: str
    headers: dict[str, str]
    """Lower-cased names; a repeated header's values joined by `, `."""

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)


def request_bytes(method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    """The request on the wire; raises InvalidRequestError for a name or value that would
    change its framing (the models refuse them at the door already)."""
    try:
        names = [name.encode("ascii") for name, _ in headers]
        values = [value.encode("latin-1") for _, value in headers]
    except UnicodeEncodeError:
        names = values = []
    # one match over all names and one over all values: each pattern is a run of allowed bytes,
    # so the joined bytes match exactly when every part does (and no name is empty)
    if (
        len(names) != len(headers)
        or not all(names)
        or (names and not _NAME.fullmatch(b"".join(names)))
        or not _VALUE.fullmatch(b"".join(values))
    ):
        raise InvalidRequestError(_refused_header(headers))
    lines = [f"{method} {target} HTTP/1.1".encode("ascii")]
    lines.extend(name + b": " + value for name, value in zip(names, values, strict=True))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _refused_header(headers: list[tuple[str, str]]) -> str:
    """Why `request_bytes` refused `headers`: the first one HTTP does not allow."""
    for name, value in headers:
        try:
            raw_name, raw_value = name.encode("ascii"), value.encode("latin-1")
        except UnicodeEncodeError:
            raw_name = raw_value = b"\n"
        if not _NAME.fullmatch(raw_name) or not _VALUE.fullmatch(raw_value):
            return f"header {name!r}: not a header name and value HTTP allows"
    return "a header HTTP does not allow"


class HttpConnection(asyncio.Protocol):
    """A client connection; `exchange` sends one request and returns its answer's head,
    `body` the start of its body; `reusable` says (after `body`) whether it may serve again."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        """Closed, reset, or closed by us: never serves again."""
        self._busy = False
        self._eof = False
        self._wakeup: asyncio.Future[None] | None = None
        self._start()

    def _start(self) -> None:
        """A fresh parser and answer for the next exchange."""
        self._parser = httptools.HttpResponseParser(self)
        self._raw = bytearray()
        """The answer's bytes until its head is read (for h11, should llhttp refuse it)."""
        self._reason = bytearray()
        self._fields: list[tuple[bytes, bytes]] = []
        self._head: Answer | None = None
        self._interim = False
        self._body = bytearray()
        self._body_limit = BODY_LIMIT
        self._body_read = 0
        self._complete = False
        """The answer ended as its framing says."""
        self._unfit = False
        """Something makes the connection unfit to serve again (bytes past the answer, a
        framing llhttp refused, a body too long)."""
        self._refused: str | None = None
        """Why llhttp refused the answer's head."""
        self._keep_alive = False
        """The receiver did not ask to close (HTTP/1.1, no `Connection: close`)."""

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        if not self._busy:  # nobody asked: an extra answer, a 408 before a close
            self.close()
            return
        if self._head is None:
            self._raw += data
            if len(self._raw) > HEAD_LIMIT:
                self._raw = self._raw[:HEAD_LIMIT]
                self._refused = f"the answer's head is over {HEAD_LIMIT} bytes"
            if self._refused is not None:  # h11 reads the head (`_lenient_head`)
                self._wake()
                return
        elif self._complete or self._unfit:  # past the end of the answer
            self._unfit = True
            self._wake()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._unfit = True  # a 101 answer: the connection is not HTTP any more
        except httptools.HttpParserError as exc:
            if self._head is None:
                self._refused = str(exc) or type(exc).__name__
            self._unfit = True  # past the head: the head decides, the connection goes
        self._wake()

    def eof_received(self) -> bool:
        self._end()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._end()

    # -- llhttp's callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._complete:
            self._unfit = True  # a second answer to one request

    def on_status(self, data: bytes) -> None:
        self._reason += data

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # an interim answer: skipped
            self._interim = True
            self._reason.clear()
            self._fields.clear()
            return
        self._head = Answer(status, self._reason.decode("latin-1"), _joined(self._fields))
        self._keep_alive = self._parser.should_keep_alive()  # llhttp forgets at the message's end

    def on_body(self, data: bytes) -> None:
        limit = self._body_limit
        if len(self._body) < limit:
            self._body += data[: limit - len(self._body)]
        self._body_read += len(data)
        if self._body_read > limit + DRAIN_LIMIT:
            self._unfit = True

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self._complete = True

    # -- one exchange ---------------------------------------------------------------------

    async def exchange(self, request: bytes, body_limit: int = BODY_LIMIT) -> Answer:
        """Send `request`, return its answer's head (interim 1xx answers skipped); `body`
        keeps `body_limit` bytes of its body. Raises RemoteDisconnectedError,
        BadResponseError."""
        assert self.transport is not None
        assert not self._busy
        self._busy = True
        self._body_limit = body_limit
        if self._eof:
            raise RemoteDisconnectedError("the receiver had closed the connection")
        self.transport.write(request)
        while self._head is None:
            if self._refused is not None or self._eof:
                head = self._lenient_head()
                if head is not None:
                    return head
            await self._wait()
        return self._head

    async def body(self, until: float) -> tuple[bytes, bool]:
        """The start of the answer's body (`body_limit` bytes), waited for until the loop's time
        `until` at the latest, and whether the answer ended as framed."""
        if not self._complete and not self._unfit and not self._eof:
            try:
                async with asyncio.timeout_at(until):
                    while not (self._complete or self._unfit or self._eof):
                        await self._wait()
            except TimeoutError:
                self._unfit = True
        return bytes(self._body), self._complete

    def reusable(self) -> bool:
        """After `body`: whether the connection may serve again (then it is ready to)."""
        if self.closed or self._eof or self._unfit or not self._complete or not self._keep_alive:
            return False
        self._start()
        self._busy = False
        return True

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # -- internals ------------------------------------------------------------------------

    def _lenient_head(self) -> Answer | None:
        """The head llhttp refused (or that the receiver cut short by closing), read by h11;
        None while h11 needs more of it. The connection will not serve again."""
        self._unfit = True
        if self._eof and not self._raw:
            raise RemoteDisconnectedError("the receiver closed the connection, no answer")
        found = _h11_head(bytes(self._raw), self._eof, self._refused)
        if found is None:
            if self._eof or len(self._raw) >= HEAD_LIMIT:
                raise BadResponseError(self._refused or "the answer ended in its head")
            return None
        head, body = found
        self._body += body
        return head

    async def _wait(self) -> None:
        self._wakeup = asyncio.get_running_loop().create_future()
        try:
            await self._wakeup
        finally:
            self._wakeup = None

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _end(self) -> None:
        self._eof = True
        self._wake()


def _h11_head(raw: bytes, eof: bool, refused: str | None) -> tuple[Answer, bytes] | None:
    """The final answer's head in `raw` (and the start of its body), as h11 reads it; None
    when h11 needs more bytes. Raises BadResponseError when it is not a head h11 can read."""
    reader = h11.Connection(h11.CLIENT, max_incomplete_event_size=HEAD_LIMIT)
    reader.send(h11.Request(method="POST", target="/", headers=[("host", "-")]))
    reader.send(h11.EndOfMessage())
    reader.receive_data(raw)
    if eof:
        reader.receive_data(b"")
    try:
        event = reader.next_event()
        while isinstance(event, h11.InformationalResponse):
            event = reader.next_event()
    except h11.RemoteProtocolError as exc:
        raise BadResponseError(refused or str(exc)) from None
    if event is h11.NEED_DATA:
        return None
    if not isinstance(event, h11.Response):
        raise BadResponseError(refused or "the answer ended in its head")
    body = b""
    with contextlib.suppress(h11.RemoteProtocolError):
        more = reader.next_event()
        if isinstance(more, h11.Data):
            body = bytes(more.data[:BODY_LIMIT])
    fields = [(bytes(n), bytes(v)) for n, v in event.headers]
    return Answer(event.status_code, event.reason.decode("latin-1"), _joined(fields)), body


def _joined(fields: list[tuple[bytes, bytes]]) -> dict[str, str]:
    joined: dict[str, str] = {}
    for raw_name, raw_value in fields:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1").strip()
        joined[name] = f"{joined[name]}, {value}" if name in joined else value
    return joined
