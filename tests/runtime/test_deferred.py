"""Keys left unwritten on a task (streams/runtime/deferred.py): the replay point is the oldest
input whose effect is only in memory, a write or an abort ends the wait, an undone unit puts
back what it changed."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streams.runtime.deferred import Deferred, replay_key
from streams.runtime.store import MemoryStore
from streams.runtime.task import Task

NOW = 1_000_000
T = "outcomes"


def task() -> Task:
    t = Task(0, MemoryStore(), NOW, 60_000)
    out: list[tuple[Any, ...]] = []
    t._emit = lambda *a: out.append(a)
    t.changelog = "changelog"
    t.replay_topics = (T,)
    return t


def test_the_replay_point_is_the_oldest_input_not_written_and_moves_as_keys_are_written() -> None:
    t = task()
    t.defer(b"a", T, 10, NOW, "a1")
    t.defer(b"b", T, 11, NOW, "b1")
    t.defer(b"a", T, 12, NOW + 1, "a2")  # again: keeps its place and offset
    assert t.deferred_state(b"a") == "a2"
    t.store_replay_points()
    assert t.replay_point(T) == 10
    t.put(b"a", b"written", None)  # its write carries it: it waits no more
    assert t.deferred_state(b"a") is None
    t.store_replay_points()
    assert t.replay_point(T) == 11
    t.put(b"b", b"written", None)
    t.store_replay_points()
    assert t.replay_point(T) is None
    assert t.get(replay_key(T)) is None


def test_a_point_not_changed_is_not_written_again() -> None:
    t = task()
    t.defer(b"a", T, 10, NOW, "a1")
    t.store_replay_points()
    t.committed(None)
    t.store_replay_points()
    assert replay_key(T) not in t.batch.values  # nothing for the changelog this time


def test_an_undone_unit_puts_back_the_wait_it_ended_and_drops_the_one_it_began() -> None:
    t = task()
    t.defer(b"a", T, 10, NOW, "a1")

    def work() -> None:
        t.put(b"a", b"written", None)
        t.defer(b"b", T, 11, NOW, "b1")
        raise RuntimeError("boom")

    assert not t.attempt(work, lambda exc: None)
    assert t.deferred_state(b"a") == "a1"
    assert t.deferred_state(b"b") is None
    t.store_replay_points()
    assert t.replay_point(T) == 10


def test_an_undone_inner_unit_leaves_what_the_outer_one_deferred() -> None:
    t = task()

    def inner() -> None:
        t.defer(b"b", T, 12, NOW, "b1")
        raise RuntimeError("boom")

    def outer() -> None:
        t.defer(b"a", T, 11, NOW, "a1")
        t.attempt(inner, lambda exc: None)

    assert t.attempt(outer, lambda exc: None)
    assert t.deferred_state(b"a") == "a1"
    assert t.deferred_state(b"b") is None


def test_an_abort_forgets_every_wait() -> None:
    t = task()
    t.defer(b"a", T, 10, NOW, "a1")
    t.reset_after_abort(NOW)
    assert t.deferred_state(b"a") is None
    assert len(t.deferred) == 0


def test_keys_waiting_longer_than_a_cutoff_come_oldest_first() -> None:
    d = Deferred()
    d.defer(b"a", T, 1, 100, "a")
    d.defer(b"b", T, 2, 200, "b")
    d.defer(b"c", T, 3, 300, "c")
    assert d.older_than(250) == [b"a", b"b"]
    assert d.waiting_since() == 100


OPS = st.lists(
    st.tuples(st.sampled_from(["defer", "write", "undo"]), st.sampled_from([b"a", b"b", b"c"])),
    max_size=30,
)


@given(ops=OPS)
def test_the_point_is_always_the_lowest_offset_of_a_key_still_waiting(
    ops: list[tuple[str, bytes]],
) -> None:
    """Against a model: each waiting key's first offset since its last write; the point is the
    lowest of them, whatever order undos put entries back in."""
    d = Deferred()
    model: dict[bytes, int] = {}
    for offset, (op, key) in enumerate(ops, 1):
        if op == "defer":
            d.defer(key, T, offset, offset, None)
            model.setdefault(key, offset)
        elif op == "write":
            d.written(key)
            model.pop(key, None)
        else:  # a unit that wrote the key and was undone: the entry goes back as it was
            before = d.written(key)
            d.restore(key, before)
        assert d.points([T]) == {T: min(model.values(), default=None)}
        assert sorted(d.older_than(offset + 1)) == sorted(model)
    assert d.points([T]) == {T: min(model.values(), default=None)}
