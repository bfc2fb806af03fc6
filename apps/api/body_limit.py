"""The request body limit, enforced on the stream before anything reads, parses or
authenticates the request.

A Content-Length over the limit is refused at once; a body without one (chunked) is counted as
it arrives and refused (413, connection closed) the moment it crosses the limit, so an
unauthenticated client can make the server hold at most `limit` bytes of one request. A body
within the limit is handed to the app in one piece once it has all arrived.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """Pure ASGI (not BaseHTTPMiddleware): it must see the body before any route does."""

    def __init__(self, app: ASGIApp, limit: int, what: str) -> None:
        self.app = app
        self.limit = limit
        self.what = what
        """What the limit is made of, for the 413's detail."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _content_length(scope)
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._refuse(send, 400 if not length.isdigit() else 413)
            return
        chunks: list[bytes] = []
        received = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.limit:
                await self._refuse(send, 413)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def _refuse(self, send: Send, status: int) -> None:
        detail = (
            f"request body over {self.limit} bytes ({self.what})"
            if status == 413
            else "Content-Length is not a number"
        )
        body = json.dumps({"detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name.lower() == b"content-length":
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
