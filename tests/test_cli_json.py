"""Issue 31: every `kadence` command takes --json for scripts; the offline ones checked here
(no broker), the others in their live tests."""

from __future__ import annotations

import argparse
import json

import pytest

from apps import cli


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
