"""bench.scheduler_profile's steady state (`--shape cron`): it refuses a run too short to count
anything, and splits what it counts into firing and outcomes."""

from __future__ import annotations

import sys

import pytest

from bench import scheduler_profile
from kadence.models import MAX_OUTCOMES_PER_RECORD
from streams.runtime.store import MemoryStore


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


def test_outcomes_in_batches_settle_every_run_as_one_record_each_does() -> None:
    """A batch goes through the processor's split, as the runtime's do: every run it carries
    leaves its job's `running`, and nothing is rejected (a keyless batch taken for one outcome
    would be)."""
    for batch in (1, 7):
        bench = scheduler_profile.Bench(20, MemoryStore())
        bench.define()
        runs, outcomes = bench.outcomes(bench.fire(), batch)
        assert len(outcomes) == (20 if batch == 1 else 3)
        rejected: list[tuple[object, ...]] = []
        bench.task._emit = lambda *record, seen=rejected: seen.append(record)
        bench.settle(runs, outcomes, batched=batch > 1)
        assert [r for r in rejected if r[0] == bench.topics.rejected] == []
        for ex in runs:
            state = bench.proc.store.load(bench.task, f"{ex.tenant}/{ex.job_id}".encode())
            assert state is not None and state.running == ()


def test_a_batch_larger_than_a_record_holds_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    too_many = MAX_OUTCOMES_PER_RECORD + 1
    argv = ["scheduler_profile", "--shape", "cron", "--batch", str(too_many)]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit):
        scheduler_profile.main()
    assert "--batch: 1 to" in capsys.readouterr().err


def test_a_kafka_targets_runs_go_out_in_batches_and_are_all_settled() -> None:
    """`--target kafka`: each second's runs of a tenant leave as one ExecutionBatch (the
    runner's coalescer), and every run in them is counted and settled."""
    kafka = scheduler_profile.TARGETS["kafka"]
    bench = scheduler_profile.Bench(100, MemoryStore(), ahead_ms=5_000, target=kafka)
    bench.define_cron()  # two jobs of each of 50 tenants
    sent = bench.fire_until(scheduler_profile.T0 + 1_000)
    runs, outcomes = bench.outcomes(sent, 7)
    assert len(runs) > 100 and len(runs) == 2 * len(sent)  # a batch of two a tenant a second
    bench.settle(runs, outcomes, scheduler_profile.T0 + 1_100, batched=True)
    for ex in runs:
        state = bench.proc.store.load(bench.task, f"{ex.tenant}/{ex.job_id}".encode())
        assert state is not None and state.running == ()
