"""Per-partition state: key -> value, plus a due index `(wake_ms, key)` for range scans.

A stored value (and its changelog record) is the 8-byte wake time (-1: none) followed by the
processor's bytes, so the due index can be rebuilt from values alone and moved on every write.

Writes are collected in a `Batch` while a transaction is open and applied only after it commits,
together with the changelog offset they correspond to, in one atomic RocksDB WriteBatch. A crash
between commit and apply loses nothing: restore replays the changelog tail from that offset.

`RocksStore` is the real thing (rocksdict, column families `default`, `due`, `meta`);
`MemoryStore` is the same contract in dicts, for tests of processors without a disk.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rocksdict import Options, Rdict, ReadOptions, WriteBatch, WriteOptions

_OFFSET_KEY = b"changelog-offset"


def due_key(wake_ms: int, key: bytes) -> bytes:
    return struct.pack(">q", wake_ms) + key


def pack(wake_ms: int | None, payload: bytes) -> bytes:
    return struct.pack(">q", -1 if wake_ms is None else wake_ms) + payload


def wake_of(value: bytes | None) -> int | None:
    if value is None:
        return None
    wake: int = struct.unpack(">q", value[:8])[0]
    return None if wake < 0 else wake


def payload_of(value: bytes) -> bytes:
    return value[8:]


@dataclass
class Batch:
    """Writes of one transaction for one partition (packed values; None deletes)."""

    values: dict[bytes, bytes | None] = field(default_factory=dict)
    changelog_offset: int | None = None

    def put(self, key: bytes, value: bytes | None) -> None:
        self.values[key] = value

    def __bool__(self) -> bool:
        return bool(self.values) or self.changelog_offset is not None


class Store(Protocol):
    def get(self, key: bytes) -> bytes | None: ...
    def due_between(self, after_ms: int, until_ms: int) -> Iterator[tuple[int, bytes]]: ...
    def apply(self, batch: Batch) -> None: ...
    def rebuild(self, batch: Batch) -> None:
        """Part of a store rebuilt from the changelog's first record: its values only (nothing
        read back, no due index, no offset: a crash midway leaves a store without an offset,
        rebuilt again). `rebuilt` ends it."""
        ...

    def rebuilt(self, changelog_offset: int | None) -> None:
        """The rebuild is complete up to `changelog_offset` (None: the log was empty): index
        the due times, record the offset."""
        ...

    def is_empty(self) -> bool: ...
    def changelog_offset(self) -> int | None: ...
    def count(self) -> int: ...
    def keys_after(self, after: bytes, limit: int) -> list[bytes]: ...
    def close(self) -> None: ...


class MemoryStore:
    def __init__(self) -> None:
        self.values: dict[bytes, bytes] = {}
        self.due: dict[bytes, int] = {}
        self.offset: int | None = None

    def get(self, key: bytes) -> bytes | None:
        return self.values.get(key)

    def due_between(self, after_ms: int, until_ms: int) -> Iterator[tuple[int, bytes]]:
        hits = sorted((w, k) for k, w in self.due.items() if after_ms < w <= until_ms)
        yield from hits

    def apply(self, batch: Batch) -> None:
        for key, value in batch.values.items():
            self.due.pop(key, None)
            if value is None:
                self.values.pop(key, None)
                continue
            self.values[key] = value
            if (wake := wake_of(value)) is not None:
                self.due[key] = wake
        if batch.changelog_offset is not None:
            self.offset = batch.changelog_offset

    def rebuild(self, batch: Batch) -> None:
        self.apply(Batch(batch.values))

    def rebuilt(self, changelog_offset: int | None) -> None:
        self.offset = changelog_offset

    def is_empty(self) -> bool:
        return not self.values and self.offset is None

    def changelog_offset(self) -> int | None:
        return self.offset

    def keys_after(self, after: bytes, limit: int) -> list[bytes]:
        return sorted(k for k in self.values if k > after)[:limit]

    def count(self) -> int:
        return len(self.values)

    def close(self) -> None:
        pass


MEMTABLE_BYTES = 8 * 2**20
"""Per column family. RocksDB's 64 MiB default, times three families times one store per
partition, made a process's RSS follow its partition count (750 MiB at 12 partitions)."""


_NO_WAL = WriteOptions()
_NO_WAL.disable_wal = True  # type: ignore[method-assign,assignment]  # a property; the stub says method


def _options() -> Options:
    opts = Options(raw_mode=True)
    opts.set_write_buffer_size(MEMTABLE_BYTES)
    opts.set_max_write_buffer_number(2)
    return opts


class RocksStore:
    """One RocksDB per partition. Opening takes the directory's lock: one owner at a time."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        opts = _options()
        opts.create_if_missing(True)
        opts.create_missing_column_families(True)
        cfs = {"due": _options(), "meta": _options()}
        self._db: Rdict | None = Rdict(str(path), options=opts, column_families=cfs)
        self._due = self._db.get_column_family_handle("due")
        self._meta = self._db.get_column_family_handle("meta")
        self._due_view: Rdict | None = self._db.get_column_family("due")
        """Kept open: dropping a column family view costs ~5 ms (a flush, it seems), and
        `due_between` runs every turn (it was a reaper's main cost)."""

    @property
    def db(self) -> Rdict:
        if self._db is None:
            raise RuntimeError(f"store {self.path} is closed")
        return self._db

    def get(self, key: bytes) -> bytes | None:
        value = self.db.get(key)
        return bytes(value) if value is not None else None

    def due_between(self, after_ms: int, until_ms: int) -> Iterator[tuple[int, bytes]]:
        if self._due_view is None:
            raise RuntimeError(f"store {self.path} is closed")
        bounds = ReadOptions()
        # Stop at the window's end instead of walking deleted index entries (a reaper deletes
        # one per released lease) up to the next live key.
        bounds.set_iterate_upper_bound(struct.pack(">q", until_ms + 1))
        it = self._due_view.iter(bounds)
        it.seek(struct.pack(">q", after_ms + 1))
        try:
            while it.valid():
                raw = bytes(it.key())
                wake = struct.unpack(">q", raw[:8])[0]
                if wake > until_ms:
                    break
                yield wake, raw[8:]
                it.next()
        finally:
            del it

    def apply(self, batch: Batch) -> None:
        wb = WriteBatch(raw_mode=True)
        get, due = self.db.get, self._due
        for key, value in batch.values.items():
            old = get(key)
            if value is None:
                wb.delete(key)
            else:
                wb.put(key, value)
            # a value starts with its wake time, big-endian: its first 8 bytes (sign bit clear:
            # a time, -1: none) are the due index's prefix, compared as they are
            was = old[:8] if old is not None and old[0] < 0x80 else None
            now = value[:8] if value is not None and value[0] < 0x80 else None
            if was == now:
                continue
            if was is not None:
                wb.delete(was + key, due)
            if now is not None:
                wb.put(now + key, b"", due)
        if batch.changelog_offset is not None:
            wb.put(_OFFSET_KEY, struct.pack(">q", batch.changelog_offset), self._meta)
        self.db.write(wb)

    def rebuild(self, batch: Batch) -> None:
        """Write a batch's values, nothing else: no read back, no due index, no offset, and no
        write-ahead log (`rebuilt` flushes them to disk before it records the offset; a crash
        before that leaves a store without an offset, which is rebuilt again)."""
        wb = WriteBatch(raw_mode=True)
        for key, value in batch.values.items():
            if value is None:
                wb.delete(key)
            else:
                wb.put(key, value)
        self.db.write(wb, _NO_WAL)

    def rebuilt(self, changelog_offset: int | None) -> None:
        """The due index from every stored value's wake time, then the offset: one pass over
        the store, instead of reading each changelog record's key back as it is written."""
        self.db.flush(wait=True)  # what `rebuild` wrote without the write-ahead log
        due, n = self._due, 0
        wb = WriteBatch(raw_mode=True)
        for key, value in self.db.items():
            if len(value) >= 8 and not value[0] & 0x80:  # a wake time (-1: none)
                wb.put(value[:8] + key, b"", due)
                n += 1
                if n % 10_000 == 0:
                    self.db.write(wb)
                    wb = WriteBatch(raw_mode=True)
        if changelog_offset is not None:
            wb.put(_OFFSET_KEY, struct.pack(">q", changelog_offset), self._meta)
        self.db.write(wb)

    def is_empty(self) -> bool:
        """No key and no changelog offset: nothing was ever applied."""
        it = self.db.iter()
        it.seek_to_first()
        empty = not it.valid()
        del it
        return empty and self.changelog_offset() is None

    def changelog_offset(self) -> int | None:
        meta = self.db.get_column_family("meta")
        try:
            raw = meta.get(_OFFSET_KEY)
        finally:
            del meta
        return struct.unpack(">q", bytes(raw))[0] if raw is not None else None

    def keys_after(self, after: bytes, limit: int) -> list[bytes]:
        """Up to `limit` keys greater than `after`, in order (a resumable full scan)."""
        it = self.db.iter()
        it.seek(after)
        out: list[bytes] = []
        while it.valid() and len(out) < limit:
            key = bytes(it.key())
            if key > after:
                out.append(key)
            it.next()
        del it
        return out

    def count(self) -> int:
        it = self.db.iter()
        it.seek_to_first()
        n = 0
        while it.valid():
            n += 1
            it.next()
        del it
        return n

    def close(self) -> None:
        if self._db is not None:
            del self._due, self._meta
            self._due_view = None
            self._db.close()
            self._db = None

    @staticmethod
    def wipe(path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)


def open_store(state_dir: Path | None, partition: int, wipe: bool) -> Store:
    """A partition's store under `state_dir` (`wipe`: emptied first); in memory without one."""
    if state_dir is None:
        return MemoryStore()
    path = state_dir / str(partition)
    if wipe:
        RocksStore.wipe(path)
    return RocksStore(path)
