"""The CI tier of the chaos suite: four scenarios with fixed seeds against the real broker,
executions in batches as by default, and `worker-kill` again with a record per execution.
`make chaos SEED=n` runs all of them with any seed."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.scenarios import CI_TIER, SHORT, new_run


@pytest.mark.slow
@pytest.mark.parametrize("name", CI_TIER)
def test_chaos_scenario_finds_nothing(name: str, kafka_bootstrap: str, tmp_path: Path) -> None:
    run = new_run(name, 7, kafka_bootstrap, tmp_path).start()
    try:
        report = SHORT[name](run)
    finally:
        run.stop()
    print(report.render())
    assert report.ok, report.render()
    assert report.expected > 100  # the scenario really ran its jobs
    assert report.kafka_records > 20  # Kafka-topic jobs among them, read back exactly once
    assert report.succeeded + report.dead_lettered + report.explained == report.expected
    assert run.batches_written() > 0  # executions went in batches, as by default
    run.cleanup()


@pytest.mark.slow
def test_workers_killed_while_executions_go_a_record_each_lose_and_double_nothing(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """`worker-kill` with KADENCE_EXECUTION_BATCHES=false (a record per execution, as before
    0.15.0): a worker killed -9 mid-delivery leaves nothing lost, early or doubled, its Kafka
    runs still exactly once, and no batch was written."""
    run = new_run("worker-kill", 7, kafka_bootstrap, tmp_path, batches=False).start()
    try:
        report = SHORT["worker-kill"](run)
    finally:
        run.stop()
    print(report.render())
    assert report.ok, report.render()
    assert report.kafka_records > 20
    assert report.succeeded + report.dead_lettered + report.explained == report.expected
    assert run.batches_written() == 0
    run.cleanup()
