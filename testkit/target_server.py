"""A loopback HTTP target for the stack's workers to call: it records every request it gets and
answers by path (succeed, fail, fail once, answer slowly, never answer, redirect)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    done: float = 0.0
    """When the answer was ready (0: not yet): the run's end, as the target saw it."""
    method: str = "POST"
    query: str = ""
    """The request target's query, as sent (percent-encoded)."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    """Fifty runs connect at the top of each second: the default backlog of 5 drops their
    SYNs, and each dropped one is retried a second later (runs looked 1 s late)."""


@dataclass
class TargetServer:
    """POST /ok -> 200; /fail -> 503; /flaky -> 503 on attempt 1, then 200; /slow?s=N -> 200
    after N s; /hang -> never answers
    (until the server stops); /redirect?to=URL -> 302; /status?code=N -> N. GET, PUT, PATCH and
    DELETE are answered the same way. `keep_alive`: HTTP/1.1, a connection
    serves request after request (else HTTP/1.0, closed after each answer). Any path with
    `?gated=1` answers only while `gate` is open (a test holds a run in flight for as long as
    it needs, instead of racing a timer)."""

    keep_alive: bool = False
    connections: int = 0
    """Connections accepted so far."""
    hits: list[Hit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    gate: threading.Event = field(default_factory=threading.Event)
    """Open unless a test closes it: requests with `?gated=1` wait for it."""

    def __post_init__(self) -> None:
        self.gate.set()

    def start(self) -> TargetServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if outer.keep_alive else "HTTP/1.0"

            def setup(self) -> None:
                super().setup()
                with outer.lock:
                    outer.connections += 1

            def do_POST(self) -> None:
                url = urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                at = time.time()
                hit = Hit(url.path, headers, body, at, method=self.command, query=url.query)
                with outer.lock:
                    outer.hits.append(hit)
                query = parse_qs(url.query)
                if url.path == "/slow":
                    outer.stopping.wait(float(query["s"][0]))
                elif url.path == "/hang":
                    outer.stopping.wait(600)
                if query.get("gated") == ["1"]:
                    while not outer.gate.wait(0.1) and not outer.stopping.is_set():
                        pass
                hit.done = time.time()
                first_try = self.headers.get("kadence-attempt") == "1"
                if url.path == "/fail" or (url.path == "/flaky" and first_try):
                    self._answer(503, b"target is down")
                elif url.path == "/status":
                    code = int(query["code"][0])
                    self._answer(code, b"" if code in (204, 304) else b"as asked")
                elif url.path == "/redirect":
                    self.send_response(302)
                    self.send_header("location", query["to"][0])
                    self.send_header("content-length", "0")
                    self.end_headers()
                else:
                    self._answer(200, b"ok")

            do_GET = do_PUT = do_PATCH = do_DELETE = do_POST  # noqa: N815 - http.server's names

            def _answer(self, status: int, body: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the caller went away (killed, cancelled, timed out)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def seen(self, path: str | None = None) -> list[Hit]:
        with self.lock:
            return [h for h in self.hits if path is None or h.path == path]

    def wait(self, count: int, path: str | None = None, timeout_s: float = 60) -> list[Hit]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(self.seen(path)) >= count:
                return self.seen(path)
            time.sleep(0.05)
        raise TimeoutError(f"{count} requests to {path} expected, got {len(self.seen(path))}")
