"""bench.worker_path runs to its end on the in-memory driver: every execution's tenant record
and outcome written (the round checks both), in each of its shapes."""

from __future__ import annotations

import argparse

import pytest

from bench.worker_path import _Round


@pytest.mark.parametrize(
    ("seconds", "per_turn", "batch", "jobs"),
    [(0, 0, 1, 0), (2, 25, 1, 0), (0, 0, 7, 0), (2, 5, 40, 0), (0, 0, 40, 20)],
)
def test_a_round_writes_every_record_and_times_the_turns(
    seconds: int, per_turn: int, batch: int, jobs: int
) -> None:
    args = argparse.Namespace(
        executions=200,
        tenants=3,
        payload=16,
        seconds=seconds,
        per_turn=per_turn,
        batch=batch,
        jobs=jobs,
    )
    bench = _Round(args, None)
    assert bench.run() > 0
    assert bench.done(200)
    if jobs:  # runs of 20 jobs over 10 s, one wake: all but two of each job's from its parts
        assert bench.worker._entries.used == 200 - 2 * jobs
