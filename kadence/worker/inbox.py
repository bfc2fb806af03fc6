"""Executions a worker has read but not claimed: held until due, committed only in prefix.

Executions may arrive up to the scheduler's look-ahead before they are due. The worker holds
them, and the consumer offset it commits for a partition never passes one it still holds: if
the worker dies, the next owner of the partition reads every unclaimed execution again.
Claimed ones are covered by their lease (the reaper redelivers them), so they leave the inbox.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from kadence.clock import datetime_to_ms
from kadence.models import ExecutionRequested, ExecutionRevoked


@dataclass(eq=False)
class Item:
    partition: int
    offset: int
    execution: ExecutionRequested
    due_ms: int
    held: bool = True


@dataclass
class Inbox:
    _heap: list[tuple[int, int, int, Item]] = field(default_factory=list)
    _open: dict[int, dict[int, Item]] = field(default_factory=dict)
    """partition -> offset -> held item."""
    _next: dict[int, int] = field(default_factory=dict)
    """partition -> the offset after the last record read."""

    def add(self, partition: int, offset: int, ex: ExecutionRequested) -> Item:
        item = Item(partition, offset, ex, datetime_to_ms(ex.due_at))
        self._open.setdefault(partition, {})[offset] = item
        heapq.heappush(self._heap, (item.due_ms, partition, offset, item))
        self.read(partition, offset)
        return item

    def read(self, partition: int, offset: int) -> None:
        """A record was read (also one with nothing to hold: a revocation, a bad record)."""
        self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def revoke(self, rev: ExecutionRevoked) -> bool:
        """Drop held executions that `rev` revokes; True if one was dropped."""
        dropped = False
        for items in self._open.values():
            for offset, item in list(items.items()):
                ex = item.execution
                same = ex.execution_id == rev.execution_id
                if same and ex.definition_version <= rev.definition_version:
                    self._close(item)
                    del items[offset]
                    dropped = True
        return dropped

    def due(self, now_ms: int, limit: int) -> list[Item]:
        """Up to `limit` held executions due by `now_ms`, earliest first; they stop being held
        (call `hold` to put one back if its claim fails)."""
        out: list[Item] = []
        while self._heap and len(out) < limit and self._heap[0][0] <= now_ms:
            item = heapq.heappop(self._heap)[3]
            if item.held:
                self._close(item)
                self._open.get(item.partition, {}).pop(item.offset, None)
                out.append(item)
        return out

    def hold(self, item: Item) -> None:
        """Back into the inbox (its claim did not commit)."""
        if item.partition not in self._next:
            return  # the partition is gone
        item.held = True
        self._open.setdefault(item.partition, {})[item.offset] = item
        heapq.heappush(self._heap, (item.due_ms, item.partition, item.offset, item))

    def offsets(self) -> dict[int, int]:
        """Per partition read: the offset to commit (the first one still held)."""
        return {
            p: min(self._open[p]) if self._open.get(p) else nxt for p, nxt in self._next.items()
        }

    def forget(self, partitions: set[int]) -> None:
        """Partitions revoked: their held executions are the next owner's to read again."""
        for p in partitions:
            for item in self._open.pop(p, {}).values():
                self._close(item)
            self._next.pop(p, None)

    def next_due_ms(self) -> int | None:
        while self._heap and not self._heap[0][3].held:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return sum(len(items) for items in self._open.values())

    @staticmethod
    def _close(item: Item) -> None:
        item.held = False
