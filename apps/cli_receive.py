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
`--json` prints each as a JSON object (and where it listens as `{"listening": "host:port"}`);
`--count N` exits after N runs.

Whoever can reach the port can send it anything, so nothing a request carries reaches the
terminal raw: control and format characters (escape sequences, bidi overrides) are printed
escaped, in a signed body as in any other; a request must arrive whole within --read-timeout
seconds (a client that sends half of one is cut off, not waited for); a Content-Length is ASCII
digits or the request is refused (400).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import sys
import threading
import unicodedata
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from apps.processes import announce, stop_event
from connectors.webhook_verify import verify

MAX_BODY = 1 << 20
READ_TIMEOUT_S = 10.0
_LENGTH = re.compile(r"[0-9]{1,20}")
"""ASCII digits only: `str.isdigit` takes `²` (which `int` refuses) and `٣` (which it reads
as 3)."""
_UNPRINTABLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})
"""Unicode categories a terminal may act on or hide rather than show: C0 and C1 controls
(ESC, CSI), format characters (bidi overrides, zero-width), line separators."""
SECRET_ENV = "KADENCE_RECEIVE_SECRET"  # noqa: S105 - the variable's name, not a secret


def add_command(sub: Any) -> None:
    p = sub.add_parser("receive", help="a local webhook receiver that checks signatures")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8099, help="0: one the system picks (printed)")
    p.add_argument("--count", type=int, default=0, help="exit after this many runs (0: never)")
    p.add_argument("--json", action="store_true", help="one JSON object per run")
    p.add_argument(
        "--read-timeout",
        type=_seconds,
        default=READ_TIMEOUT_S,
        help="seconds a request may take to arrive whole (default %(default)s)",
    )
    p.add_argument(
        "--secret-file",
        type=Path,
        help=f"read the signing secret from this file (else ${SECRET_ENV})",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 3_600:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds above 0, at most 3600")
    return value


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
        late = _late(lower.get("kadence-due-at"), now)
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
            if self.as_json:  # json.dumps escapes every character outside printable ASCII
                print(json.dumps(run), flush=True)
            else:
                late = "-" if run["late_s"] is None else f"{run['late_s']:.3f}s"
                run_id, attempt = printable(run["execution_id"]), printable(run["attempt"])
                print(
                    f"{run['received_at']}  {run_id}  attempt {attempt}  "
                    f"late {late}  signature {run['signature']}  {printable(run['body'])}",
                    flush=True,
                )
            if run["signature"] != "invalid" and self.left > 0:
                self.left -= 1
                if self.left == 0:
                    self.done.set()


def printable(text: str) -> str:
    """`text` with every character a terminal would act on rather than show written as a
    Python escape (`\\x1b`, `\\u202e`), and `\\` as `\\\\` so an escape cannot be faked."""
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text
    return "".join(
        c.encode("unicode_escape").decode("ascii")
        if c == "\\" or unicodedata.category(c) in _UNPRINTABLE
        else c
        for c in text
    )


def _late(due: str | None, now: datetime) -> float | None:
    """How late the run started by its kadence-due-at header; None when it has none that is
    a time with a zone."""
    if not due:
        return None
    try:
        due_at = datetime.fromisoformat(due.replace("Z", "+00:00"))
    except ValueError:
        return None
    if due_at.tzinfo is None:
        return None
    return round((now - due_at).total_seconds(), 3)


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
        timeout = args.read_timeout  # each read (socketserver's StreamRequestHandler)

        def setup(self) -> None:
            super().setup()
            self.expired = threading.Event()
            self.deadline = threading.Timer(args.read_timeout, self._expire)
            self.deadline.start()  # the whole request: a trickle defeats a per-read timeout

        def _expire(self) -> None:
            self.expired.set()
            with contextlib.suppress(OSError):  # already gone
                self.connection.shutdown(socket.SHUT_RD)  # reads end; an answer may still go

        def finish(self) -> None:
            self.deadline.cancel()
            super().finish()

        def do_POST(self) -> None:
            self._take()

        def do_PUT(self) -> None:
            self._take()

        def _take(self) -> None:
            lengths = self.headers.get_all("content-length") or ["0"]
            if len(lengths) > 1 or not _LENGTH.fullmatch(lengths[0].strip()):
                self.send_error(400, "content-length is not one number")
                return
            if self.headers.get("transfer-encoding") is not None:
                self.send_error(411, "send a content-length (transfer-encoding is not read)")
                return
            size = int(lengths[0])
            if size > MAX_BODY:
                self.send_error(413)
                return
            body = self.rfile.read(size)
            if len(body) != size or self.expired.is_set():
                self.close_connection = True
                return  # cut off: half a request is no run
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
    if args.json:  # every line a JSON object, this one too: where it listens
        print(json.dumps({"listening": f"{args.host}:{server.server_address[1]}"}), flush=True)
    else:
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
