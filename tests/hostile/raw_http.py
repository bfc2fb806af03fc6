"""A webhook receiver on loopback that keeps each request's header lines as they came over the
wire: duplicates and odd cases included, which dict-based servers fold away."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field


@dataclass
class RawRequest:
    request_line: str
    headers: list[tuple[str, str]]
    body: bytes

    def values(self, name: str) -> list[str]:
        """Every value sent under `name`, compared as HTTP does (case-insensitive)."""
        return [v for k, v in self.headers if k.strip().lower() == name.lower()]


@dataclass
class RawReceiver:
    requests: list[RawRequest] = field(default_factory=list)

    def start(self) -> RawReceiver:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def stop(self) -> None:
        self.sock.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                self._one(conn)

    def _one(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        first, *lines = head.decode("latin-1").split("\r\n")
        headers = [(k, v.strip()) for k, _, v in (line.partition(":") for line in lines)]
        request = RawRequest(first, headers, body)
        length = [v for k, v in headers if k.strip().lower() == "content-length"]
        while length and len(request.body) < int(length[-1]):
            chunk = conn.recv(65536)
            if not chunk:
                break
            request.body += chunk
        self.requests.append(request)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
