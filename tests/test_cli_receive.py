"""`kadence receive` (issue 31, item 3: the quick start's webhook receiver), no broker: it binds
the port it is given (0: it says which), answers 200 to a run signed with its secret and 401 to
a changed or unsigned one, prints one JSON line per run with its id, attempt and lateness, and
exits after --count runs. Issue 41, item 7: a hostile request gets a clean refusal (a
Content-Length of anything but ASCII digits: 400), is cut off when it comes by halves, and
nothing it carries reaches the terminal raw."""

from __future__ import annotations

import json
import os
import re
import selectors
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from connectors.http import sign

SECRET = "local-demo-secret"


def port_of(first: str) -> int:
    """The port from receive's first line: `{"listening": ...}` with --json, else the
    `receive listening on host:port` every child prints."""
    if first.startswith("{"):
        host, _, port = json.loads(first)["listening"].rpartition(":")
        assert host == "127.0.0.1", first
        return int(port)
    found = re.search(r"receive listening on 127\.0\.0\.1:(\d+)", first)
    assert found, first
    return int(found.group(1))


def post(port: int, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/run", data=body, headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def raw_request(port: int, request: bytes) -> int:
    """The status a hand-written request gets (what urllib would not send)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        return int(conn.recv(1024).split(b" ", 2)[1])


def run_headers(body: bytes, run: str, due_ago_s: float) -> dict[str, str]:
    now = int(time.time())
    due = (datetime.now(UTC) - timedelta(seconds=due_ago_s)).isoformat().replace("+00:00", "Z")
    return {
        "webhook-id": run,
        "webhook-timestamp": str(now),
        "webhook-signature": sign(SECRET, run, now, body),
        "kadence-attempt": "1",
        "kadence-due-at": due,
        "content-type": "application/json",
    }


def test_receive_checks_signatures_prints_runs_and_stops_after_count() -> None:
    env = {**os.environ, "KADENCE_RECEIVE_SECRET": SECRET}
    cmd = [sys.executable, "-m", "apps.cli", "receive", "--port", "0", "--count", "2", "--json"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = port_of(proc.stdout.readline())
        body = b'{"report": "daily"}'
        good = run_headers(body, "demo/report@2026-12-01T09:00:00.000Z", due_ago_s=0.25)
        assert post(port, body, good) == 200
        assert post(port, body + b" ", good) == 401  # the body changed on the way
        assert post(port, body, {"content-type": "application/json"}) == 401  # not signed
        too_big = b"POST / HTTP/1.1\r\ncontent-length: 2000000\r\n\r\n"
        assert raw_request(port, too_big) == 413  # refused before a byte of it is read
        assert raw_request(port, b"POST / HTTP/1.1\r\ncontent-length: lots\r\n\r\n") == 400
        again = run_headers(body, "demo/report@2026-12-01T09:01:00.000Z", due_ago_s=0)
        assert post(port, body, again) == 200
        assert proc.wait(timeout=10) == 0  # --count 2: two runs taken, then it stops
        lines = [json.loads(line) for line in proc.stdout.read().splitlines()]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [(r["execution_id"], r["signature"]) for r in lines] == [
        ("demo/report@2026-12-01T09:00:00.000Z", "valid"),
        ("demo/report@2026-12-01T09:00:00.000Z", "invalid"),
        ("", "invalid"),
        ("demo/report@2026-12-01T09:01:00.000Z", "valid"),
    ]
    assert 0.2 <= lines[0]["late_s"] < 5
    assert lines[0]["body"] == '{"report": "daily"}'


def test_receive_reads_the_secret_from_a_file_and_refuses_an_empty_one(tmp_path: Path) -> None:
    secret_file = tmp_path / "dev-webhook-secret"
    secret_file.write_text(SECRET + "\n")
    env = {k: v for k, v in os.environ.items() if k != "KADENCE_RECEIVE_SECRET"}
    cmd = [sys.executable, "-m", "apps.cli", "receive", "--port", "0", "--count", "1", "--json"]
    proc = subprocess.Popen(
        [*cmd, "--secret-file", str(secret_file)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = port_of(proc.stdout.readline())
        body = b"{}"
        bad = run_headers(body, "demo/x@2026-12-01T09:00:00.000Z", 0)
        bad["webhook-signature"] = sign(
            "another-secret", "demo/x@2026-12-01T09:00:00.000Z", 1, body
        )
        assert post(port, body, bad) == 401
        good = run_headers(body, "demo/x@2026-12-01T09:00:00.000Z", 0)
        assert post(port, body, good) == 200
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    secret_file.write_text("\n")
    empty = subprocess.run(
        [*cmd, "--secret-file", str(secret_file)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert empty.returncode == 2 and "is empty" in empty.stderr
    missing = subprocess.run(
        [*cmd, "--secret-file", str(tmp_path / "nope")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 2 and "cannot read the secret file" in missing.stderr


@contextmanager
def receiving(*more: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """`kadence receive` on a port the system picks, with the demo secret; killed at the end
    if it is still running."""
    env = {**os.environ, "KADENCE_RECEIVE_SECRET": SECRET}
    cmd = [sys.executable, "-m", "apps.cli", "receive", "--port", "0", *more]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc, port_of(proc.stdout.readline())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def stopped_output(proc: subprocess.Popen[str]) -> str:
    """What the receiver printed, once SIGTERM has stopped it."""
    proc.terminate()
    assert proc.wait(timeout=10) == 0
    assert proc.stdout is not None
    return proc.stdout.read()


def answer(port: int, request: bytes) -> bytes:
    """Everything the receiver sends back to a hand-written request before it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        got = b""
        while data := conn.recv(65536):
            got += data
        return got


def closed_after(conn: socket.socket, started: float, drip: bytes = b"") -> float:
    """Seconds from `started` until the receiver closes `conn` (raises TimeoutError past the
    socket's timeout); with `drip`, one byte of it is sent every 0.2 s meanwhile."""
    conn.setblocking(False)
    deadline = started + 5
    # a selector, not select.select: in a long test session a socket's number passes 1 023
    with selectors.DefaultSelector() as watch:
        watch.register(conn, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if watch.select(0.2):
                try:
                    if not conn.recv(65536):
                        return time.monotonic() - started
                except ConnectionResetError:
                    return time.monotonic() - started
            elif drip:
                conn.send(drip[:1])
                drip = drip[1:] or drip
    raise TimeoutError("the receiver kept the connection open")


def test_a_content_length_of_anything_but_ascii_digits_is_refused() -> None:
    """`'\\xb2'.isdigit()` (²) is True and int() refuses it: the handler died without an
    answer. Latin-1 is how http.server reads header bytes."""
    with receiving() as (_proc, port):
        for length in (b"\xb2", b"\xb3\xb9", b"1\xb2", b"+2", b"0x2", b"2 2", b"9" * 30):
            reply = answer(port, b"POST /run HTTP/1.1\r\ncontent-length: " + length + b"\r\n\r\n")
            assert reply.startswith(b"HTTP/1.0 400 "), (length, reply)
        twice = b"POST /run HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\n{}"
        assert answer(port, twice).startswith(b"HTTP/1.0 400 ")
        chunked = b"POST /run HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
        assert answer(port, chunked).startswith(b"HTTP/1.0 411 ")
        body = b"{}"
        assert post(port, body, run_headers(body, "demo/x@2026-12-01T09:00:00.000Z", 0)) == 200


def test_a_half_sent_request_is_cut_off_and_is_no_run() -> None:
    """A request line and half a head, a connection and nothing, a head and half a body, a
    head trickled a byte at a time: each is closed after --read-timeout while a whole run is
    still answered, and none of them is printed as a run."""
    body = b'{"ok": 1}'
    with receiving("--read-timeout", "1", "--json") as (proc, port):
        started = time.monotonic()
        conns = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(4)]
        try:
            half_head, nothing, half_body, trickle = conns
            half_head.sendall(b"POST /run HTTP/1.1\r\ncontent-length: 2\r\n")
            half_body.sendall(b"POST /run HTTP/1.1\r\ncontent-length: 20\r\n\r\n{}")
            trickle.sendall(b"POST /run HTTP/1.1\r\n")
            good = run_headers(body, "demo/x@2026-12-01T09:00:00.000Z", 0)
            assert post(port, body, good) == 200
            assert closed_after(trickle, started, drip=b"x-slow: " + b"a" * 100) < 3
            for conn in (half_head, nothing, half_body):
                assert 0.5 < closed_after(conn, started) < 3
        finally:
            for conn in conns:
                conn.close()
        runs = [json.loads(line) for line in stopped_output(proc).splitlines()]
    assert [r["execution_id"] for r in runs] == ["demo/x@2026-12-01T09:00:00.000Z"]


def test_nothing_a_request_carries_reaches_the_terminal_raw() -> None:
    """Escape sequences (ESC, the C1 CSI), bidi overrides and line breaks in a body or a header
    are printed escaped, in a signed body as in an unsigned one."""
    hostile = "\x1b]0;owned\x07\x1b[2J\u009b31m\u202edone\r\nforged line \\x1b"
    body = json.dumps({"note": "x"}).encode()[:-1] + hostile.encode() + b"}"
    with receiving() as (proc, port):
        signed = run_headers(body, "demo/x@2026-12-01T09:00:00.000Z", 0)
        assert post(port, body, signed) == 200
        unsigned = {"webhook-id": "demo/\x1b[31mred", "kadence-attempt": "\x1b[1m1"}
        assert post(port, body, unsigned) == 401
        out = stopped_output(proc)
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert "signature valid" in lines[0] and "signature invalid" in lines[1]
    for line in lines:
        assert line.isprintable(), repr(line)  # no control, format or separator character
        assert "\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202edone\\r\\nforged line \\\\x1b" in line
    assert "demo/\\x1b[31mred  attempt \\x1b[1m1" in lines[1]


def test_a_due_time_without_a_zone_is_no_lateness_and_no_crash() -> None:
    body = b"{}"
    headers = run_headers(body, "demo/x@2026-12-01T09:00:00.000Z", 0)
    headers["kadence-due-at"] = "2026-12-01T09:00:00"
    with receiving("--json") as (proc, port):
        assert post(port, body, headers) == 200
        runs = [json.loads(line) for line in stopped_output(proc).splitlines()]
    assert [(r["signature"], r["late_s"]) for r in runs] == [("valid", None)]


def test_a_read_timeout_that_is_no_positive_number_is_refused() -> None:
    for value in ("0", "-1", "nan", "soon"):
        cmd = [sys.executable, "-m", "apps.cli", "receive", "--port", "0", "--read-timeout", value]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30)
        assert done.returncode == 2 and "seconds above 0" in done.stderr, done.stderr
