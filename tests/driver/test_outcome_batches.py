"""Outcomes in batches (streams/worker/outcome_batches.py, `Splitting` in streams/runtime):
a worker transaction writes one record per outcomes partition, an aborted one writes its
outcomes once in the next, and the scheduler takes each outcome of a batch as a unit of its own
(a bad one is refused alone, with its own bytes as the evidence)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kadence.codec import Codec
from kadence.models import ExecutionOutcome, ExecutionOutcomes, Rejected, entries_of
from kadence.settings import KadenceSettings
from kadence.topics import OUTCOMES, Topics
from streams.scheduler import later
from streams.scheduler import outcomes as scheduler_outcomes
from testkit.driver import Driver, abort_error
from testkit.outcomes import outcome_of
from tests.driver.stack_helpers import per_second
from tests.driver.test_worker_delivery import TENANT_TOPIC, Topic, execution, send
from tests.driver.test_write_behind import JOBS, Run

CODEC = Codec()


@pytest.fixture(params=["batches", "records"])
def settings(request: pytest.FixtureRequest) -> KadenceSettings:
    return KadenceSettings(
        namespace="drv", partitions=2, execution_partitions=2, outcome_format=request.param
    )


@pytest.fixture
def topics(driver: Driver, settings: KadenceSettings) -> Topics:
    found = driver.provision(settings)
    driver.create_topic(TENANT_TOPIC)
    return found


def written(driver: Driver, topics: Topics) -> tuple[int, list[ExecutionOutcome]]:
    """Records on the outcomes topic, and the outcomes they carry."""
    messages = driver.messages(topics.outcomes)
    found = [e for m in messages for e in entries_of(OUTCOMES.decode(CODEC, m.value()))]
    return len(messages), [o for o in found if isinstance(o, ExecutionOutcome)]


def test_a_transaction_writes_one_outcomes_record_per_partition(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    worker = driver.worker(settings, {"kafka": Topic()})
    sent = [execution(f"j{i}") for i in range(40)]
    for i, ex in enumerate(sent):
        send(driver, topics, ex, partition=i % 2)
    driver.turn(worker)
    records, found = written(driver, topics)
    assert sorted(o.execution_id for o in found) == sorted(ex.execution_id for ex in sent)
    assert len(driver.messages(TENANT_TOPIC)) == 40
    if settings.outcome_format == "batches":
        assert records == settings.partitions  # 40 jobs: both partitions have some
        for m in driver.messages(topics.outcomes):
            assert m.key() is None
            assert isinstance(CODEC.decode(m.value()), ExecutionOutcomes)
    else:
        assert records == 40


def test_an_aborted_transaction_writes_its_outcomes_once_in_the_next(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    worker = driver.worker(settings, {"kafka": Topic()})
    sent = [execution(f"j{i}") for i in range(6)]
    for ex in sent:
        send(driver, topics, ex)
    driver.cluster.faults.fail("commit_transaction", abort_error())
    driver.turn(worker)
    assert written(driver, topics) == (0, [])
    driver.turn(worker)
    _, found = written(driver, topics)
    assert sorted(o.execution_id for o in found) == sorted(ex.execution_id for ex in sent)


def test_a_bad_outcome_in_a_batch_is_refused_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    apply, admit = scheduler_outcomes.apply_outcome, later.admit

    def failing(state: Any, outcome: ExecutionOutcome, facts: Any) -> Any:
        if outcome.job_id == "b":
            raise RuntimeError("a bug in applying b's outcome")
        return apply(state, outcome, facts)

    def failing_admit(held: Any, outcome: ExecutionOutcome, now_ms: int, codec: Codec) -> Any:
        if outcome.job_id == "b":  # a success that would wait (later.py) fails there
            raise RuntimeError("a bug in taking b's outcome")
        return admit(held, outcome, now_ms, codec)

    run = Run(tmp_path, 20_000, batched=True, partitions=1)
    try:
        run.stack.put(*[per_second(j, 2, 60, tenant=t) for t, j in JOBS])
        run.stack.settle()
        run.step(3)
        monkeypatch.setattr(scheduler_outcomes, "apply_outcome", failing)
        monkeypatch.setattr(later, "admit", failing_admit)
        run.step(1)
        rejected = [
            CODEC.decode_as(m.value(), Rejected)
            for m in run.driver.messages(run.stack.topics.rejected)
        ]
        assert rejected and {r.code for r in rejected} == {"processing_error"}
        evidence = [CODEC.decode(r.original_value) for r in rejected]
        assert {type(e) for e in evidence} == {ExecutionOutcome}  # the entry, not the batch
        assert {e.job_id for e in evidence if isinstance(e, ExecutionOutcome)} == {"b"}
        left = run.running() & run.answered  # answered, and still listed as running
        assert left and all(eid.startswith("acme/b@") for eid in left)
    finally:
        run.close()


def test_a_keyed_batch_is_read_as_a_batch_and_keyless_garbage_is_refused(
    tmp_path: Path,
) -> None:
    """Odd records on `outcomes`: a batch that carries a key anyway is split like any batch
    (each outcome under its own job, never under the record's key), and keyless bytes that are
    no record are rejected with their reason; the outcomes after them are applied."""
    run = Run(tmp_path, 20_000, batched=True, partitions=1)
    try:
        run.stack.put(*[per_second(j, 2, 60, tenant=t) for t, j in JOBS])
        run.stack.settle()
        run.step(3)
        run.driver.advance(1_000)  # runs due now start, and nobody answers them yet
        run.stack.settle()
        now = run.driver.now_ms()
        due = [
            e
            for e in run.stack.executions()
            if e.due_at.timestamp() * 1000 <= now
            and f"{e.execution_id}#{e.attempt}" not in run.answered
        ]
        assert len(due) == len(JOBS)
        topic = run.stack.topics.outcomes
        keyed = ExecutionOutcomes(outcomes=[outcome_of(due[0])])
        run.driver.send(topic, keyed, key=due[1].key, partition=0)  # another job's key
        run.driver.produce(topic, b"\xc3\x01not a record", key=None, partition=0)
        run.stack.settle()
        running = run.running()
        assert f"{due[0].execution_id}#1" not in running  # applied under its own job
        assert all(f"{e.execution_id}#1" in running for e in due[1:])  # the key did nothing
        rejected = [
            CODEC.decode_as(m.value(), Rejected)
            for m in run.driver.messages(run.stack.topics.rejected)
        ]
        [garbage] = rejected  # the garbage, not the batch: for what its bytes are, not its key
        assert garbage.code == "unknown_schema" and "fingerprint" in garbage.reason
    finally:
        run.close()
