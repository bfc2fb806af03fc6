"""RocksStore.due_between stays cheap under a reaper's churn (regression of issue 16's
profile: 3 ms per call, every turn, from dropping a column family view and from walking
deleted index entries), and stops at the window's end."""

from __future__ import annotations

import struct
from pathlib import Path

from streams.runtime.store import Batch, RocksStore


def _value(wake_ms: int) -> bytes:
    return struct.pack(">q", wake_ms) + b"state"


def test_due_between_reads_only_the_window_among_many_deleted_entries(tmp_path: Path) -> None:
    store = RocksStore(tmp_path / "s")
    try:
        batch = Batch()
        for i in range(2_000):
            batch.values[f"k{i}".encode()] = _value(10_000 + i)
        store.apply(batch)
        gone = Batch()
        for i in range(0, 2_000, 2):  # every other one released: a tombstone in the index
            gone.values[f"k{i}".encode()] = None
        store.apply(gone)
        got = list(store.due_between(10_099, 10_110))
        assert got == [(w, f"k{w - 10_000}".encode()) for w in range(10_101, 10_111, 2)]
        assert list(store.due_between(20_000, 30_000)) == []
        # the view stays usable across many calls and writes (it is kept, not reopened)
        for turn in range(50):
            step = Batch()
            step.values[f"n{turn}".encode()] = _value(50_000 + turn)
            store.apply(step)
            assert list(store.due_between(50_000 + turn - 1, 50_000 + turn)) == [
                (50_000 + turn, f"n{turn}".encode())
            ]
    finally:
        store.close()
    reopened = RocksStore(tmp_path / "s")  # close released the directory's lock
    try:
        assert list(reopened.due_between(50_048, 50_049)) == [(50_049, b"n49")]
    finally:
        reopened.close()
