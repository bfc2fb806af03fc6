"""Execution ids are stable; previews explain DST in words a user can check."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

from kadence.clock import datetime_to_ms
from kadence.models import CronSchedule, DstGapPolicy
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.identity import execution_id, manual_execution_id
from kadence.timeengine.preview import preview


def test_execution_id_depends_only_on_job_and_nominal_instant() -> None:
    t = datetime_to_ms(datetime(2026, 3, 29, 0, 30, tzinfo=UTC))
    assert execution_id("acme/nightly", t) == "acme/nightly@2026-03-29T00:30:00.000Z"
    assert manual_execution_id("acme/nightly", "req-7") == "acme/nightly@manual:req-7"
    # spread moves the due time, never the identity
    plain = compile_schedule(CronSchedule(expression="0 9 * * *"), "acme/j")
    spread = compile_schedule(CronSchedule(expression="0 9 * * *", spread_s=600), "acme/j")
    a, b = plain.next_after(t), spread.next_after(t)
    assert a is not None and b is not None
    assert a.nominal_ms == b.nominal_ms and b.due_ms > a.due_ms


def test_preview_names_the_dst_decisions() -> None:
    compiled = compile_schedule(
        CronSchedule(expression="30 2 * * *", timezone="America/New_York"), "acme/j"
    )
    rows = preview(compiled, datetime_to_ms(datetime(2026, 3, 7, 12, tzinfo=UTC)), 2)
    assert [(r.local, r.zone_abbrev, r.fires) for r in rows] == [
        ("2026-03-08T03:00:00-04:00", "EDT", True),
        ("2026-03-09T02:30:00-04:00", "EDT", True),
    ]
    assert rows[0].note.startswith("02:30 does not exist (clocks spring forward)")
    assert rows[0].execution_id == "acme/j@2026-03-08T07:00:00.000Z"
    assert rows[1].note == ""


def test_preview_lists_skipped_occurrences_without_counting_them() -> None:
    compiled = compile_schedule(
        CronSchedule(
            expression="30 2 * * *", timezone="America/New_York", dst_gap=DstGapPolicy.skip
        ),
        "acme/j",
    )
    rows = preview(compiled, datetime_to_ms(datetime(2026, 3, 7, 12, tzinfo=UTC)), 1)
    assert [r.fires for r in rows] == [False, True]
    assert rows[0].note == "02:30 does not exist (clocks spring forward); skipped (dst_gap=skip)"
    assert rows[0].execution_id == ""


def test_preview_command(tmp_path: object) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "apps.cli",
            "preview",
            "30 1 * * *",
            "--tz",
            "Europe/London",
            "--after",
            "2026-10-24T12:00:00Z",
            "-n",
            "2",
            "--fold",
            "both",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = out.strip().splitlines()
    assert "2026-10-25T01:30:00+01:00  BST" in lines[1]
    assert "this is the first (dst_fold=both)" in lines[1]
    assert "2026-10-25T01:30:00+00:00  GMT" in lines[2]
    assert "this is the second (dst_fold=both)" in lines[2]


def test_preview_command_rejects_bad_input() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "apps.cli", "preview", "0 0 30 2 *", "--tz", "Mars/Base"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 3
    assert "schedule.timezone: unknown IANA time zone 'Mars/Base'" in proc.stderr
    assert "schedule.expression: '0 0 30 2 *' never matches" in proc.stderr
