"""A steady job's runs to a Kafka topic are written from their series' template without their
records (`Output.series`, `SeriesRun`): the same records on the same partitions, byte for byte
(each one alone or in its due instant's batch), the same headers, and the same dispatch
metrics as writing each run's record, for any schedule, spread, event age, tenant route and
execution id; and a run the template cannot write goes through its record as before."""

from __future__ import annotations

from functools import partial
from typing import Any
from unittest import mock

from hypothesis import event, given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest

from kadence.codec import Codec
from kadence.models import KafkaTarget, ScheduleDefinition
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.store import Batch, MemoryStore
from streams.runtime.task import Task
from streams.scheduler.metrics import SchedulerMetrics
from streams.scheduler.output import Output
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor
from streams.scheduler.requested import SeriesRuns
from tests.scheduler.test_domain import T0

CODEC = Codec()
SCHEDULES = st.sampled_from(
    [
        {"kind": "cron", "expression": "* * * * * *"},
        {"kind": "cron", "expression": "*/7 * * * * *", "spread_s": 2},
        {"kind": "interval", "every_s": 1},
        {"kind": "interval", "every_s": 3, "offset_s": 1, "spread_s": 1},
        {"kind": "cron", "expression": "* * * * *", "spread_s": 30},
    ]
)
JOBS = st.lists(
    st.tuples(
        st.sampled_from(["acme", "acme", "wide-tenant"]),  # tenants' runs share batches
        st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}", fullmatch=True),
        SCHEDULES,
        st.one_of(st.none(), st.integers(1_000, 86_400_000)),
        st.sampled_from([None, "urgent"]),
        st.sampled_from(["allow", "allow", "allow", "skip"]),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda j: (j[0], j[1]),
)


STEADY = [
    ("acme", "every-second", {"kind": "cron", "expression": "* * * * * *"}, None, None, "allow"),
    ("acme", "every-1s", {"kind": "interval", "every_s": 1}, 120_000, None, "allow"),
]
"""Two jobs of one tenant whose runs share due instants (so batches, when they are on), beside
the drawn ones."""


def _raise(exc: Exception) -> None:
    raise exc


class Scheduler:
    """The processor on an in-memory task (its coalescer on or off), recording what it writes
    with every header made, and its metrics."""

    def __init__(self, jobs: list[Any], coalesced: bool, ahead_ms: int) -> None:
        topics = Topics(KadenceSettings(partitions=1, pools=["urgent"]))
        cfg = SchedulerConfig(
            topics,
            1,
            4,
            "2025b",
            dispatch_ahead_ms=ahead_ms,
            tenant_shards={"wide-tenant": 3},
        )
        self.proc = SchedulerProcessor(cfg, CODEC, SchedulerMetrics())
        self.task = Task(0, MemoryStore(), T0, 60_000)
        if coalesced:
            self.task.coalescer = self.proc.coalescer(self.task.record_limit)
        self.out: list[tuple[Any, ...]] = []
        self.task._emit = lambda *r: self.out.append(r)
        self.task.changelog = topics.scheduler_changelog
        self.offset = 0
        for tenant, job_id, schedule, age, pool, overlap in jobs:
            d = ScheduleDefinition.model_validate(
                {
                    "tenant": tenant,
                    "job_id": job_id,
                    "version": 1,
                    "schedule": schedule,
                    "target": KafkaTarget(topic="out", pool=pool),
                    "max_event_age_ms": age,
                    "overlap": overlap,
                }
            )
            self.offset += 1
            record = InputRecord(
                topics.schedules, 0, self.offset, d.key.encode(), CODEC.encode(d), [], T0
            )
            assert self.task.attempt(partial(self.proc.process, self.task, record, T0), _raise)
        self.commit()

    def fire(self, now: int) -> None:
        for key in self.task.due(now, 10_000):
            assert self.task.attempt(partial(self.proc.fire, self.task, key, now), _raise)
        self.commit()

    def commit(self) -> None:
        self.task.changelog_records()
        self.task.store.apply(self.task.batch)
        self.task.batch = Batch()
        self.task.committed(self.offset)

    def written(self) -> list[tuple[Any, ...]]:
        """The executions written: (topic, partition, key, value, headers)."""
        return [r for r in self.out if r[0].startswith("kadence.executions")]

    def dispatched(self) -> list[str]:
        text = generate_latest(self.proc.metrics.registry).decode()
        return sorted(
            line
            for line in text.splitlines()
            if line.startswith(("kadence_scheduler_dispatched", "kadence_dispatch_lateness"))
        )


def by_records() -> Any:
    """Every run written through its record (`Output.series` declines each)."""
    return mock.patch.object(Output, "series", return_value=None)


@settings(max_examples=120, deadline=None)
@given(
    jobs=JOBS,
    coalesced=st.booleans(),
    ahead_ms=st.sampled_from([0, 5_000, 30_000]),
    wakes=st.lists(st.integers(0, 20_000), min_size=1, max_size=3),
)
def test_a_series_written_from_its_template_is_what_its_records_give(
    jobs: list[Any], coalesced: bool, ahead_ms: int, wakes: list[int]
) -> None:
    jobs = STEADY + [(t, f"j-{job}", *rest) for t, job, *rest in jobs]
    fast = Scheduler(jobs, coalesced, ahead_ms)
    with by_records():
        slow = Scheduler(jobs, coalesced, ahead_ms)
    templated: list[bool] = []
    value = SeriesRuns.value

    def counted(runs: SeriesRuns, shot: Any) -> bytes | None:
        out = value(runs, shot)
        templated.append(out is not None)
        return out

    now = T0
    for step in wakes:
        now += step
        with mock.patch.object(SeriesRuns, "value", counted):
            fast.fire(now)
        with by_records():
            slow.fire(now)
    assert fast.written() == slow.written()
    assert fast.dispatched() == slow.dispatched()
    kinds = {dict(r[4])["kadence-type"] for r in fast.written()}
    event(f"written: {', '.join(sorted(k.decode() for k in kinds)) or 'nothing'}")
    event(f"runs from a series' template: {'some' if any(templated) else 'none'}")


def test_a_wake_of_two_per_second_jobs_makes_the_record_of_each_ones_first_run_only() -> None:
    """The first run of a series is written through its record (the template is cut from
    it); the others from the template, without a record, and each second's two runs (one a
    job, one tenant) go out as one batch."""
    made = []
    run = SeriesRuns.run

    def counted(runs: SeriesRuns, shot: Any) -> Any:
        made.append(shot.execution_id)
        return run(runs, shot)

    every_s = {"kind": "cron", "expression": "* * * * * *"}
    jobs = [("acme", job, every_s, None, None, "allow") for job in ("j", "k")]
    side = Scheduler(jobs, True, 30_000)
    with by_records():
        slow = Scheduler(jobs, True, 30_000)
    with mock.patch.object(SeriesRuns, "run", counted):
        side.fire(T0 + 1_000)
    with by_records():
        slow.fire(T0 + 1_000)
    assert side.written() == slow.written()  # the batches' bytes, byte for byte
    batches = [r for r in side.written() if ("kadence-type", b"ExecutionBatch") in r[4]]
    assert len(batches) >= 29  # a look-ahead's seconds (the one due now goes out at once)
    assert sorted(made) == sorted(made[:2]) and {m.split("@")[0] for m in made} == {
        "acme/j",
        "acme/k",
    }


def test_a_run_the_template_cannot_write_goes_through_its_record() -> None:
    """An execution id the template refuses (here: every id, as if too long) is written
    through its record, as before the template; the bytes are the same."""
    job = [("acme", "j", {"kind": "cron", "expression": "* * * * * *"}, 60_000, None, "allow")]
    fast = Scheduler(job, False, 30_000)
    with by_records():
        slow = Scheduler(job, False, 30_000)
    with mock.patch.object(SeriesRuns, "value", return_value=None):
        fast.fire(T0 + 1_000)
    with by_records():
        slow.fire(T0 + 1_000)
    assert fast.written() == slow.written()
    assert len(fast.written()) >= 15
