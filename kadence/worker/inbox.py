"""Executions a worker has read but not claimed: held until due, committed only in prefix.

Executions may arrive up to the scheduler's look-ahead before they are due. The worker holds
them, and the consumer offset it commits for a partition never passes one it still holds: if
the worker dies, the next owner of the partition reads every unclaimed execution again.
Claimed ones are covered by their lease (the reaper redelivers them), so they leave the inbox.

Executions are not on the topic in due order (each job dispatches its look-ahead together; jobs
that wait for their due time come after others' look-ahead), so the first held execution can
sit in front of many already claimed. The commit therefore also carries, in the offset
metadata, which offsets between it and the read position are still held: the next owner of
the partition reads again only those (and everything after the read position), not the ones
already claimed. Past METADATA_LIMIT characters the list is left out, and the next owner
re-reads everything after the committed offset (duplicates, with the same execution id).
"""

from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass, field

from kadence.clock import datetime_to_ms
from kadence.models import ExecutionRequested, ExecutionRevoked

log = logging.getLogger(__name__)
METADATA_LIMIT = 3_500
"""Characters of offset metadata (brokers accept 4 096 by default)."""
FORMAT = "k1"


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
    _replay: dict[int, tuple[int, frozenset[int]]] = field(default_factory=dict)
    """partition -> (read position, held offsets) from the previous owner's last commit."""

    # -- taking over a partition -------------------------------------------------------------

    def resume(self, partition: int, committed: int, metadata: str | None) -> None:
        """A partition was assigned; `metadata` is what its last commit carried."""
        parsed = decode_metadata(committed, metadata)
        if parsed is None:
            self._replay.pop(partition, None)
        else:
            self._replay[partition] = parsed

    def wanted(self, partition: int, offset: int) -> bool:
        """False for a record the previous owner already claimed or finished with."""
        replay = self._replay.get(partition)
        if replay is None:
            return True
        upto, held = replay
        if offset >= upto:
            del self._replay[partition]
            return True
        return offset in held

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

    def offsets(self) -> dict[int, tuple[int, str]]:
        """Per partition read: the offset to commit (the first one still held) and the
        metadata naming the held ones after it."""
        out = {}
        for p, nxt in self._next.items():
            held = set(self._open.get(p, ()))
            upto = nxt
            replay = self._replay.get(p)
            if replay is not None:  # still re-reading what the previous owner held
                old_upto, old_held = replay
                held.update(o for o in old_held if o >= nxt)
                upto = max(nxt, old_upto)
            if not held:
                out[p] = (upto, "")
            else:
                ordered = sorted(held)
                out[p] = (ordered[0], encode_metadata(ordered, upto))
        return out

    def forget(self, partitions: set[int]) -> None:
        """Partitions revoked: their held executions are the next owner's to read again."""
        for p in partitions:
            for item in self._open.pop(p, {}).values():
                self._close(item)
            self._next.pop(p, None)
            self._replay.pop(p, None)

    def next_due_ms(self) -> int | None:
        while self._heap and not self._heap[0][3].held:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return sum(len(items) for items in self._open.values())

    @staticmethod
    def _close(item: Item) -> None:
        item.held = False


def encode_metadata(held: list[int], upto: int) -> str:
    """`k1:<upto>:<start>+<length>,...` (base 36, starts relative to the first held offset)."""
    base = held[0]
    runs: list[tuple[int, int]] = []
    for o in held:
        if runs and o == runs[-1][0] + runs[-1][1]:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((o, 1))
    body = ",".join(f"{_b36(start - base)}+{_b36(length)}" for start, length in runs)
    text = f"{FORMAT}:{_b36(upto - base)}:{body}"
    if len(text) > METADATA_LIMIT:
        log.info(
            "%d held executions in %d runs: too many to name in the commit", len(held), len(runs)
        )
        return ""
    return text


def decode_metadata(committed: int, text: str | None) -> tuple[int, frozenset[int]] | None:
    """(read position, held offsets), or None when the commit named nothing (read all)."""
    if not text or not text.startswith(f"{FORMAT}:"):
        return None
    try:
        _, upto, body = text.split(":", 2)
        held: set[int] = set()
        for run in body.split(","):
            start, length = run.split("+")
            first = committed + int(start, 36)
            held.update(range(first, first + int(length, 36)))
        return committed + int(upto, 36), frozenset(held)
    except ValueError:
        log.warning("unreadable offset metadata %r: re-reading everything", text[:80])
        return None


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out
