"""The loops charge their thread's CPU to the kind of work they do (kadence/work_cpu.py), as
`kadence_work_cpu_seconds_total{work}` on each process's metrics: the scheduler by input topic,
timers and commits; the worker by reading, claiming, delivering and committing. On the driver,
turn by turn: a kind moves when the loop did that work, and only then."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from kadence.models import PauseJob
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from kadence.work_cpu import WorkCpu
from streams.runtime.metrics import RuntimeCollector
from testkit.driver import Driver
from testkit.driver.stack import DriverStack
from tests.driver.stack_helpers import T0, once, settings_for
from tests.driver.test_worker_delivery import TENANT_TOPIC, Topic, delivered, execution, send

NAME = "kadence_work_cpu_seconds_total"


@pytest.fixture
def stack(driver: Driver, tmp_path: Path) -> Iterator[DriverStack]:
    s = DriverStack(driver, settings_for(tmp_path / "state"))
    yield s
    s.close()


def charged(work: WorkCpu) -> dict[str, float]:
    """What a scrape of the process shows, by kind."""
    registry = CollectorRegistry()
    registry.register(work)
    return {
        s.labels["work"]: s.value
        for family in registry.collect()
        for s in family.samples
        if s.name == NAME
    }


def test_the_scheduler_charges_each_input_topic_its_timers_and_its_commits(
    stack: DriverStack,
) -> None:
    scheduler, reaper = stack.scheduler(), stack.reaper()
    stack.put(once("j", in_s=5))
    stack.settle()
    first = charged(scheduler.work)
    assert {"poll", "schedules", "fire", "commit"} <= first.keys()
    assert all(first[k] > 0 for k in ("poll", "schedules", "commit"))
    assert not {"commands", "outcomes", "scheduler-control"} & first.keys()  # none read

    stack.send(PauseJob(tenant="acme", job_id="j", request_id="pause-1", issued_at=T0))
    stack.settle()
    then = charged(scheduler.work)
    assert then["commands"] > 0
    assert then["schedules"] == first["schedules"]  # no schedule read since
    assert "outcomes" not in then

    # served with the runtime's other metrics, the reaper's too (its input: leases)
    registry = CollectorRegistry()
    registry.register(RuntimeCollector(reaper))
    assert (registry.get_sample_value(NAME, {"work": "poll"}) or 0) > 0
    assert registry.get_sample_value(NAME, {"work": "leases"}) is None  # no worker, no lease


def test_outcomes_are_charged_to_the_scheduler_and_the_run_to_the_worker_kinds(
    stack: DriverStack,
) -> None:
    scheduler = stack.scheduler()
    stack.put(once("j", in_s=2))
    stack.settle()
    assert "outcomes" not in charged(scheduler.work)
    worker = stack.worker()
    stack.run_for(3_000)
    assert [o.job_id for o in stack.outcomes()] == ["j"]
    assert charged(scheduler.work)["outcomes"] > 0
    done = charged(worker.metrics.work)
    assert all(done[k] > 0 for k in ("read", "claim", "commit")), done


def test_an_idle_worker_reads_and_looks_for_work_and_a_delivery_adds_delivering_and_committing(
    driver: Driver,
) -> None:
    settings = KadenceSettings(namespace="drv", partitions=2, execution_partitions=2)
    topics: Topics = driver.provision(settings)
    driver.create_topic(TENANT_TOPIC)
    worker = driver.worker(settings, {"kafka": Topic()})
    driver.turn(worker, times=3)  # joins the group, nothing to read
    idle = charged(worker.metrics.work)
    assert idle.keys() == {"read", "claim"}
    send(driver, topics, execution())
    driver.turn(worker, times=2)
    assert len(delivered(driver)) == 1
    busy = charged(worker.metrics.work)
    assert busy.keys() == {"read", "claim", "deliver", "commit"}
    assert busy["read"] > idle["read"] and busy["deliver"] > 0
