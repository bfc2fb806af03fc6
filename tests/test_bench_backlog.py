"""bench/backlog.py's summary of the workers' backlog signal (no broker): the peak, when it
came, and when the signal first read 0 after it."""

from __future__ import annotations

from bench.backlog import BacklogSampler


def test_the_peak_and_the_first_zero_after_it() -> None:
    sampler = BacklogSampler([])
    due = 1_000.0
    sampler.samples = [(999.0, 0), (1000.5, 90_000), (1001.0, 100_000), (1003.0, 40), (1003.5, 0)]
    assert sampler.summary(due) == {
        "backlog_max_records": 100_000,
        "backlog_max_at_s_after_due": 1.0,
        "backlog_zero_at_s_after_due": 3.5,  # not the 0 before the flood
        "backlog_samples": 5,
    }


def test_a_signal_that_never_drains_says_so() -> None:
    sampler = BacklogSampler([])
    sampler.samples = [(10.0, 5), (11.0, 7)]
    assert sampler.summary(10.0)["backlog_zero_at_s_after_due"] is None
    assert BacklogSampler([]).summary(0.0) == {}
