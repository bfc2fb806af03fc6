"""The timer wheel never fires early; both stores keep the same contract."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.runtime.store import Batch, MemoryStore, RocksStore, Store, pack, payload_of, wake_of
from streams.runtime.wheel import TimerWheel

START = 1_000_000


@given(
    dues=st.lists(st.integers(START - 500, START + 60_000), max_size=200),
    steps=st.lists(st.integers(0, 3_000), min_size=1, max_size=50),
)
def test_wheel_fires_each_entry_once_never_early(dues: list[int], steps: list[int]) -> None:
    wheel = TimerWheel(START)
    for i, due in enumerate(dues):
        assert wheel.insert(due, str(i).encode())
    now, fired = START, {}
    for step in steps:
        now += step
        for due, key in wheel.pop_due(now, limit=37):
            assert due <= now  # never early
            assert key not in fired  # never twice
            fired[key] = due
    for due, key in wheel.pop_due(now + 120_000, limit=10_000):
        fired[key] = due
    assert fired == {str(i).encode(): d for i, d in enumerate(dues)}


def test_wheel_refuses_entries_beyond_its_span() -> None:
    wheel = TimerWheel(START, tick_ms=10, slots=100)
    assert not wheel.insert(START + 5_000, b"far")
    assert wheel.insert(START + 500, b"near")
    assert wheel.size == 1


@pytest.fixture(params=["memory", "rocksdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else RocksStore(tmp_path / "p0")
    yield s
    s.close()


def test_store_contract(store: Store) -> None:
    assert store.changelog_offset() is None
    batch = Batch()
    batch.put(b"a", pack(300, b"A"))
    batch.put(b"b", pack(100, b"B"))
    batch.put(b"c", pack(None, b"C"))
    batch.changelog_offset = 41
    store.apply(batch)
    assert list(store.due_between(0, 1_000)) == [(100, b"b"), (300, b"a")]
    assert list(store.due_between(100, 299)) == []  # after 100, up to 299
    value = store.get(b"a")
    assert value is not None
    assert (wake_of(value), payload_of(value)) == (300, b"A")
    assert store.changelog_offset() == 41
    assert store.count() == 3
    move = Batch()
    move.put(b"a", pack(50, b"A2"))  # the due index moves with the value
    move.put(b"b", None)
    store.apply(move)
    assert list(store.due_between(0, 1_000)) == [(50, b"a")]
    assert store.get(b"b") is None
    assert store.changelog_offset() == 41


def test_rocksdb_state_survives_reopen(tmp_path: Path) -> None:
    s = RocksStore(tmp_path / "p1")
    batch = Batch(changelog_offset=9)
    batch.put(b"k", pack(7, b"v"))
    s.apply(batch)
    s.close()
    again = RocksStore(tmp_path / "p1")
    assert list(again.due_between(0, 10)) == [(7, b"k")]
    assert again.changelog_offset() == 9
    again.close()


def test_a_new_task_fires_what_fell_due_while_nobody_owned_the_partition() -> None:
    from streams.runtime.task import Task  # noqa: PLC0415

    now = 1_800_000_000_000  # a real instant: wakes an hour back stay positive
    store = MemoryStore()
    batch = Batch()
    batch.put(b"overdue", pack(now - 3_600_000, b"x"))  # due an hour before we took over
    batch.put(b"soon", pack(now + 5_000, b"y"))
    batch.put(b"later", pack(now + 3_600_000, b"z"))
    store.apply(batch)
    task = Task(0, store, now, window_ms=60_000)
    assert task.due(now, limit=100) == [b"overdue"]
    assert task.due(now + 4_999, limit=100) == []
    assert task.due(now + 5_000, limit=100) == [b"soon"]
    assert task.due(now + 3_600_000, limit=100) == [b"later"]


def test_entries_due_in_the_same_tick_leave_tenant_by_tenant() -> None:
    from streams.runtime.wheel import TimerWheel, interleave  # noqa: PLC0415

    wheel = TimerWheel(start_ms=0)
    for i in range(1000):
        wheel.insert(500, f"flood/job-{i:04d}".encode())
    for t in range(3):
        wheel.insert(500, f"small{t}/job".encode())
    first = [key for _due, key in wheel.pop_due(500, 6)]
    assert sorted(first[:4]) == [b"flood/job-0000", b"small0/job", b"small1/job", b"small2/job"]
    rest = [key for _due, key in wheel.pop_due(500, 10_000)]
    assert len(rest) == 997
    assert rest == sorted(rest)  # the flood's own order is kept
    assert interleave([(1, b"a/1"), (1, b"a/2")]) == [(1, b"a/1"), (1, b"a/2")]
