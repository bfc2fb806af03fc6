"""`kadence receive` (issue 31, item 3: the quick start's webhook receiver), no broker: it binds
the port it is given (0: it says which), answers 200 to a run signed with its secret and 401 to
a changed or unsigned one, prints one JSON line per run with its id, attempt and lateness, and
exits after --count runs."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from connectors.http import sign

SECRET = "local-demo-secret"


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
        first = proc.stdout.readline()
        found = re.search(r"receive listening on 127\.0\.0\.1:(\d+)", first)
        assert found, first
        port = int(found.group(1))
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
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", proc.stdout.readline())
        assert found
        body = b"{}"
        bad = run_headers(body, "demo/x@2026-12-01T09:00:00.000Z", 0)
        bad["webhook-signature"] = sign(
            "another-secret", "demo/x@2026-12-01T09:00:00.000Z", 1, body
        )
        assert post(int(found.group(1)), body, bad) == 401
        good = run_headers(body, "demo/x@2026-12-01T09:00:00.000Z", 0)
        assert post(int(found.group(1)), body, good) == 200
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
