"""Records a processor marks as one group, written as one record when the transaction commits.

One coalescer serves every task of a runner (their transaction is one): a group takes the
records of all the partitions the process owns (a tenant's runs fired by jobs of any of them).

A processor forwards a record with a group (`ProcessorContext.forward(..., group=g)`): the
records of a partition of a topic with the same key and group, in one transaction, become one
record that `combine` makes of their values (a group of one is written as it was), in groups of
`max_entries` and `max_bytes` at most. Order on a partition of a topic is kept where it matters:
a record without a group that goes where groups wait (a revocation after the executions it
revokes) is written after every group forwarded before it, and groups forwarded after it come
after it; between two such records, groups are written in the order they began.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from streams.runtime.context import Headers, HeadersLater

Record = tuple[str, int | None, bytes | None, bytes | None, Headers | HeadersLater]
"""(topic, partition, key, value, headers): the headers of a grouped record may be made later
(`ProcessorContext.forward`), when it is written alone."""
Combine = Callable[[bytes | None, Hashable, list[bytes]], tuple[bytes, Headers]]
"""(key, group, values) -> the value and headers of the one record written for them."""
Emit = Callable[[str, int | None, bytes | None, bytes | None, Headers], None]


@dataclass(slots=True)
class _Group:
    key: bytes | None
    group: Hashable
    records: list[Record] = field(default_factory=list)
    size: int = 0


class Coalescer:
    """A runner's groups waiting for the transaction's commit."""

    def __init__(self, combine: Combine, max_entries: int, max_bytes: int) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("a group holds one record at least")
        self.combine = combine
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._queues: dict[tuple[str, int | None], list[Record | _Group]] = {}
        """(topic, partition) -> what waits there, in the order it is to be written."""
        self._open: dict[tuple[str, int | None], dict[tuple[bytes | None, Hashable], _Group]] = {}
        """(topic, partition) -> the groups that still take records (none across a record
        without a group)."""
        self.count = 0
        """Records that wait (the runner commits a transaction that produced enough, these
        included)."""

    def waits(self, topic: str, partition: int | None) -> bool:
        """Whether groups wait on this partition of `topic` (a record without a group that goes
        there must then wait behind them)."""
        return (topic, partition) in self._queues

    def add(self, record: Record, group: Hashable | None) -> None:
        topic, partition, key, value, _headers = record
        self.count += 1
        where = (topic, partition)
        queue = self._queues.setdefault(where, [])
        if group is None:
            queue.append(record)
            self._open.pop(where, None)
            return
        size = len(value or b"")
        groups = self._open.setdefault(where, {})
        found = groups.get((key, group))
        if (
            found is None
            or len(found.records) >= self.max_entries
            or found.size + size > self.max_bytes
        ):
            found = groups[(key, group)] = _Group(key, group)
            queue.append(found)
        found.records.append(record)
        found.size += size

    def flush(self, emit: Emit) -> None:
        """Write everything that waits, in order."""
        for (topic, partition), queue in self._queues.items():
            for item in queue:
                if not isinstance(item, _Group):
                    _alone(emit, item)
                elif len(item.records) == 1:
                    _alone(emit, item.records[0])
                else:
                    values = [r[3] or b"" for r in item.records]
                    value, headers = self.combine(item.key, item.group, values)
                    emit(topic, partition, item.key, value, headers)
        self.clear()

    def clear(self) -> None:
        self._queues.clear()
        self._open.clear()
        self.count = 0


def _alone(emit: Emit, record: Record) -> None:
    """Write a record as it was forwarded, its headers made now if they were left for later."""
    topic, partition, key, value, headers = record
    emit(topic, partition, key, value, headers() if callable(headers) else headers)
