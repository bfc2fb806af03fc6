"""The processor runtime's loop (streams/runtime/loop.py) on the in-memory cluster: what a turn
commits, what an abort undoes, what a revoke and a restore keep, on RocksDB and in memory."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from streams.runtime.coalescing import Coalescer
from streams.runtime.config import RunnerConfig
from streams.runtime.context import ProcessorContext
from streams.runtime.loop import Runner
from streams.runtime.records import InputRecord
from testkit.driver import Driver, abort_error, fatal_error, retriable_error

IN, OUT, CHANGELOG = "in", "out", "app-changelog"


class Counter:
    """Counts records per key in state and forwards each new count: a duplicate or lost input
    shows in the output as a repeated or skipped number."""

    def __init__(self) -> None:
        self.during: Callable[[], object] = lambda: None
        """Runs inside `process`, with the transaction open."""

    def process(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        assert record.key is not None
        count = int(ctx.get(record.key) or b"0") + 1
        ctx.put(record.key, str(count).encode(), None)
        ctx.forward(OUT, ctx.partition, record.key, str(count).encode(), [])
        self.during()

    def fire(self, ctx: ProcessorContext, key: bytes, now_ms: int) -> None:
        pass

    def refuse(
        self, ctx: ProcessorContext, record: InputRecord, exc: Exception, now_ms: int
    ) -> None:
        pass

    def quarantine(self, ctx: ProcessorContext, key: bytes, exc: Exception, now_ms: int) -> None:
        pass

    def prefetch(self, ctx: ProcessorContext, key: bytes) -> None:
        pass

    def maintain(self, ctx: ProcessorContext, now_ms: int) -> bool:
        return True


@pytest.fixture(params=["rocksdb", "memory"])
def state_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    return tmp_path / "state" if request.param == "rocksdb" else None


@pytest.fixture
def topics(driver: Driver) -> Driver:
    driver.create_topic(IN, 2)
    driver.create_topic(OUT, 2)
    driver.create_topic(CHANGELOG, 2)
    return driver


def config(instance: str, state_dir: Path | None, commit_interval_ms: int = 0) -> RunnerConfig:
    """Every turn commits (interval 0) unless told otherwise: a turn is one transaction."""
    return RunnerConfig(
        app="app",
        instance_id=instance,
        input_topics=[IN],
        changelog_topic=CHANGELOG,
        state_dir=state_dir / instance if state_dir else None,
        commit_interval_ms=commit_interval_ms,
    )


def outputs(driver: Driver) -> list[tuple[bytes | None, bytes | None]]:
    return sorted((m.key(), m.value()) for m in driver.messages(OUT))


def stored(runner: Runner, key: bytes, partition: int) -> bytes | None:
    return runner.tasks[partition].get(key)


def feed(driver: Driver, *keys: bytes) -> None:
    for key in keys:
        driver.produce(IN, b"x", key=key, partition=0)


def test_a_commit_makes_outputs_state_and_offsets_visible_together(
    topics: Driver, state_dir: Path | None
) -> None:
    driver, counter = topics, Counter()
    runner = driver.runner(config("a", state_dir), counter)
    seen_inside: list[tuple[int, int, dict[tuple[str, int], int]]] = []
    counter.during = lambda: seen_inside.append(
        (
            len(driver.messages(OUT)),
            len(driver.messages(CHANGELOG)),
            driver.cluster.committed("app"),
        )
    )
    feed(driver, b"k", b"k", b"j")
    driver.turn(runner)
    assert seen_inside == [(0, 0, {})] * 3  # nothing visible while the turn's transaction runs
    assert outputs(driver) == [(b"j", b"1"), (b"k", b"1"), (b"k", b"2")]
    assert len(driver.messages(CHANGELOG)) == 2  # once per key: k's last value, and j
    assert driver.cluster.committed("app") == {(IN, 0): 3}  # only the partition that moved
    assert stored(runner, b"k", 0) == b"2"  # applied to the store after the commit
    assert runner.tasks[0].store.changelog_offset() is not None


@pytest.mark.parametrize("call", ["send_offsets_to_transaction", "commit_transaction"])
def test_a_failure_that_requires_abort_rewinds_and_reads_the_input_again(
    topics: Driver, state_dir: Path | None, call: str
) -> None:
    driver = topics
    runner = driver.runner(config("a", state_dir), Counter())
    driver.turn(runner)  # assigned
    feed(driver, b"k", b"k")
    driver.cluster.faults.fail(call, abort_error())
    driver.turn(runner)
    assert runner.stats.aborts == 1
    assert driver.messages(OUT) == []
    assert driver.messages(CHANGELOG) == []
    assert driver.cluster.committed("app").get((IN, 0), 0) == 0
    assert stored(runner, b"k", 0) is None  # the aborted writes never reached the store
    driver.turn(runner)
    assert outputs(driver) == [(b"k", b"1"), (b"k", b"2")]  # read again, counted once
    assert stored(runner, b"k", 0) == b"2"
    assert driver.cluster.committed("app")[(IN, 0)] == 2


def test_a_retriable_failure_at_commit_is_retried_and_commits_once(topics: Driver) -> None:
    driver = topics
    runner = driver.runner(config("a", None), Counter())
    feed(driver, b"k")
    driver.cluster.faults.fail("commit_transaction", retriable_error(), times=3)
    driver.turn(runner)
    assert runner.stats.aborts == 0
    assert driver.cluster.faults.calls["commit_transaction"] == 4
    assert outputs(driver) == [(b"k", b"1")]


@pytest.mark.parametrize("how", ["fatal", "stuck"])
def test_an_unusable_producer_is_replaced_and_the_turn_read_again(
    topics: Driver, state_dir: Path | None, how: str
) -> None:
    driver = topics
    runner = driver.runner(config("a", state_dir), Counter())
    driver.turn(runner)
    feed(driver, b"k")
    first = runner.session.producer
    if how == "fatal":
        driver.cluster.faults.fail("commit_transaction", fatal_error())
    else:
        driver.cluster.faults.hang("send_offsets_to_transaction")
    driver.turn(runner)
    assert runner.session.replacements == 1
    assert runner.session.producer is not first
    assert driver.messages(OUT) == []
    driver.turn(runner)
    assert outputs(driver) == [(b"k", b"1")]
    assert stored(runner, b"k", 0) == b"1"


@pytest.mark.parametrize("how", ["fatal", "abort"])
def test_a_record_that_cannot_be_produced_abandons_the_transaction_not_the_process(
    topics: Driver, state_dir: Path | None, how: str
) -> None:
    """The broker fenced the producer (its transaction ran past the timeout) or the transaction
    must abort, and a `produce` in the middle of a turn raises: the process goes on, the
    transaction is aborted (a fenced producer is replaced) and its inputs are read again."""
    driver = topics
    runner = driver.runner(config("a", state_dir), Counter())
    driver.turn(runner)  # assigned
    feed(driver, b"k", b"j", b"k")
    first = runner.session.producer
    driver.cluster.faults.fail("produce", fatal_error() if how == "fatal" else abort_error())
    driver.turn(runner)  # raised out of the turn and stopped the process before
    assert runner.stats.aborts == 1
    assert (runner.session.producer is not first) == (how == "fatal")
    assert driver.messages(OUT) == []
    assert driver.cluster.committed("app").get((IN, 0), 0) == 0
    assert stored(runner, b"k", 0) is None
    driver.turn(runner)
    assert outputs(driver) == [(b"j", b"1"), (b"k", b"1"), (b"k", b"2")]  # each counted once
    assert driver.cluster.committed("app")[(IN, 0)] == 3


def test_a_transaction_that_produced_enough_commits_mid_turn(
    topics: Driver, state_dir: Path | None
) -> None:
    """Units that each produce records (a timer dispatching many occurrences) cannot pile up
    one transaction past `commit_max_output` records: it commits at once, in the turn."""
    driver, counter = topics, Counter()
    cfg = config("a", state_dir)
    runner = driver.runner(RunnerConfig(**{**vars(cfg), "commit_max_output": 3}), counter)
    driver.turn(runner)  # assigned
    visible: list[int] = []
    counter.during = lambda: visible.append(len(driver.messages(OUT)))
    feed(driver, *[f"k{i}".encode() for i in range(7)])
    driver.turn(runner)
    # one output per record (the changelog is written at the commit): a commit every third
    assert visible == [0, 0, 0, 3, 3, 3, 6]
    assert len(outputs(driver)) == 7
    assert driver.cluster.committed("app")[(IN, 0)] == 7


class Grouping(Counter):
    """Forwards each input's key with a group, to partition 0 of OUT whatever its own: held for
    the commit, all of a transaction as one record."""

    def process(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        assert record.key is not None
        ctx.forward(OUT, 0, b"g", record.key, [], group=1)
        self.during()

    def coalescer(self, record_limit: int) -> Coalescer:
        return Coalescer(lambda _k, _g, values: (b"+".join(values), []), 100, record_limit)


def test_records_held_for_the_commit_count_towards_what_a_transaction_produced(
    topics: Driver, state_dir: Path | None
) -> None:
    """A coalescing processor's grouped records wait for the commit (one record per group),
    and a transaction holding `commit_max_output` of them commits, as if they were written."""
    driver, grouping = topics, Grouping()
    cfg = config("a", state_dir)
    runner = driver.runner(RunnerConfig(**{**vars(cfg), "commit_max_output": 3}), grouping)
    driver.turn(runner)  # assigned
    feed(driver, *[f"k{i}".encode() for i in range(7)])
    driver.turn(runner)
    assert [m.value() for m in driver.messages(OUT)] == [b"k0+k1+k2", b"k3+k4+k5", b"k6"]
    assert driver.cluster.committed("app")[(IN, 0)] == 7


def test_a_group_takes_the_records_of_every_partition_the_runner_owns(
    topics: Driver, state_dir: Path | None
) -> None:
    """One transaction spans every task of the runner: so does a group (one coalescer)."""
    driver, grouping = topics, Grouping()
    runner = driver.runner(config("a", state_dir), grouping)
    driver.turn(runner)  # assigned both partitions
    assert len(runner.tasks) == 2
    assert runner.tasks[0].coalescer is runner.tasks[1].coalescer is not None
    driver.produce(IN, b"x", key=b"p0", partition=0)
    driver.produce(IN, b"x", key=b"p1", partition=1)
    driver.turn(runner)
    [one] = [m.value() or b"" for m in driver.messages(OUT)]
    assert sorted(one.split(b"+")) == [b"p0", b"p1"]


def test_a_zombie_that_lost_its_partitions_mid_turn_commits_nothing(
    topics: Driver, tmp_path: Path
) -> None:
    """KIP-447: the group moves on while a turn is open (the member's session ran out); the
    turn's offsets carry the old generation, so its transaction is refused and aborted, and
    the next owner reads the same inputs."""
    driver, counter = topics, Counter()
    a = driver.runner(config("a", tmp_path), counter)
    driver.turn(a)
    feed(driver, b"k")
    b = driver.runner(config("b", tmp_path), Counter())
    counter.during = lambda: driver.cluster.kick("app", "app.a")
    driver.turn(a)  # a's first turn since b joined: a syncs first, then is kicked mid-turn
    counter.during = lambda: None
    assert a.stats.aborts == 1
    assert driver.messages(OUT) == []
    driver.turn(b, a, b)
    assert outputs(driver) == [(b"k", b"1")]
    owners = {p: ("a" if p in a.tasks else "b") for p in (0, 1) if p in a.tasks or p in b.tasks}
    assert owners == {0: "a", 1: "b"}  # range: a then b, one partition each


def test_a_revoked_partition_is_dropped_and_its_next_owner_restores_its_state(
    topics: Driver, state_dir: Path | None
) -> None:
    driver = topics
    a = driver.runner(config("a", state_dir), Counter())
    driver.produce(IN, b"x", key=b"one", partition=1)
    driver.produce(IN, b"x", key=b"one", partition=1)
    driver.turn(a)
    assert sorted(a.tasks) == [0, 1]
    b = driver.runner(config("b", state_dir), Counter())
    driver.turn(b, a)
    assert sorted(a.tasks) == [0]
    assert sorted(b.tasks) == [1]
    assert b.stats.restores[-1].records == 1  # one changelog record per key per transaction
    assert b.stats.restores[-1].from_scratch
    driver.produce(IN, b"x", key=b"one", partition=1)
    driver.turn(b)
    assert outputs(driver) == [(b"one", b"1"), (b"one", b"2"), (b"one", b"3")]


def test_a_crash_between_commit_and_store_apply_is_repaired_by_restore(
    topics: Driver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit is the point of no return: what it made visible must survive a crash before
    RocksDB has it. The restarted process (same id, same files) replays the changelog tail."""
    driver = topics
    a = driver.runner(config("a", tmp_path), Counter())
    feed(driver, b"k")
    driver.turn(a)
    applied_offset = a.tasks[0].store.changelog_offset()
    feed(driver, b"k")

    def crash(_batch: object) -> None:
        raise RuntimeError("the process dies here")

    monkeypatch.setattr(a.tasks[0].store, "apply", crash)
    with pytest.raises(RuntimeError, match="dies"):
        driver.turn(a)
    assert outputs(driver) == [(b"k", b"1"), (b"k", b"2")]  # the commit happened
    driver.crash(a)
    restarted = driver.runner(config("a", tmp_path), Counter())
    feed(driver, b"k")
    driver.turn(restarted)
    restore = next(r for r in restarted.stats.restores if r.partition == 0)
    assert not restore.from_scratch  # from RocksDB's offset, not from the beginning
    assert restore.records == 1  # the one write RocksDB missed
    assert applied_offset is not None
    assert outputs(driver) == [(b"k", b"1"), (b"k", b"2"), (b"k", b"3")]


def test_a_crashed_owners_open_transaction_is_never_seen(topics: Driver, tmp_path: Path) -> None:
    driver, counter = topics, Counter()
    a = driver.runner(config("a", tmp_path), counter)
    driver.turn(a)
    feed(driver, b"k")

    class Died(BaseException):
        pass

    def die() -> None:
        raise Died

    counter.during = die
    with pytest.raises(Died):
        driver.turn(a)  # dies with its transaction open
    driver.crash(a)
    b = driver.runner(config("b", tmp_path), Counter())
    driver.turn(b, times=2)
    assert outputs(driver) == [(b"k", b"1")]


class Alarm(Counter):
    """Sets a timer one second after each record and forwards `fired` when it goes off."""

    def process(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        assert record.key is not None
        ctx.put(record.key, b"armed", now_ms + 1_000)

    def fire(self, ctx: ProcessorContext, key: bytes, now_ms: int) -> None:
        ctx.put(key, b"done", None)
        ctx.forward(OUT, ctx.partition, key, b"fired", [])


@pytest.mark.parametrize("first", ["after assignment", "after an abort"])
def test_a_timer_set_in_the_first_turn_of_a_window_goes_off(
    topics: Driver, state_dir: Path | None, first: str
) -> None:
    """The timer window is loaded before the first turn's records are processed, both when the
    partition is assigned and after an abort has emptied the wheel: a timer set by such a record
    is in the wheel, not only in a batch the store had not seen when the window was read."""
    driver = topics
    runner = driver.runner(config("a", state_dir), Alarm())
    if first == "after an abort":
        driver.turn(runner)  # assigned
        feed(driver, b"k")
        driver.cluster.faults.fail("commit_transaction", abort_error())
        driver.turn(runner)
        assert runner.stats.aborts == 1
    else:
        feed(driver, b"k")
    driver.turn(runner)  # the record is processed (again) and its timer set
    assert stored(runner, b"k", 0) == b"armed"
    driver.clock.advance(1_000)
    driver.turn(runner)
    assert outputs(driver) == [(b"k", b"fired")]


class Batches(Counter):
    """Each input record holds as many units as its value has bytes (a batch of outcomes)."""

    def split(self, record: InputRecord) -> list[InputRecord]:
        assert record.key is not None and record.value is not None
        return [
            InputRecord(IN, record.partition, record.offset, record.key + b"%d" % i, None, [], 0)
            for i in range(len(record.value))
        ]


def test_a_turn_reads_its_units_worth_of_records_however_many_each_holds(topics: Driver) -> None:
    """A turn reads `max_records_per_turn` units of work, not records: with records of 100
    units it reads a few, so the timers are not held up behind 2 000 of them."""
    driver = topics
    cfg = RunnerConfig(
        app="app",
        instance_id="a",
        input_topics=[IN],
        changelog_topic=CHANGELOG,
        state_dir=None,
        commit_interval_ms=0,
        max_records_per_turn=500,
    )
    runner = driver.runner(cfg, Batches())
    driver.turn(runner)  # assigned
    for i in range(16):
        driver.produce(IN, b"u" * 100, key=b"k%d-" % i, partition=0)
    driver.turn(runner)  # one unit per record seen so far: it reads them all
    assert len(outputs(driver)) == 1_600
    for i in range(16, 40):
        driver.produce(IN, b"u" * 100, key=b"k%d-" % i, partition=0)
    driver.turn(runner)
    read = len(outputs(driver)) - 1_600
    assert 0 < read <= 500 + 100  # its budget, give or take the record that passed it
    for _ in range(20):
        driver.turn(runner)
    assert len(outputs(driver)) == 4_000  # nothing left behind


class TogetherBatches(Batches):
    """Takes a record's units as one unit (`Together`); the unit keyed `bad-1` raises."""

    def __init__(self) -> None:
        super().__init__()
        self.together: list[int] = []
        """The units each `process_together` call was given."""
        self.refused: list[bytes | None] = []

    def process_together(
        self, ctx: ProcessorContext, records: Sequence[InputRecord], now_ms: int
    ) -> None:
        self.together.append(len(records))
        for record in records:
            self.process(ctx, record, now_ms)

    def process(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        if record.key == b"bad-1":
            raise RuntimeError("a bug in one entry")
        super().process(ctx, record, now_ms)

    def refuse(
        self, ctx: ProcessorContext, record: InputRecord, exc: Exception, now_ms: int
    ) -> None:
        self.refused.append(record.key)


def test_a_records_entries_are_one_unit_and_each_its_own_when_that_unit_fails(
    topics: Driver, state_dir: Path | None
) -> None:
    """A `Together` processor gets a record's entries in one call; when that call raises,
    what it did is undone and each entry is a unit of its own: the one that raises is refused
    alone, the others counted once."""
    driver = topics
    processor = TogetherBatches()
    runner = driver.runner(config("a", state_dir), processor)
    driver.turn(runner)  # assigned
    driver.produce(IN, b"uuu", key=b"ok-", partition=0)
    driver.produce(IN, b"u", key=b"one-", partition=0)  # a record of one entry: as before
    driver.turn(runner)
    assert processor.together == [3]
    assert outputs(driver) == sorted(
        [(b"ok-0", b"1"), (b"ok-1", b"1"), (b"ok-2", b"1"), (b"one-0", b"1")]
    )
    driver.produce(IN, b"uuu", key=b"bad-", partition=0)
    driver.turn(runner)
    assert processor.together == [3, 3]
    assert processor.refused == [b"bad-1"]
    found = [o for o in outputs(driver) if o[0] is not None and o[0].startswith(b"bad-")]
    assert found == [(b"bad-0", b"1"), (b"bad-2", b"1")]  # the failed unit's writes undone
    assert stored(runner, b"bad-0", 0) == b"1"
    assert stored(runner, b"bad-1", 0) is None
    assert runner.stats.records == 3
