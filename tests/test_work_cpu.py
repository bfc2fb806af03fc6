"""The loop's CPU by kind of work (kadence/work_cpu.py): what a switch charges, and to what, on a
thread clock the test moves by hand."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry

from kadence.work_cpu import WorkCpu, topic_work


class Clock:
    """The thread's CPU clock, moved by the test; counts how often it was read."""

    def __init__(self) -> None:
        self.ns = 1_000
        self.reads = 0

    def __call__(self) -> int:
        self.reads += 1
        return self.ns


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(time, "thread_time_ns", c)
    return c


def test_a_switch_charges_the_time_since_the_last_one_to_the_kind_it_leaves(
    clock: Clock,
) -> None:
    work = WorkCpu()
    clock.ns += 500  # before the first switch: nothing is charged
    work.switch("poll")
    clock.ns += 2_000
    work.switch("fire")
    clock.ns += 3_000
    work.switch("poll")
    clock.ns += 1_000
    work.switch("commit")
    assert work.seconds() == {"poll": 3e-6, "fire": 3e-6}
    assert work.current == "commit"  # its stretch is charged at the next switch


def test_saying_the_kind_under_way_again_reads_no_clock(clock: Clock) -> None:
    work = WorkCpu()
    work.switch("fire")
    for _ in range(1_000):  # a loop may say it per record
        clock.ns += 10
        work.switch("fire")
    assert clock.reads == 1
    work.switch("commit")
    assert clock.reads == 2
    assert work.seconds() == {"fire": 10_000 / 1e9}


def test_work_within_another_goes_back_to_it(clock: Clock) -> None:
    work = WorkCpu()
    work.switch("fire")
    clock.ns += 1_000
    with work.during("commit"):
        clock.ns += 4_000
    assert work.current == "fire"
    clock.ns += 2_000
    work.switch("poll")
    assert work.seconds() == {"fire": 3e-6, "commit": 4e-6}


def test_a_topic_is_its_kind_by_its_name_last_part_and_an_unknown_one_is_other(
    clock: Clock,
) -> None:
    work = WorkCpu(["ns.a.schedules", "ns.a.scheduler-control", "ns.a.outcomes"])
    assert topic_work("ns.a.scheduler-control") == "scheduler-control"
    work.topic("ns.a.outcomes")
    clock.ns += 7_000
    work.topic("ns.a.outcomes")
    work.topic("elsewhere.outcomes")  # not an input of this loop: one bounded label
    clock.ns += 1_000
    work.topic("ns.a.schedules")
    assert work.seconds() == {"outcomes": 7e-6, "other": 1e-6}


def test_the_counter_is_exported_by_kind(clock: Clock) -> None:
    registry = CollectorRegistry()
    work = WorkCpu()
    registry.register(work)
    work.switch("read")
    clock.ns += 250_000_000
    work.switch("deliver")
    name = "kadence_work_cpu_seconds_total"
    assert registry.get_sample_value(name, {"work": "read"}) == 0.25
    assert registry.get_sample_value(name, {"work": "deliver"}) is None  # nothing charged yet
