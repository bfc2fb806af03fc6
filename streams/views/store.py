"""The query view's RocksDB: job definitions, per-job time-ordered history, dead letters, and
the input offsets they reflect, all written together in one WriteBatch per poll.

Keys (`\\0` separates parts; tenant and job ids are identifiers and never contain it):
    J tenant job_id                 the job: definition, partition/offset, paused, deleted
    H tenant job_id at_ms seq       one history event (decision, outcome, dead letter)
    D tenant execution_id           a dead letter and whether it was replayed since
    O topic partition               the next input offset to read (restart point)
Values are JSON.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict, WriteBatch

SEP = "\0"
Doc = dict[str, Any]


def job_key(tenant: str, job_id: str) -> bytes:
    return f"J{SEP}{tenant}{SEP}{job_id}".encode()


def history_prefix(tenant: str, job_id: str) -> bytes:
    return f"H{SEP}{tenant}{SEP}{job_id}{SEP}".encode()


def history_key(tenant: str, job_id: str, at_ms: int, seq: str) -> bytes:
    return history_prefix(tenant, job_id) + f"{at_ms:015d}{SEP}{seq}".encode()


def backfill_key(tenant: str, job_id: str, request_id: str) -> bytes:
    return f"B{SEP}{tenant}{SEP}{job_id}{SEP}{request_id}".encode()


def dead_key(tenant: str, execution_id: str) -> bytes:
    return f"D{SEP}{tenant}{SEP}{execution_id}".encode()


def offset_key(topic: str, partition: int) -> bytes:
    return f"O{SEP}{topic}{SEP}{partition}".encode()


class ViewStore:
    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        self.path = path
        self.db = Rdict(str(path), options=opts)
        self.pending: dict[bytes, bytes | None] = {}
        self._undo: dict[bytes, tuple[bool, bytes | None]] | None = None
        """While one record is applied: what each key it wrote held in `pending` before."""

    # -- reads (see the pending writes of the open batch first) ------------------------------

    def get(self, key: bytes) -> Doc | None:
        raw = self.pending[key] if key in self.pending else self.db.get(key)
        return None if raw is None else json.loads(raw)

    def scan(self, prefix: bytes, reverse: bool = False, limit: int | None = None) -> Iterator[Doc]:
        """Values under `prefix` in key order (or reverse), committed writes only."""
        it = self.db.iter()
        n = 0
        if reverse:
            it.seek_for_prev(prefix + b"\xff")
        else:
            it.seek(prefix)
        while it.valid():
            key = bytes(it.key())
            if not key.startswith(prefix) or (limit is not None and n >= limit):
                break
            n += 1
            yield json.loads(bytes(it.value()))
            if reverse:
                it.prev()
            else:
                it.next()

    def keys(self, prefix: bytes) -> Iterator[bytes]:
        it = self.db.iter()
        it.seek(prefix)
        while it.valid() and bytes(it.key()).startswith(prefix):
            yield bytes(it.key())
            it.next()

    def offset(self, topic: str, partition: int) -> int | None:
        key = offset_key(topic, partition)
        raw = self.pending[key] if key in self.pending else self.db.get(key)
        return None if raw is None else int(raw)

    # -- writes ------------------------------------------------------------------------------

    def put(self, key: bytes, doc: Doc | int | None) -> None:
        value = None if doc is None else json.dumps(doc).encode()
        if self._undo is not None and key not in self._undo:
            self._undo[key] = (key in self.pending, self.pending.get(key))
        self.pending[key] = value

    def begin(self) -> None:
        """What is written from here to `keep` or `undo` is one record's: whole or not at all."""
        self._undo = {}

    def keep(self) -> None:
        self._undo = None

    def undo(self) -> None:
        """Take back what was written since `begin` (applying the record failed half way)."""
        for key, (present, before) in (self._undo or {}).items():
            if present:
                self.pending[key] = before
            else:
                self.pending.pop(key, None)
        self._undo = None

    def flush(self) -> None:
        if not self.pending:
            return
        batch = WriteBatch(raw_mode=True)
        for key, value in self.pending.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        self.db.write(batch)
        self.pending.clear()

    def close(self) -> None:
        self.flush()
        self.db.close()

    @staticmethod
    def wipe(path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
