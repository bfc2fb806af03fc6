"""Executions in batches through the real scheduler and worker on the in-memory cluster
(`KADENCE_EXECUTION_BATCHES`): one-off Kafka-topic jobs of a tenant due at one instant go out as
ExecutionBatch records, dispatched ahead, and each run reaches its topic once, at its due time;
a job paused before then is revoked out of its batch; with the setting off (the default) each
run is a record of its own."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from kadence.models import (
    ExecutionBatch,
    ExecutionRequested,
    KafkaTarget,
    PauseJob,
    ScheduleDefinition,
)
from kadence.settings import KadenceSettings
from kadence.topics import EXECUTIONS
from testkit.driver import Driver
from testkit.driver.stack import DriverStack
from tests.driver.stack_helpers import T0, TTL_MS, once, settings_for
from tests.driver.test_worker_delivery import Topic

DUE_S = 20
"""The jobs' due time: within the look-ahead (30 s), so their runs go out ahead, together."""


def stack_with(driver: Driver, tmp_path: Path, batches: bool) -> DriverStack:
    settings: KadenceSettings = settings_for(tmp_path / "state", execution_batches=batches)
    stack = DriverStack(driver, settings)
    for tenant in ("acme", "globex"):
        driver.create_topic(f"drv.to.{tenant}.t")
    stack.scheduler()
    stack.reaper()
    stack.worker("w0", targets={"kafka": Topic()})
    stack.settle()
    return stack


@pytest.fixture
def batched(driver: Driver, tmp_path: Path) -> Iterator[DriverStack]:
    stack = stack_with(driver, tmp_path, batches=True)
    yield stack
    stack.driver.close()


def kafka_once(tenant: str, job_id: str) -> ScheduleDefinition:
    d = once(job_id, in_s=DUE_S, lease_ttl_ms=TTL_MS)
    return d.model_copy(update={"tenant": tenant, "target": KafkaTarget(topic="t")})


def put_jobs(stack: DriverStack) -> list[ScheduleDefinition]:
    jobs = [kafka_once("acme", f"a{i}") for i in range(12)]
    jobs += [kafka_once("globex", f"g{i}") for i in range(3)]
    stack.put(*jobs)
    return jobs


def records(stack: DriverStack) -> list[object]:
    return [
        EXECUTIONS.decode(stack.codec, m.value())
        for m in stack.driver.messages(stack.topics.executions)
    ]


def received(stack: DriverStack, tenant: str) -> Counter[str]:
    values = [m.value() for m in stack.driver.messages(f"drv.to.{tenant}.t")]
    return Counter(stack.codec.decode_as(v, ExecutionRequested).job_id for v in values)


def test_a_tenants_runs_due_together_go_out_as_batches_and_each_arrives_once(
    batched: DriverStack,
) -> None:
    jobs = put_jobs(batched)
    batched.run_for(1_000)
    written = records(batched)  # dispatched ahead, batched (one alone in its transaction
    assert len(written) < len(jobs)  # is a record of its own)
    carried = [len(r.executions) if isinstance(r, ExecutionBatch) else 1 for r in written]
    assert sum(carried) == len(jobs) and max(carried) > 1
    assert received(batched, "acme") == Counter()  # never early
    batched.run_for(DUE_S * 1_000)
    assert received(batched, "acme") == Counter({f"a{i}": 1 for i in range(12)})
    assert received(batched, "globex") == Counter({f"g{i}": 1 for i in range(3)})
    assert not [h for h in batched.history() if h.decision.value in {"failed", "dead_lettered"}]


def test_a_job_paused_before_its_due_time_is_revoked_out_of_its_batch(
    batched: DriverStack,
) -> None:
    put_jobs(batched)
    batched.run_for(1_000)
    batched.send(
        PauseJob(
            tenant="acme", job_id="a3", request_id="pause-a3", issued_at=T0, reason="maintenance"
        )
    )
    batched.run_for(DUE_S * 1_000)
    got = received(batched, "acme")
    assert "a3" not in got
    assert got == Counter({f"a{i}": 1 for i in range(12) if i != 3})


def test_with_the_setting_off_each_run_is_a_record_of_its_own(
    driver: Driver, tmp_path: Path
) -> None:
    stack = stack_with(driver, tmp_path, batches=False)
    jobs = put_jobs(stack)
    stack.run_for(1_000)
    written = records(stack)
    assert len(written) == len(jobs)
    assert all(isinstance(r, ExecutionRequested) for r in written)
    stack.run_for(DUE_S * 1_000)
    assert received(stack, "acme") == Counter({f"a{i}": 1 for i in range(12)})
