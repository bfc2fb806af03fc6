"""`kadence receive`: a webhook receiver for trying Kadence out, and the shape of a real one.

    kadence receive --secret-file .run/dev-webhook-secret       # make run's tenant demo
    KADENCE_RECEIVE_SECRET=... kadence receive --port 8099

It listens for the runs of HTTP-target jobs (a job's target `http://127.0.0.1:8099/...`; a
local address must be allowed, as `make run` does for tenant demo, else
KADENCE_TARGET_ALLOW_CIDRS='["127.0.0.1/32"]'), checks each request's signature with the
secret the job's `secret_ref` names (read from --secret-file or KADENCE_RECEIVE_SECRET: the
same value as in KADENCE_WEBHOOK_SECRETS; never on the command line, where `ps` shows it),
answers 401 to one that does not verify and 200 to the rest, and prints one line per run: when
it came, the run's id and attempt, how late it started, whether it was signed, and the body.
`--json` prints each as a JSON object; `--count N` exits after N runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from apps.processes import announce, stop_event
from connectors.webhook_verify import verify

MAX_BODY = 1 << 20
SECRET_ENV = "KADENCE_RECEIVE_SECRET"  # noqa: S105 - the variable's name, not a secret


def add_command(sub: Any) -> None:
    p = sub.add_parser("receive", help="a local webhook receiver that checks signatures")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8099, help="0: one the system picks (printed)")
    p.add_argument("--count", type=int, default=0, help="exit after this many runs (0: never)")
    p.add_argument("--json", action="store_true", help="one JSON object per run")
    p.add_argument(
        "--secret-file",
        type=Path,
        help=f"read the signing secret from this file (else ${SECRET_ENV})",
    )


class Receiver:
    def __init__(self, secret: str | None, as_json: bool, count: int) -> None:
        self.secret = secret
        self.as_json = as_json
        self.left = count
        self.done = threading.Event()
        self.lock = threading.Lock()

    def seen(self, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        """The answer's status, and what is printed."""
        lower = {k.lower(): v for k, v in headers.items()}
        now = datetime.now(UTC)
        signed = "webhook-signature" in lower
        valid = verify(self.secret, lower, body) if self.secret else None
        due = lower.get("kadence-due-at")
        late = None
        if due:
            try:
                late = round(
                    (now - datetime.fromisoformat(due.replace("Z", "+00:00"))).total_seconds(), 3
                )
            except ValueError:
                late = None
        run = {
            "received_at": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "execution_id": lower.get("webhook-id", ""),
            "attempt": lower.get("kadence-attempt", ""),
            "late_s": late,
            "signature": "valid"
            if valid
            else ("invalid" if valid is False else ("present" if signed else "none")),
            "body": body.decode(errors="replace")[:500],
        }
        return (401 if valid is False else 200), run

    def show(self, run: dict[str, Any]) -> None:
        with self.lock:
            if self.as_json:
                print(json.dumps(run), flush=True)
            else:
                late = "-" if run["late_s"] is None else f"{run['late_s']:.3f}s"
                print(
                    f"{run['received_at']}  {run['execution_id']}  attempt {run['attempt']}  "
                    f"late {late}  signature {run['signature']}  {run['body']}",
                    flush=True,
                )
            if run["signature"] != "invalid" and self.left > 0:
                self.left -= 1
                if self.left == 0:
                    self.done.set()


def receive(args: argparse.Namespace) -> int:
    secret = os.environ.get(SECRET_ENV) or None
    if args.secret_file is not None:
        try:
            secret = args.secret_file.read_text().strip() or None
        except (OSError, UnicodeDecodeError) as exc:
            print(f"kadence receive: cannot read the secret file: {exc}", file=sys.stderr)
            return 2
        if secret is None:
            print(f"kadence receive: {args.secret_file} is empty", file=sys.stderr)
            return 2
    receiver = Receiver(secret, args.json, args.count)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self._take()

        def do_PUT(self) -> None:
            self._take()

        def _take(self) -> None:
            length = self.headers.get("content-length") or "0"
            if not length.isdigit():
                self.send_error(400, "content-length is not a number")
                return
            size = int(length)
            if size > MAX_BODY:
                self.send_error(413)
                return
            body = self.rfile.read(size)
            status, run = receiver.seen(dict(self.headers.items()), body)
            receiver.show(run)
            reply = b'{"ok": true}' if status == 200 else b'{"ok": false, "why": "bad signature"}'
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *_: Any) -> None:
            return None  # one line per run is printed instead

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    announce("receive", args.host, server.server_address[1])
    if not secret:
        print(f"kadence receive: no {SECRET_ENV}: signatures are not checked", file=sys.stderr)
    stop = stop_event()
    threading.Thread(target=server.serve_forever, name="receive", daemon=True).start()
    while not stop.is_set() and not receiver.done.wait(0.2):
        pass
    server.shutdown()
    server.server_close()
    return 0
