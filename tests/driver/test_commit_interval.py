"""The runtime's transactions span turns (streams/runtime/loop.py): one commits on its interval,
on its record count or when a processor asks; it sends only the input positions that moved, and
changelogs each key once, with its last value."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams.runtime.context import ProcessorContext
from streams.runtime.loop import Runner
from streams.runtime.records import InputRecord
from testkit.driver import Driver
from tests.driver.test_runtime_loop import CHANGELOG, IN, OUT, Counter, config, feed, outputs

INTERVAL = 100


class Alarm(Counter):
    """Counts like `Counter`; b"in:<ms>" sets a timer <ms> from now, b"del" deletes the key,
    b"now" asks for a commit at the end of the turn; a firing forwards b"fired"."""

    def process(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        assert record.key is not None
        value = record.value or b""
        if value.startswith(b"in:"):
            ctx.put(record.key, b"armed", now_ms + int(value[3:]))
        elif value == b"del":
            ctx.put(record.key, None, None)
        elif value == b"now":
            ctx.forward(OUT, ctx.partition, record.key, b"now", [])
            ctx.commit_soon()
        else:
            super().process(ctx, record, now_ms)

    def fire(self, ctx: ProcessorContext, key: bytes, now_ms: int) -> None:
        ctx.put(key, b"done", None)
        ctx.forward(OUT, ctx.partition, key, b"fired", [])


@pytest.fixture
def topics(driver: Driver) -> Driver:
    driver.create_topic(IN, 2)
    driver.create_topic(OUT, 2)
    driver.create_topic(CHANGELOG, 2)
    return driver


class Calls:
    """What the runner's transactional producer was asked: transactions and offsets sent."""

    def __init__(self, runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
        self.begun = 0
        self.offsets: list[list[tuple[str, int, int]]] = []
        producer = runner.session.producer
        begin: Callable[[], None] = producer.begin_transaction
        send: Callable[..., None] = producer.send_offsets_to_transaction

        def counting_begin() -> None:
            self.begun += 1
            begin()

        def recording_send(positions: list[Any], *args: Any) -> None:
            self.offsets.append([(tp.topic, tp.partition, tp.offset) for tp in positions])
            send(positions, *args)

        monkeypatch.setattr(producer, "begin_transaction", counting_begin)
        monkeypatch.setattr(producer, "send_offsets_to_transaction", recording_send)


def runner(driver: Driver, processor: Counter | None = None, **cfg: Any) -> Runner:
    cfg.setdefault("commit_interval_ms", INTERVAL)
    c = config("a", None)
    for name, value in cfg.items():
        setattr(c, name, value)
    r = driver.runner(c, processor or Alarm())
    driver.turn(r)  # assigned, and the first maintenance step done
    r.commit_now()
    return r


def turns(driver: Driver, r: Runner) -> None:
    """A turn, then one more after the commit interval: what the first did is committed."""
    driver.turn(r)
    driver.advance(INTERVAL)
    driver.turn(r)


def test_a_turn_with_nothing_to_do_opens_no_transaction(
    topics: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = runner(topics)
    calls = Calls(r, monkeypatch)
    for _ in range(3):
        topics.advance(INTERVAL)
        topics.turn(r)
    assert (calls.begun, calls.offsets) == (0, [])
    assert not r.session.open


def test_what_a_transaction_produced_is_visible_at_the_commit_after_the_interval(
    topics: Driver,
) -> None:
    r = runner(topics)
    feed(topics, b"k")
    topics.turn(r)
    topics.advance(INTERVAL - 1)
    feed(topics, b"k")
    topics.turn(r)  # one transaction, still inside its interval
    assert outputs(topics) == []
    assert topics.cluster.committed("app") == {(IN, 0): 0}
    topics.advance(1)
    topics.turn(r)  # nothing new read: the open transaction commits all the same
    assert outputs(topics) == [(b"k", b"1"), (b"k", b"2")]
    assert topics.cluster.committed("app") == {(IN, 0): 2}
    assert r.tasks[0].get(b"k") == b"2"


def test_a_transaction_commits_once_it_holds_enough_records(topics: Driver) -> None:
    r = runner(topics, commit_interval_ms=60_000, commit_max_records=3)
    feed(topics, b"a", b"b")
    topics.turn(r)
    assert outputs(topics) == []
    feed(topics, b"c")
    topics.turn(r)
    assert len(outputs(topics)) == 3


def test_a_timer_firing_counts_toward_the_record_trigger(topics: Driver) -> None:
    r = runner(topics, commit_interval_ms=60_000, commit_max_records=2)
    topics.produce(IN, b"in:10", key=b"t", partition=0)
    topics.turn(r)
    topics.advance(10)
    topics.turn(r)  # one record and one firing
    assert outputs(topics) == [(b"t", b"fired")]


def test_a_processor_can_ask_for_the_commit_at_the_end_of_the_turn(topics: Driver) -> None:
    r = runner(topics, commit_interval_ms=60_000)
    topics.produce(IN, b"now", key=b"k", partition=0)
    topics.turn(r)
    assert outputs(topics) == [(b"k", b"now")]
    assert not r.tasks[0].urgent
    feed(topics, b"k")
    topics.turn(r)  # no longer urgent: waits for the interval
    assert outputs(topics) == [(b"k", b"now")]


def test_only_the_positions_that_moved_are_sent_and_always_at_least_one(
    topics: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = runner(topics)
    calls = Calls(r, monkeypatch)
    topics.produce(IN, b"x", key=b"k", partition=1)
    topics.produce(IN, b"in:500", key=b"t", partition=0)
    turns(topics, r)
    assert [sorted(sent) for sent in calls.offsets] == [[(IN, 0, 1), (IN, 1, 1)]]
    feed(topics, b"k")
    turns(topics, r)
    assert calls.offsets[-1] == [(IN, 0, 2)]  # partition 1 did not move
    topics.advance(500)
    turns(topics, r)  # the timer fires: no input moved, one committed position goes along
    assert (b"t", b"fired") in outputs(topics)
    assert len(calls.offsets) == 3
    [(topic, partition, offset)] = calls.offsets[-1]
    assert offset == {(IN, 0): 2, (IN, 1): 1}[(topic, partition)]
    assert topics.cluster.committed("app") == {(IN, 0): 2, (IN, 1): 1}


def changelog(driver: Driver, key: bytes) -> list[bytes | None]:
    return [m.value() for m in driver.messages(CHANGELOG) if m.key() == key]


def test_a_key_written_twice_in_a_transaction_is_changelogged_once_with_its_last_value(
    topics: Driver, tmp_path: Path
) -> None:
    r = runner(topics, state_dir=tmp_path / "a")
    feed(topics, b"k", b"k", b"k")
    turns(topics, r)
    [last] = changelog(topics, b"k")
    assert last is not None and last.endswith(b"3")
    topics.crash(r)
    Path(tmp_path / "a").rename(tmp_path / "lost")  # restore from the changelog alone
    restarted = runner(topics, state_dir=tmp_path / "a")
    assert restarted.tasks[0].get(b"k") == b"3"


def test_a_put_then_a_delete_in_one_transaction_is_a_tombstone(topics: Driver) -> None:
    r = runner(topics)
    feed(topics, b"k")
    turns(topics, r)
    feed(topics, b"k")
    topics.produce(IN, b"del", key=b"k", partition=0)
    turns(topics, r)
    assert changelog(topics, b"k")[1:] == [None]
    assert r.tasks[0].get(b"k") is None
    topics.crash(r)
    assert runner(topics).tasks[0].get(b"k") is None


def test_a_timer_set_beyond_the_loaded_window_in_an_open_transaction_still_fires(
    topics: Driver,
) -> None:
    """The store's due index has the open batch's timers only after the commit; a window loaded
    meanwhile takes them from the batch."""
    r = runner(topics, commit_interval_ms=60_000, window_ms=1_000)
    topics.produce(IN, b"in:1500", key=b"t", partition=0)
    topics.turn(r)  # beyond the window loaded up to now + 1 000
    topics.advance(1_000)
    topics.turn(r)  # the window moves past it, the transaction still open
    topics.advance(500)
    topics.turn(r)
    topics.advance(60_000)
    topics.turn(r)
    assert outputs(topics) == [(b"t", b"fired")]


def test_close_commits_what_the_last_turn_left_open(topics: Driver) -> None:
    r = runner(topics, commit_interval_ms=60_000)
    feed(topics, b"k")
    topics.turn(r)
    topics.stop(r)
    assert outputs(topics) == [(b"k", b"1")]
    assert topics.cluster.committed("app") == {(IN, 0): 1}


def test_an_idle_turn_waits_for_input_no_longer_than_the_open_transaction_has_left(
    topics: Driver,
) -> None:
    r = runner(topics)
    assert r._poll_timeout_s() == r.cfg.idle_poll_s  # nothing open
    feed(topics, b"k")
    topics.turn(r)
    assert r._poll_timeout_s() == r.cfg.idle_poll_s  # 100 ms left: the usual wait
    topics.advance(INTERVAL - 5)
    assert r._poll_timeout_s() == pytest.approx(0.005)
    topics.advance(10)
    assert r._poll_timeout_s() == 0.0


def test_a_rebalance_aborts_the_open_transaction_and_its_inputs_are_read_again_once(
    topics: Driver,
) -> None:
    a = runner(topics)
    topics.produce(IN, b"x", key=b"k", partition=0)
    topics.produce(IN, b"x", key=b"j", partition=1)
    topics.turn(a)  # both read, the transaction still open
    assert a.session.open
    c = config("b", None)
    c.commit_interval_ms = INTERVAL
    b = topics.runner(c, Counter())
    topics.turn(b, a)  # the rebalance: a's open transaction is aborted, not committed
    assert a.stats.aborts == 1
    assert outputs(topics) == []
    topics.produce(IN, b"x", key=b"j", partition=1)
    for _ in range(3):
        topics.turn(b, a)  # a commits after b: it must not send the position it lost
        topics.advance(INTERVAL)
    topics.turn(b, a)
    assert outputs(topics) == [(b"j", b"1"), (b"j", b"2"), (b"k", b"1")]
    assert topics.cluster.committed("app") == {(IN, 0): 1, (IN, 1): 2}
