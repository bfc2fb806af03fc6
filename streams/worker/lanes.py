"""Runs waiting for their destination's rate limit (kadence/throttle.py), one queue per
destination in the order they became due.

A due run with a `lane`, served by the inbox's round robin, asks `Lanes.ask`: it starts if its
destination's schedule lets it now and nobody of that destination waits before it; else it
joins the destination's queue, out of its tenant's queue, so the runs behind it (of another
destination, or another tenant) go on. Only the head of each destination's queue is ever
looked at again: at the time the schedule lets the next run start (`wake`), it goes back to its
tenant's queue (the round robin decides its turn, and it takes its start then, or waits again
if the schedule says so); so a burst of ten thousand costs each run one queueing, not one
question per turn. A waiting run stays held (the offset commit does not pass it: a worker that
dies leaves it to the next owner of the partition), is not claimed ahead, and has no lease
running, unless it was claimed ahead before it was due (then its lease is renewed with the
others'); its timeout runs from its start.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

from kadence.throttle import Throttle
from streams.worker.item import Item

Key = tuple[str, ...]


@dataclass
class Lanes:
    throttle: Throttle = field(default_factory=Throttle)
    _queues: dict[Key, deque[Item]] = field(default_factory=dict)
    """destination -> its runs waiting, in the order they asked (the head may be `_out`)."""
    _out: dict[Key, Item] = field(default_factory=dict)
    """destination -> its head, woken and back in its tenant's queue."""
    _wakes: list[tuple[int, Key]] = field(default_factory=list)
    """(when, destination): a destination's head goes back to its tenant's queue then."""
    waiting: int = 0
    """Runs in the queues (a woken head included)."""

    def ask(self, item: Item, now_ms: int) -> bool:
        """Whether `item` (its `lane` set) may start now, taking its destination's start; if
        not, it waits in its destination's queue."""
        lane = item.lane
        assert lane is not None
        key = lane.key
        queue = self._queues.get(key)
        woken = self._out.get(key) is item
        if woken:
            del self._out[key]
        elif queue or key in self._out:  # others of this destination wait before it
            if queue is None:
                self._queues[key] = queue = deque()
            self._enqueue(item, queue, now_ms)
            return False
        at = self.throttle.take(lane, now_ms)
        if at > now_ms:
            if queue is None:
                self._queues[key] = queue = deque()
            if woken:
                queue.appendleft(item)  # still the head
            else:
                self._enqueue(item, queue, now_ms)
            heapq.heappush(self._wakes, (at, key))
            return False
        if item.waited_from:
            item.throttled_ms = now_ms - item.waited_from
            self.waiting -= 1
        if queue:
            self._next(key, queue, now_ms)
        elif queue is not None:
            del self._queues[key]
        return True

    def _enqueue(self, item: Item, queue: deque[Item], now_ms: int) -> None:
        if not item.waited_from:
            item.waited_from = now_ms
            self.waiting += 1
        queue.append(item)

    def _next(self, key: Key, queue: deque[Item], now_ms: int) -> None:
        """The head went: wake the next one when the schedule lets it start."""
        head = queue[0]
        assert head.lane is not None
        heapq.heappush(self._wakes, (self.throttle.earliest(head.lane, now_ms), key))

    def wake(self, now_ms: int) -> list[Item]:
        """The heads whose start has come (each goes back to its tenant's queue); a head that
        went away (revoked, its partition revoked) passes its turn to the next."""
        for key, head in list(self._out.items()):
            if not head.held:
                del self._out[key]
                self.waiting -= 1
                heapq.heappush(self._wakes, (now_ms, key))
        out: list[Item] = []
        while self._wakes and self._wakes[0][0] <= now_ms:
            _, key = heapq.heappop(self._wakes)
            queue = self._queues.get(key)
            if key in self._out or queue is None:
                continue
            while queue and not queue[0].held:
                queue.popleft()
                self.waiting -= 1
            if not queue:
                del self._queues[key]
                continue
            head = queue.popleft()
            if not queue:
                del self._queues[key]
            self._out[key] = head
            out.append(head)
        return out

    def next_ms(self) -> int | None:
        """When a head is woken next."""
        return self._wakes[0][0] if self._wakes else None
