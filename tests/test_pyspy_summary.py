"""bench/pyspy.py: py-spy's raw stacks become busy µs per execution and top functions."""

from __future__ import annotations

from bench.pyspy import read_raw, summarize

RAW = """\
run (streams/worker/loop.py:120);turn (streams/worker/loop.py:130);encode (kadence/codec.py:9) 30
run (streams/worker/loop.py:120);turn (streams/worker/loop.py:131) 10
run (streams/worker/loop.py:120);consume (streams/kafkaio/x.py:3) 60
garbage line without count
"""


def test_raw_stacks_are_counted_and_bad_lines_skipped() -> None:
    stacks = read_raw(RAW)
    assert sum(stacks.values()) == 100
    assert len(stacks) == 3


def test_busy_time_per_execution_and_self_and_cumulative_tops() -> None:
    # 100 samples at 100 Hz = 1 s busy, over 1 000 executions = 1 000 µs each
    summary = summarize(read_raw(RAW), rate_hz=100, executions=1_000)
    assert summary["python_gil_us_per_execution"] == 1_000.0
    own = dict(summary["self_us_per_execution"])
    assert own["consume (kafkaio/x.py)"] == 600.0
    assert own["encode (kadence/codec.py)"] == 300.0
    assert own["turn (worker/loop.py)"] == 100.0  # two lines of one function, merged
    below = dict(summary["cumulative_us_per_execution"])
    assert below["run (worker/loop.py)"] == 1_000.0
    assert below["turn (worker/loop.py)"] == 400.0
