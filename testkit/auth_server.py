"""A loopback receiver that enforces credentials, for the connections' tests: each path wants
one kind, answers 200 when the request carries an accepted credential and 401 otherwise, and
records what it saw. `/token` is an OAuth2 token endpoint (client credentials) whose tokens
`/oauth` accepts until they expire. With `tls`, it serves HTTPS and requires a client
certificate signed by the given CA (`/mtls`: any request that got through the handshake).

    /apikey-header   X-Api-Key: <one of api_keys>
    /apikey-query    ?key=<one of api_keys>
    /basic           Authorization: Basic <one of basic>
    /bearer          Authorization: Bearer <one of bearer>
    /oauth           Authorization: Bearer <a token /token issued, not expired>
    /token           POST grant_type=client_credentials, client id/secret by Basic or in the body
    /mtls            200 (the TLS handshake checked the client certificate)
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class AuthHit:
    path: str
    method: str
    headers: dict[str, str]
    query: str
    body: bytes
    ok: bool
    peer_subject: str = ""


@dataclass(frozen=True)
class ServerTls:
    cert_pem: str
    key_pem: str
    client_ca_pem: str


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


@dataclass
class AuthServer:
    api_keys: set[str] = field(default_factory=set)
    basic: set[tuple[str, str]] = field(default_factory=set)
    bearer: set[str] = field(default_factory=set)
    clients: dict[str, str] = field(default_factory=dict)
    """OAuth2 client id -> secret."""
    token_lifetime_s: int = 3600
    tls: ServerTls | None = None
    hits: list[AuthHit] = field(default_factory=list)
    token_requests: list[AuthHit] = field(default_factory=list)
    issued: dict[str, float] = field(default_factory=dict)
    """token -> when it expires (time.time())."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> AuthServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def do_PUT(self) -> None:
                self._serve()

            def _serve(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("content-length", "0") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                peer = ""
                if isinstance(self.connection, ssl.SSLSocket):
                    cert: Any = self.connection.getpeercert() or {}
                    rdns: Any = cert.get("subject", ())
                    peer = ",".join(f"{k}={v}" for rdn in rdns for k, v in rdn)
                if url.path == "/token":
                    status, answer = outer._token(headers, body)
                    hit = AuthHit(url.path, self.command, headers, url.query, body, status == 200)
                    with outer.lock:
                        outer.token_requests.append(hit)
                    self._answer(status, json.dumps(answer).encode(), "application/json")
                    return
                ok = outer._allowed(url.path, headers, url.query, peer)
                hit = AuthHit(url.path, self.command, headers, url.query, body, ok, peer)
                with outer.lock:
                    outer.hits.append(hit)
                self._answer(200 if ok else 401, b"ok" if ok else b"unauthorized", "text/plain")

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", content_type)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            self.server.socket = self._context().wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def _context(self) -> ssl.SSLContext:
        import tempfile  # noqa: PLC0415 - only a TLS server needs it

        assert self.tls is not None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.NamedTemporaryFile("w", suffix=".pem") as chain:
            chain.write(self.tls.key_pem + "\n" + self.tls.cert_pem)
            chain.flush()
            context.load_cert_chain(chain.name)
        context.load_verify_locations(cadata=self.tls.client_ca_pem)
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    @property
    def url(self) -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def seen(self, path: str | None = None) -> list[AuthHit]:
        with self.lock:
            return [h for h in self.hits if path is None or h.path == path]

    def wait(self, count: int, path: str | None = None, timeout_s: float = 60) -> list[AuthHit]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(self.seen(path)) >= count:
                return self.seen(path)
            time.sleep(0.05)
        raise TimeoutError(f"{count} requests to {path} expected, got {len(self.seen(path))}")

    # -- the rules ---------------------------------------------------------------------------

    def _allowed(self, path: str, headers: dict[str, str], query: str, peer: str) -> bool:
        auth = headers.get("authorization", "")
        bearer = auth[7:] if auth.startswith("Bearer ") else None
        with self.lock:
            rules = {
                "/apikey-header": lambda: headers.get("x-api-key", "") in self.api_keys,
                "/apikey-query": lambda: any(
                    k in self.api_keys for k in parse_qs(query).get("key", [])
                ),
                "/basic": lambda: _basic(auth) in self.basic,
                "/bearer": lambda: bearer in self.bearer,
                "/oauth": lambda: bearer is not None and time.time() < self.issued.get(bearer, 0.0),
                "/mtls": lambda: bool(peer),
            }
            rule = rules.get(path)
            return rule is not None and rule()

    def _token(self, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        pair = _basic(headers.get("authorization", ""), urlencoded=True)
        client, secret = (
            pair if pair[0] else (form.get("client_id", ""), form.get("client_secret", ""))
        )
        with self.lock:
            if not client or self.clients.get(client) != secret:
                return 401, {"error": "invalid_client", "error_description": "bad client"}
            token = "tok-" + secrets.token_urlsafe(12)
            self.issued[token] = time.time() + self.token_lifetime_s
        return 200, {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": self.token_lifetime_s,
        }


def _basic(auth: str, *, urlencoded: bool = False) -> tuple[str, str]:
    """The user and password of a Basic header; `urlencoded`: each form-encoded first, as
    OAuth2 clients do (RFC 6749 2.3.1)."""
    if not auth.startswith("Basic "):
        return "", ""
    try:
        user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return "", ""
    return (unquote(user), unquote(password)) if urlencoded else (user, password)
