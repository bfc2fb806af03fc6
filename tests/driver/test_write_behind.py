"""A success that changes nothing but its job's runs writes nothing of its own
(streams/scheduler/write_behind.py, streams/runtime/deferred.py), and a crash, an abort or a
restart loses none of it: the job's state afterwards is the state a scheduler that wrote every
outcome has (its twin here, `write_behind_ms=0`, fed the same inputs at the same times)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kadence.client import routing_key
from kadence.models import ErrorInfo, ExecutionOutcome, ExecutionOutcomes
from kadence.partitioning import partition_for
from streams.kafkaio import errors, retry
from streams.runtime.deferred import replay_key
from streams.scheduler import later
from streams.scheduler.processor import SchedulerProcessor
from streams.scheduler.settled import already_applied
from testkit.driver import Driver
from testkit.driver.faults import abort_error
from testkit.driver.stack import DriverStack
from testkit.outcomes import outcome_of
from tests.driver.stack_helpers import once, per_second, settings_for

JOBS = [("acme", "a"), ("acme", "b"), ("blue", "c"), ("blue", "d")]

FAILURE = ErrorInfo(type="boom", message="injected")


class Run:
    """A scheduler on a driver, its runs answered by hand (no worker: the same answers at the
    same instants in both twins)."""

    def __init__(
        self, root: Path, write_behind_ms: int, *, batched: bool = False, **kw: Any
    ) -> None:
        self.batched = batched
        """Answers as a worker writes them by default: one ExecutionOutcomes per partition per
        step (`answer`); False: one record per outcome (`outcome_format=records`)."""
        self.driver = Driver()
        s = settings_for(root, write_behind_ms=write_behind_ms, **kw)
        self.stack = DriverStack(self.driver, s)
        self.scheduler = self.stack.scheduler()
        self.answered: set[str] = set()
        self.restarts = 0

    def close(self) -> None:
        self.driver.close()

    def answer(self, fail: frozenset[str] = frozenset()) -> int:
        """Report every run due by now: succeeded, or failed (retryable) when its job is in
        `fail`; returns how many."""
        now, n = self.driver.now_ms(), 0
        batches: dict[int, list[ExecutionOutcome]] = {}
        for ex in self.stack.executions():
            key = f"{ex.execution_id}#{ex.attempt}"
            if key in self.answered or ex.due_at.timestamp() * 1000 > now:
                continue
            self.answered.add(key)
            outcome = outcome_of(ex, error=FAILURE if ex.job_id in fail else None)
            partition = partition_for(ex.routing_key, self.stack.settings.partitions)
            if self.batched:
                batches.setdefault(partition, []).append(outcome)
            else:
                self.driver.send(
                    self.stack.topics.outcomes, outcome, key=ex.key, partition=partition
                )
            n += 1
        for partition, outcomes in batches.items():
            batch = ExecutionOutcomes(outcomes=outcomes)
            self.driver.send(self.stack.topics.outcomes, batch, key=None, partition=partition)
        return n

    def step(self, seconds: int = 1, fail: frozenset[str] = frozenset()) -> None:
        for _ in range(seconds):
            self.driver.advance(1_000)
            self.stack.settle()
            self.answer(fail)
            self.stack.settle()

    def crash(self) -> None:
        """kill -9 and a new process (its own empty state directory: restored from the
        changelog)."""
        self.driver.crash(self.scheduler)
        self.restarts += 1
        self.scheduler = self.stack.scheduler(f"s{self.restarts}")
        self.stack.settle()

    def abort_next_commit(self) -> None:
        self.driver.cluster.faults.fail("commit_transaction", abort_error())
        self.driver.advance(200)
        self.stack.settle()

    @property
    def processor(self) -> SchedulerProcessor:
        proc = self.scheduler.processor
        assert isinstance(proc, SchedulerProcessor)
        return proc

    def states(self) -> dict[str, tuple[object, ...]]:
        """What each job remembers: its cursor, runs, retries, which outcomes it applied,
        counts. Not its look-ahead, nor how it stores which outcomes it applied: entries
        already due are dropped from the look-ahead by whichever step comes next, and the
        watermark of applied outcomes moves past them then, so both depend on when that was
        (a replay comes later than the outcome did)."""
        out: dict[str, tuple[object, ...]] = {}
        for tenant, job in JOBS:
            key = f"{tenant}/{job}".encode()
            p = partition_for(routing_key(tenant, job, None), self.stack.settings.partitions)
            state = self.processor.store.load(self.scheduler.tasks[p], key)
            if state is None:
                continue
            out[key.decode()] = (
                state.cursor_ms,
                state.next_due_ms,
                tuple((r.execution_id, r.attempt) for r in state.running),
                tuple((r.execution_id, r.attempt, r.due_ms) for r in state.retries),
                tuple(  # which outcomes it applied (how it remembers them may differ: settled.py)
                    sorted(
                        a
                        for a in self.answered
                        if a.startswith(key.decode() + "@") and already_applied(state, *_split(a))
                    )
                ),
                state.unsettled,
                state.fired,
                state.failures_in_row,
            )
        return out

    def running(self) -> set[str]:
        """`<execution id>#<attempt>` of every run the jobs list as running."""
        runs: set[str] = set()
        for tenant, job in JOBS:
            key = f"{tenant}/{job}".encode()
            p = partition_for(routing_key(tenant, job, None), self.stack.settings.partitions)
            state = self.processor.store.load(self.scheduler.tasks[p], key)
            runs |= {f"{r.execution_id}#{r.attempt}" for r in state.running} if state else set()
        return runs

    def job_writes(self) -> int:
        """Records of jobs' own state on the changelog (not definitions, breakers, points)."""
        log = self.driver.messages(self.stack.topics.scheduler_changelog)
        return sum(1 for m in log if not (m.key() or b"~").startswith(b"~"))


def _split(answered: str) -> tuple[str, int]:
    execution_id, _, attempt = answered.rpartition("#")
    return execution_id, int(attempt)


@pytest.fixture(autouse=True)
def _no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "RETRY_PAUSE_S", 0.0)
    monkeypatch.setattr(retry, "PAUSE_S", 0.0)


@contextmanager
def twins(root: Path, *, batched: bool = True, **kw: Any) -> Iterator[tuple[Run, Run]]:
    """A scheduler that defers quiet outcomes and one that writes every outcome (the first fed
    the outcomes in batches unless `batched` is False, the second one record each)."""
    deferring = Run(root / "deferring", 20_000, batched=batched, **kw)
    writing = Run(root / "writing", 0, **kw)
    try:
        for run in (deferring, writing):
            run.stack.put(*[per_second(j, 2, 60, tenant=t) for t, j in JOBS])
            run.stack.settle()
        yield deferring, writing
    finally:
        deferring.close()
        writing.close()


def test_a_success_writes_nothing_of_its_own(tmp_path: Path) -> None:
    with twins(tmp_path) as (deferring, writing):
        for run in (deferring, writing):
            run.step(35)  # the look-ahead filled
        before = {id(run): (run.job_writes(), len(run.answered)) for run in (deferring, writing)}
        for run in (deferring, writing):
            run.step(10)
        writes, answers = {}, {}
        for run in (deferring, writing):
            w, a = before[id(run)]
            writes[id(run)], answers[id(run)] = run.job_writes() - w, len(run.answered) - a
        assert answers[id(deferring)] == answers[id(writing)] == 40
        assert writes[id(writing)] >= 40  # one per outcome at least
        # per job in ten seconds: its fires (the look-ahead refills every 15 s) at most
        assert writes[id(deferring)] <= 2 * len(JOBS)
        assert deferring.processor.metrics.deferred._value.get() >= 30
        waiting = [  # successes not applied yet (later.py), before `states` catches them up
            key
            for task in deferring.scheduler.tasks.values()
            for key in (f"{tenant}/{job}".encode() for tenant, job in JOBS)
            if isinstance(deferring.processor.store.decoded(task, key), later.Waiting)
        ]
        assert waiting
        assert deferring.states() == writing.states()


@pytest.mark.parametrize("batched", [True, False])
def test_a_crash_replays_what_was_only_in_memory(tmp_path: Path, batched: bool) -> None:
    with twins(tmp_path, batched=batched) as (deferring, writing):
        for run in (deferring, writing):
            run.step(40)
            run.crash()
            run.step(5)
        assert deferring.processor.metrics.replayed._value.get() > 0
        assert writing.processor.metrics.replayed._value.get() == 0
        assert deferring.states() == writing.states()
        assert deferring.answered
        assert not deferring.answered & deferring.running()  # every success applied again


@pytest.mark.parametrize("batched", [True, False])
def test_an_abort_replays_what_it_dropped(tmp_path: Path, batched: bool) -> None:
    with twins(tmp_path, batched=batched) as (deferring, writing):
        for run in (deferring, writing):
            run.step(38)
            run.abort_next_commit()
            run.step(3)
        assert deferring.scheduler.stats.aborts >= 1
        assert deferring.processor.metrics.replayed._value.get() > 0
        assert deferring.states() == writing.states()


def test_failures_are_written_at_once_and_retried_alike(tmp_path: Path) -> None:
    with twins(tmp_path) as (deferring, writing):
        for run in (deferring, writing):
            run.step(36)
            run.step(2, fail=frozenset({"a"}))
            run.crash()
            run.step(4)
        assert deferring.states() == writing.states()
        retried = [e for e in deferring.stack.executions() if e.attempt > 1]
        assert retried
        assert len(retried) == len([e for e in writing.stack.executions() if e.attempt > 1])


def test_a_state_left_unwritten_is_written_after_write_behind_ms(tmp_path: Path) -> None:
    run = Run(tmp_path, 5_000)
    try:
        run.stack.put(once("a", 2))
        run.step(3)
        assert run.answered
        outcomes_topic = run.stack.topics.outcomes
        point = replay_key(outcomes_topic)
        written = run.job_writes()
        log = run.driver.messages(run.stack.topics.scheduler_changelog)
        assert [m.value() for m in log if m.key() == point][-1] is not None  # a point is stored
        run.step(6)
        assert run.job_writes() == written + 1  # the job, written once after 5 s
        log = run.driver.messages(run.stack.topics.scheduler_changelog)
        assert [m.value() for m in log if m.key() == point][-1] is None  # nothing waits now
        before = run.states()
        assert before["acme/a"][2] == ()  # its run ended
        run.crash()
        assert run.processor.metrics.replayed._value.get() == 0
        assert run.states() == before
    finally:
        run.close()


ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("step"), st.integers(1, 4), st.sampled_from(["", "a", "c"])),
        st.tuples(st.just("crash"), st.just(0), st.just("")),
        st.tuples(st.just("abort"), st.just(0), st.just("")),
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(actions=ACTIONS)
def test_any_order_of_outcomes_crashes_and_aborts_ends_in_the_same_state(
    tmp_path_factory: pytest.TempPathFactory, actions: list[tuple[str, int, str]]
) -> None:
    root = tmp_path_factory.mktemp("twins")
    with twins(root) as (deferring, writing):
        for run in (deferring, writing):
            run.step(33)
            for action, n, failing in actions:
                if action == "step":
                    run.step(n, fail=frozenset({failing} - {""}))
                elif action == "crash":
                    run.crash()
                else:
                    run.abort_next_commit()
            run.step(1)
        assert deferring.states() == writing.states()
        assert [e.execution_id for e in deferring.stack.executions()] == [
            e.execution_id for e in writing.stack.executions()
        ]


def test_what_was_left_unwritten_is_replayed_after_write_behind_is_turned_off(
    tmp_path: Path,
) -> None:
    """`write_behind_ms=0` on a restart still replays what the last run left in memory."""
    run = Run(tmp_path, 20_000)
    try:
        run.stack.put(*[per_second(j, 2, 60, tenant=t) for t, j in JOBS])
        run.stack.settle()
        run.step(38)
        run.driver.crash(run.scheduler)
        run.stack.settings = run.stack.settings.model_copy(update={"write_behind_ms": 0})
        run.scheduler = run.stack.scheduler("s9")
        run.stack.settle()
        assert run.processor.metrics.replayed._value.get() > 0
        assert not run.answered & run.running()
    finally:
        run.close()
