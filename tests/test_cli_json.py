"""Issue 31: every `kadence` command takes --json for scripts. Issue 43, item 8: and what each
prints is checked, not only the flag: the offline commands here (no broker), the others run
against a stack in tests/api/test_cli_json_live.py; a command with --json that neither checks
fails here."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from pydantic import TypeAdapter

from apps import cli
from connectors.http import sign
from kadence.acl_types import Acl
from tests.api.test_cli_json_live import LIVE

OFFLINE = ("preview", "token", "acls", "receive")
"""The commands whose --json output this file checks (no broker needed)."""


def test_every_command_takes_json() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        name
        for name, command in sub.choices.items()
        if not any("--json" in a.option_strings for a in command._actions)
    ]
    assert missing == []
    assert len(sub.choices) >= 23  # the API's commands, the operators', the offline ones
    assert not set(OFFLINE) & set(LIVE)
    assert sorted([*OFFLINE, *LIVE]) == sorted(sub.choices)  # each one's output checked


def test_preview_and_token_print_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["preview", "30 2 * * *", "--tz", "Europe/Berlin", "--after", "2026-03-28T00:00:00Z"]
    assert cli.main([*argv, "-n", "2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["fires"] for r in rows] == [True, True]
    assert rows[1]["note"]  # 29 March: 02:30 does not exist in Berlin, the gap policy says so
    assert cli.main(["token", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert set(made) == {"token", "hash"} and made["token"] != made["hash"]


def test_preview_shows_quartz_month_days(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["preview", "0 9 L-3 * *", "--tz", "Asia/Tokyo", "--after", "2027-01-01T00:00:00Z"]
    assert cli.main([*argv, "-n", "3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["local"][:10] for r in rows] == ["2027-01-28", "2027-02-25", "2027-03-28"]


def test_preview_takes_a_whole_schedule_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    every = {
        "kind": "interval",
        "every_s": 5400,
        "offset_s": 900,
        "timezone": "Europe/London",
        "exclude": [{"kind": "cron", "expression": "* 0-5 * * *"}],
    }
    argv = ["preview", json.dumps(every), "--after", "2026-12-05T00:00:00Z", "-n", "3", "--json"]
    assert cli.main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["nominal_utc"][11:16] for r in rows] == ["06:15", "07:45", "09:15"]
    assert cli.main(["preview", '{"kind": "interval"}']) == 3
    assert "every_s" in capsys.readouterr().err
    assert cli.main(["preview", "{not json"]) == 3
    assert "not JSON" in capsys.readouterr().err


def test_acls_print_bindings_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["acls", "--tenant", "acme", "--principal", "worker=User:w1", "--json"]) == 0
    bindings = TypeAdapter(list[Acl]).validate_python(json.loads(capsys.readouterr().out))
    assert {"User:acme", "User:w1"} <= {b.principal for b in bindings}
    assert not any(b.principal == "User:kadence-worker" for b in bindings)  # w1 instead
    tenant = [b for b in bindings if b.principal == "User:acme"]
    assert tenant and all("acme" in b.name for b in tenant)  # its own topics and groups only


def test_receive_prints_only_json_lines() -> None:
    """`--json` output a script can pipe to a JSON parser: where it listens, then each run."""
    secret = "cli-json-secret"
    env = {**os.environ, "KADENCE_RECEIVE_SECRET": secret}
    cmd = [sys.executable, "-m", "apps.cli", "receive", "--port", "0", "--count", "1", "--json"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        host, _, port = first["listening"].rpartition(":")
        assert host == "127.0.0.1"
        run, now, body = "acme/j@2026-12-01T09:00:00.000Z", int(time.time()), b'{"n": 1}'
        headers = {
            "webhook-id": run,
            "webhook-timestamp": str(now),
            "webhook-signature": sign(secret, run, now, body),
            "kadence-attempt": "1",
        }
        request = urllib.request.Request(f"http://127.0.0.1:{port}/run", body, headers)
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200
        assert proc.wait(timeout=10) == 0
        lines = [json.loads(line) for line in proc.stdout.read().splitlines()]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    [shown] = lines
    assert set(shown) == {"received_at", "execution_id", "attempt", "late_s", "signature", "body"}
    assert (shown["execution_id"], shown["attempt"], shown["signature"]) == (run, "1", "valid")
    assert json.loads(shown["body"]) == {"n": 1}
