"""The request body limit and the token check before any body is read, enforced on the stream
before anything reads or parses the request.

A Content-Length over the limit is refused at once. A request that carries a body (a
Content-Length above 0, or chunked) without a known bearer token (a static one, or a JWT,
checked in a thread as it may fetch the JWKS) is refused (401, connection closed) before a
byte of its body is read: every route that takes a body needs a token, so an
outsider makes the server hold nothing but the request's headers (and the number of
connections is bounded by KADENCE_API_MAX_CONNECTIONS, apps/api/__main__.py). A known caller's
body without a Content-Length is counted as it arrives and refused (413, connection closed) the
moment it crosses the limit. A body within the limit is handed to the app in one piece once it
has all arrived; the route authenticates the caller again, fully. A body that has not all
arrived within the timeout (KADENCE_API_BODY_TIMEOUT_S) is answered 408 and the connection
closed: uvicorn has no timeout of its own on a body (its keep-alive timeout is for idle
connections, and a head's is apps/api/slow_clients.py's).
"""

from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apps.api.callers import Callers, NotAuthenticatedError, is_bearer
from apps.api.jwt_bearer import looks_like_jwt


class BodyLimit:
    """Pure ASGI (not BaseHTTPMiddleware): it must see the body before any route does."""

    def __init__(
        self, app: ASGIApp, limit: int, what: str, callers: Callers, timeout_s: float
    ) -> None:
        self.app = app
        self.limit = limit
        self.what = what
        """What the limit is made of, for the 413's detail."""
        self.callers = callers
        """Who may send a body at all."""
        self.timeout_s = timeout_s
        """How long a body may take to arrive whole."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _header(scope, b"content-length")
        if length is not None and not (length.isascii() and length.isdigit()):
            await self._refuse(send, 400)
            return
        if length is not None and int(length) > self.limit:
            await self._refuse(send, 413)
            return
        chunked = _header(scope, b"transfer-encoding") is not None
        has_body = chunked or (length is not None and int(length) > 0)
        if has_body and not await self._known(_header(scope, b"authorization")):
            await self._refuse(send, 401)
            return
        try:
            async with asyncio.timeout(self.timeout_s):
                body = await self._body(receive)
        except TimeoutError:
            body = 408
        if isinstance(body, int):
            await self._refuse(send, body)
        elif body is not None:  # None: the client went away
            await self.app(scope, _replay(body, receive), send)

    async def _known(self, authorization: str | None) -> bool:
        """A static token: one SHA-256, here. A JWT: checked in a thread, as it may fetch the
        JWKS."""
        if self.callers.jwt is None or not is_bearer(authorization):
            return self.callers.known(authorization)
        assert authorization is not None
        if not looks_like_jwt(authorization[7:].strip()):
            return self.callers.known(authorization)
        return await asyncio.to_thread(self._identified, authorization)

    def _identified(self, authorization: str) -> bool:
        try:
            self.callers.identify(authorization)
        except NotAuthenticatedError:
            return False
        return True

    async def _body(self, receive: Receive) -> bytes | int | None:
        """The whole body; 413 the moment it crosses the limit; None when the client went
        away."""
        chunks: list[bytes] = []
        received = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.limit:
                return 413
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)

    async def _refuse(self, send: Send, status: int) -> None:
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        if status == 413:
            detail = f"request body over {self.limit} bytes ({self.what})"
        elif status == 408:
            detail = f"the request body did not arrive whole within {self.timeout_s:g} s"
        elif status == 401:
            detail = "a request with a body needs a known bearer token (Authorization: Bearer)"
            headers.append((b"www-authenticate", b"Bearer"))
        else:
            detail = "Content-Length is not a number"
        body = json.dumps({"detail": detail}).encode()
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    """The first header `name` (lowercase) of the request, as text."""
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1").strip()
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body as one message, then the client's own messages (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
