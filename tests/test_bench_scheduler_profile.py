"""bench.scheduler_profile's steady state (`--shape cron`): it refuses a run too short to count
anything, and splits what it counts into firing and outcomes."""

from __future__ import annotations

import sys

import pytest

from bench import scheduler_profile


def test_a_cron_run_within_the_warm_up_is_refused_saying_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["scheduler_profile", "--shape", "cron", "--seconds", str(scheduler_profile.WARM_UP_S)]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit):
        scheduler_profile.main()
    assert "--seconds must be more" in capsys.readouterr().err


def test_the_counted_cpu_is_split_into_firing_and_outcomes() -> None:
    seconds = scheduler_profile.WARM_UP_S + 16  # one look-ahead refill counted
    total_us, counted, fire_us = scheduler_profile.run_cron(20, seconds, None, 20_000)
    assert counted == 20 * 16
    assert 0 < fire_us < total_us
