"""Issue 30, item 2: a restore from the changelog's start writes without reading back, indexes
due times once at the end, and restores the partitions assigned together with one consumer.

The rebuilt store must be the store that applying the same records one batch at a time gives
(values, due index, offset), whatever the log holds: keys rewritten with other wake times,
deleted, deleted and written again. A crash midway must never leave a store that looks
complete."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.runtime.restore import restore, restore_all
from streams.runtime.store import Batch, MemoryStore, RocksStore, Store, pack
from testkit.driver import Driver

KEYS = [b"t/a", b"t/b", b"~def/t/a", b"t/c"]
write = st.tuples(
    st.sampled_from(KEYS),
    st.one_of(st.none(), st.tuples(st.one_of(st.none(), st.integers(0, 10**13)), st.binary())),
)


def as_value(w: tuple[int | None, bytes] | None) -> bytes | None:
    return None if w is None else pack(w[0], w[1])


def contents(store: Store) -> tuple[dict[bytes, bytes | None], list[tuple[int, bytes]], int | None]:
    return (
        {k: store.get(k) for k in KEYS},
        list(store.due_between(-1, 10**14)),
        store.changelog_offset(),
    )


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(write, max_size=6), max_size=6))
def test_a_rebuild_gives_the_store_that_applying_gives(
    batches: list[list[tuple[bytes, tuple[int | None, bytes] | None]]],
) -> None:
    with tempfile.TemporaryDirectory() as root:
        applied, rebuilt = RocksStore(Path(root) / "a"), RocksStore(Path(root) / "b")
        offset = 0
        for writes in batches:
            batch = Batch()
            for key, w in writes:
                batch.put(key, as_value(w))
                offset += 1
            batch.changelog_offset = offset
            applied.apply(batch)
            rebuilt.rebuild(batch)
            assert rebuilt.changelog_offset() is None  # not complete before `rebuilt`
        rebuilt.rebuilt(offset if batches else None)
        try:
            if batches:
                assert contents(rebuilt) == contents(applied)
            else:
                assert contents(rebuilt) == ({k: None for k in KEYS}, [], None)
        finally:
            applied.close()
            rebuilt.close()


def test_a_rebuild_cut_short_leaves_a_store_that_is_rebuilt_again(tmp_path: Path) -> None:
    """The process dies after some of a rebuild's writes: the store has keys but no offset, so
    the next restore wipes it and starts over (a key only the dead rebuild wrote is gone)."""
    driver = Driver()
    topic = driver.create_topic("changelog", 1)
    driver.produce(topic, pack(500, b"A"), key=b"t/a", partition=0)
    half = RocksStore(tmp_path / "0")
    half.rebuild(Batch({b"t/zombie": pack(100, b"Z")}))
    half.close()

    def reopen(wipe: bool) -> Store:
        if wipe:
            RocksStore.wipe(tmp_path / "0")
        return RocksStore(tmp_path / "0")

    store, done = restore(reopen(False), reopen, driver.clients, topic, 0)
    try:
        assert done.from_scratch
        assert store.get(b"t/zombie") is None
        assert store.get(b"t/a") == pack(500, b"A")
        assert list(store.due_between(0, 1_000)) == [(500, b"t/a")]
        assert store.changelog_offset() == 0
    finally:
        store.close()


def test_partitions_assigned_together_are_restored_together(tmp_path: Path) -> None:
    """Three partitions: one rebuilt from scratch (a rewrite and a delete in its log), one from
    its stored offset, one with an empty log. Each ends where its log ends."""
    driver = Driver()
    topic = driver.create_topic("changelog", 3)
    for key, value in [(b"t/a", pack(300, b"1")), (b"t/b", pack(200, b"B"))]:
        driver.produce(topic, value, key=key, partition=0)
    driver.produce(topic, pack(100, b"2"), key=b"t/a", partition=0)  # a rewrite, earlier wake
    driver.produce(topic, None, key=b"t/b", partition=0)  # and a delete
    driver.produce(topic, pack(700, b"C"), key=b"t/c", partition=1)
    warm = MemoryStore()
    warm.apply(Batch({b"t/c": pack(700, b"C")}, changelog_offset=0))
    driver.produce(topic, pack(900, b"D"), key=b"t/d", partition=1)  # its tail
    seen: dict[int, tuple[int, int]] = {}

    def reopen(p: int, wipe: bool) -> Store:
        if wipe:
            RocksStore.wipe(tmp_path / str(p))
        return RocksStore(tmp_path / str(p))

    stores: dict[int, Store] = {0: reopen(0, False), 1: warm, 2: reopen(2, False)}
    done = restore_all(
        stores,
        reopen,
        driver.clients,
        topic,
        progress=lambda p, d, t: seen.__setitem__(p, (d, t)),
    )
    try:
        cold, _ = done[0]
        assert list(cold.due_between(0, 1_000)) == [(100, b"t/a")]
        assert cold.get(b"t/a") == pack(100, b"2") and cold.get(b"t/b") is None
        assert cold.changelog_offset() == 3
        assert done[1][0] is warm
        assert list(warm.due_between(0, 1_000)) == [(700, b"t/c"), (900, b"t/d")]
        assert warm.changelog_offset() == 1
        assert {p: (r.records, r.from_scratch) for p, (_, r) in done.items()} == {
            0: (4, True),
            1: (1, False),
            2: (0, True),
        }
        assert seen == {0: (4, 4), 1: (1, 1)}  # the empty one had nothing to replay
        assert done[2][0].changelog_offset() is None
    finally:
        for store, _ in done.values():
            store.close()
