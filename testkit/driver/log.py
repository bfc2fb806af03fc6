"""One partition of an in-memory topic: records with offsets, as a broker keeps them.

Transactional records are appended at once (they take their offsets when produced, as on a
broker) but stay *pending* until their transaction ends: a read_committed reader stops at the
first pending one (the last stable offset), and an aborted record is skipped. Every commit or
abort leaves a control marker, which takes an offset and is never handed to a reader, so the
offsets a reader sees after transactions have gaps exactly where a real broker's have them.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE, KafkaError

Headers = list[tuple[str, str | bytes | None]]
"""As librdkafka hands them back (values are bytes; str only in the type, for the ports)."""


@dataclass(slots=True)
class Entry:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers | None
    timestamp_ms: int
    pending: bool = False
    """Written by a transaction still open."""
    aborted: bool = False
    control: bool = False
    """A commit or abort marker: it takes an offset, no reader sees it."""


class PartitionLog:
    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.entries: list[Entry] = []
        self.low = 0
        """The log start offset (raised by `truncate_before`)."""
        self.high = 0
        """The next offset to be written (the high watermark: pending records included)."""

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        timestamp_ms: int,
        *,
        pending: bool = False,
        control: bool = False,
    ) -> Entry:
        entry = Entry(self.high, key, value, headers, timestamp_ms, pending, control=control)
        self.entries.append(entry)
        self.high += 1
        return entry

    def last_stable(self) -> int:
        """Where a read_committed reader stops: the first record of a transaction still open."""
        for entry in self.entries:
            if entry.pending:
                return entry.offset
        return self.high

    def read(self, position: int, limit: int, committed_only: bool) -> tuple[list[Entry], int]:
        """Up to `limit` readable records from `position`, and the position after them (past
        markers and aborted records too, but never past the last stable offset)."""
        end = self.last_stable() if committed_only else self.high
        position = max(position, self.low)
        i = bisect_left(self.entries, position, key=lambda e: e.offset)
        found: list[Entry] = []
        while len(found) < limit:
            if i == len(self.entries) or self.entries[i].offset >= end:
                return found, max(position, end)  # past compacted gaps and trailing markers
            entry = self.entries[i]
            if not entry.control and not (committed_only and entry.aborted):
                found.append(entry)
            position = entry.offset + 1
            i += 1
        return found, position

    def truncate_before(self, offset: int) -> None:
        """Delete the records before `offset` (retention, DeleteRecords): the log starts there."""
        self.entries = [e for e in self.entries if e.offset >= offset]
        self.low = max(self.low, min(offset, self.high))

    def compact(self) -> None:
        """Keep the latest committed record of each key (and every pending one), as log
        compaction does; tombstones are kept (delete.retention.ms has not passed)."""
        latest: dict[bytes, int] = {}
        for entry in self.entries:
            if entry.key is not None and not entry.pending and not entry.aborted:
                latest[entry.key] = entry.offset
        self.entries = [
            e
            for e in self.entries
            if e.pending or (e.key is not None and latest.get(e.key) == e.offset)
        ]


class MemoryMessage:
    """A consumed record, or an error event in its place, with confluent_kafka's accessors."""

    __slots__ = ("_entry", "_error", "_partition", "_topic")

    def __init__(
        self,
        topic: str | None,
        partition: int | None,
        entry: Entry | None = None,
        error: KafkaError | None = None,
    ) -> None:
        self._topic, self._partition, self._entry, self._error = topic, partition, entry, error

    def error(self) -> KafkaError | None:
        return self._error

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        return self._entry.offset if self._entry is not None else None

    def key(self) -> bytes | None:
        return self._entry.key if self._entry is not None else None

    def value(self) -> bytes | None:
        return self._entry.value if self._entry is not None else None

    def headers(self) -> Headers | None:
        if self._entry is None or not self._entry.headers:
            return None
        return list(self._entry.headers)

    def timestamp(self) -> tuple[int, int]:
        if self._entry is None:
            return TIMESTAMP_NOT_AVAILABLE, -1
        return TIMESTAMP_CREATE_TIME, self._entry.timestamp_ms

    def __repr__(self) -> str:
        where = f"{self._topic}[{self._partition}]@{self.offset()}"
        return f"MemoryMessage({where}, error={self._error})" if self._error else where
