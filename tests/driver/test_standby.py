"""Issue 30, item 1: standby replicas. A process keeps a warm copy of every partition's store it
does not own, tailing the changelog; when it takes a partition over (its owner died), the
restore starts from the copy and replays only what the copy had not applied yet, not the
whole changelog. On the in-memory cluster, RocksDB stores."""

from __future__ import annotations

from pathlib import Path

from streams.runtime.config import RunnerConfig
from streams.runtime.context import ProcessorContext
from streams.runtime.loop import Runner
from streams.runtime.records import InputRecord
from streams.runtime.store import pack
from testkit.driver import Driver
from tests.driver.test_runtime_loop import Counter

IN, OUT, CHANGELOG = "in", "out", "app-changelog"


class Timed(Counter):
    """Counter's counts, stored with a wake time of count seconds (so the due index of a copy
    can be checked)."""

    def process(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        assert record.key is not None
        count = int(ctx.get(record.key) or b"0") + 1
        ctx.put(record.key, str(count).encode(), now_ms + count * 1_000_000)
        ctx.forward(OUT, ctx.partition, record.key, str(count).encode(), [])


def config(instance: str, root: Path, standby: bool = True) -> RunnerConfig:
    return RunnerConfig(
        app="app",
        instance_id=instance,
        input_topics=[IN],
        changelog_topic=CHANGELOG,
        state_dir=root / instance,
        commit_interval_ms=0,
        standby_partitions=2 if standby else 0,
    )


def two(driver: Driver, root: Path, standby: bool = True) -> tuple[Runner, Runner]:
    for topic in (IN, OUT, CHANGELOG):
        driver.create_topic(topic, 2)
    a = driver.runner(config("a", root, standby), Timed())
    driver.turn(a)
    b = driver.runner(config("b", root, standby), Timed())
    driver.turn(b, a, b)
    assert (sorted(a.tasks), sorted(b.tasks)) == ([0], [1])  # range: one partition each
    return a, b


def outputs(driver: Driver) -> list[tuple[bytes | None, bytes | None]]:
    return sorted((m.key(), m.value()) for m in driver.messages(OUT))


def test_each_process_keeps_a_copy_of_what_it_does_not_own(driver: Driver, tmp_path: Path) -> None:
    a, b = two(driver, tmp_path)
    assert a.standbys is not None and b.standbys is not None
    assert sorted(a.standbys.copies) == [1]  # given up in the rebalance: followed now
    assert sorted(b.standbys.copies) == [0]
    for key in (b"k", b"k", b"k", b"j"):
        driver.produce(IN, b"x", key=key, partition=0)
    driver.turn(a)
    now = driver.now_ms()
    driver.turn(b, times=2)  # its copy tails the changelog
    copy = b.standbys.copies[0].store
    assert copy.get(b"k") == pack(now + 3_000_000, b"3")
    assert copy.get(b"j") == pack(now + 1_000_000, b"1")
    assert list(copy.due_between(0, now + 10_000_000)) == [
        (now + 1_000_000, b"j"),
        (now + 3_000_000, b"k"),
    ]
    assert b.standbys.lag == {0: 0}


def test_a_take_over_restores_from_the_copy_not_from_the_start(
    driver: Driver, tmp_path: Path
) -> None:
    a, b = two(driver, tmp_path)
    for key in (b"k", b"k", b"k", b"j"):
        driver.produce(IN, b"x", key=key, partition=0)
    driver.turn(a)
    driver.turn(b, times=2)
    driver.produce(IN, b"x", key=b"k", partition=0)
    driver.turn(a)  # written after b's copy last read: the tail a take-over replays
    driver.crash(a)
    driver.turn(b)
    assert sorted(b.tasks) == [0, 1]
    assert b.standbys is not None and b.standbys.copies == {}
    took = next(r for r in b.stats.restores if r.partition == 0)
    assert not took.from_scratch
    assert took.records <= 1  # the tail only (the copy may have read it already)
    driver.produce(IN, b"x", key=b"k", partition=0)
    driver.turn(b)
    assert (b"k", b"5") in outputs(driver)  # the count went on from the copy: nothing lost
    assert outputs(driver).count((b"k", b"5")) == 1


def test_without_standbys_a_take_over_restores_the_whole_log(
    driver: Driver, tmp_path: Path
) -> None:
    """The same take-over with `standby_partitions=0`: from scratch, every changelog record."""
    a, b = two(driver, tmp_path, standby=False)
    assert a.standbys is None and b.standbys is None
    for key in (b"k", b"k", b"k", b"j"):
        driver.produce(IN, b"x", key=key, partition=0)
        driver.turn(a)  # a transaction each: four changelog records
    driver.crash(a)
    driver.turn(b)
    took = next(r for r in b.stats.restores if r.partition == 0)
    assert took.from_scratch and took.records == 4


def test_a_copy_caught_up_midway_is_completed_as_far_as_it_got(
    driver: Driver, tmp_path: Path
) -> None:
    """b's copy of partition 0 has read part of a long log (values only, a rebuild) when a
    dies: the copy is indexed and given its offset, and the restore goes on from there."""
    for topic in (IN, OUT, CHANGELOG):
        driver.create_topic(topic, 2)
    a = driver.runner(config("a", tmp_path), Timed())
    driver.turn(a)
    for n in range(30):
        driver.produce(IN, b"x", key=b"k%d" % n, partition=0)
        driver.turn(a)  # thirty changelog records on partition 0
    b = driver.runner(config("b", tmp_path), Timed())
    assert b.standbys is not None
    b.standbys.max_records = 10  # records applied a turn
    driver.turn(b, a, b)  # b takes partition 1 and follows 0: ten records a turn
    copy = b.standbys.copies[0]
    assert copy.rebuilding and copy.store.changelog_offset() is None
    copied = [n for n in range(30) if copy.store.get(b"k%d" % n) is not None]
    assert copied == list(range(len(copied))) and 0 < len(copied) < 30  # a prefix of the log
    driver.crash(a)
    driver.turn(b)
    took = next(r for r in b.stats.restores if r.partition == 0)
    assert not took.from_scratch and took.records == 30 - len(copied)  # from where it got to
    task = b.tasks[0]
    assert all(task.get(b"k%d" % n) == b"1" for n in range(30))
    assert len(list(task.store.due_between(0, 2**62))) == 30
