"""State written later: a key whose newest state lives in memory, rebuilt from the input log.

A processor may leave a step's state unwritten (`Task.defer`) when the input that caused the
step can be read and applied again: the scheduler does so for an outcome that changes nothing
but its job's runs (most successes), which would otherwise write the job's whole state, a
changelog record and a RocksDB write per execution. The newest state stays here (and in the
processor's cache); the key is written with its next real write, or by the runner once it has
waited `write_behind_ms`.

What makes it safe is the replay point. With every commit the task stores, under
`~replay/<topic>`, the offset of the oldest input whose effect is only in memory (none: the key
is deleted). It is changelogged in the same transaction as the input offsets, so after a crash,
an abort or a rebalance the partition's next owner restores the store and reads that topic again
from the replay point: records before the committed offset are handed to the processor's
`replay`, which applies what is missing and writes nothing else (no records, no history).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kadence.quick_frozen import quick_init

REPLAY_PREFIX = b"~replay/"


def replay_key(topic: str) -> bytes:
    """Where a partition's replay point on `topic` is stored."""
    return REPLAY_PREFIX + topic.encode()


@quick_init
@dataclass(frozen=True, slots=True)
class Entry:
    topic: str
    offset: int
    """The oldest input on `topic` whose effect on the key is not written yet."""
    since_ms: int
    state: Any
    """The key's newest state, as the processor keeps it (decoded)."""


class Deferred:
    """The keys of one partition waiting to be written, oldest first (insertion order: a key
    deferred again keeps its first place and offset until it is written)."""

    def __init__(self) -> None:
        self._entries: dict[bytes, Entry] = {}
        self._unordered = False
        """An undo put an entry back behind younger ones: offsets are no longer in order."""

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: bytes) -> Entry | None:
        return self._entries.get(key)

    def defer(self, key: bytes, topic: str, offset: int, now_ms: int, state: Any) -> Entry | None:
        """Keep `state` as the key's newest; returns the entry it replaced (for an undo)."""
        before = self._entries.get(key)
        if before is None:
            self._entries[key] = Entry(topic, offset, now_ms, state)
        else:  # keeps its place: the replay point must not move past `before.offset`
            self._entries[key] = Entry(before.topic, before.offset, before.since_ms, state)
        return before

    def written(self, key: bytes) -> Entry | None:
        """The key was written: it no longer waits. Returns its entry (for an undo)."""
        return self._entries.pop(key, None)

    def restore(self, key: bytes, entry: Entry | None) -> None:
        """Undo: put back what `defer` or `written` returned (None: the key did not wait).
        An entry put back may go behind younger ones: `points` looks at every one then."""
        if entry is None:
            self._entries.pop(key, None)
        else:
            self._unordered |= key not in self._entries and bool(self._entries)
            self._entries[key] = entry

    def older_than(self, cutoff_ms: int) -> list[bytes]:
        """Keys waiting since before `cutoff_ms` (oldest first)."""
        old: list[bytes] = []
        for key, entry in self._entries.items():
            if entry.since_ms < cutoff_ms:
                old.append(key)
            elif not self._unordered:  # in order: the rest are younger still
                break
        return old

    def waiting_since(self) -> int | None:
        """When the oldest key began to wait (None: none waits)."""
        if self._unordered:
            return min((e.since_ms for e in self._entries.values()), default=None)
        return next((e.since_ms for e in self._entries.values()), None)

    def points(self, topics: Iterable[str]) -> dict[str, int | None]:
        """Per topic, the lowest offset whose effect is only here (None: nothing waits)."""
        low: dict[str, int | None] = dict.fromkeys(topics)
        missing = set(low)
        for entry in self._entries.values():
            if entry.topic not in low:
                continue
            at = low[entry.topic]
            if at is None or entry.offset < at:
                low[entry.topic] = entry.offset
            missing.discard(entry.topic)
            if not missing and not self._unordered:  # in order: the first one is the lowest
                break
        if not self._entries:
            self._unordered = False
        return low

    def clear(self) -> None:
        self._entries.clear()
        self._unordered = False
