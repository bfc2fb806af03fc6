"""Held executions in due order: bucketed by due time until due, then one queue per tenant
(the inbox's round robin serves them: `inbox`). A due run whose destination's rate limit has
no start for it yet is given the next one and waits for it in a bucket like a run not yet due
(`_throttled`), out of its tenant's queue: the runs behind it go on."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from streams.worker.fairness import Fairness
from streams.worker.item import Item
from streams.worker.lanes import Lanes


@dataclass
class Waiting:
    fairness: Fairness = field(default_factory=Fairness)
    _heap: list[int] = field(default_factory=list)
    """The distinct due times of `_waiting`, earliest first."""
    _waiting: dict[int, list[Item]] = field(default_factory=dict)
    """due time -> executions not yet due, in the order read (a midnight flood is one entry:
    released in one step, not a hundred thousand heap pops)."""
    _ready: dict[str, deque[Item]] = field(default_factory=dict)
    """tenant -> its due executions, oldest first (still held until `due` hands them out)."""
    _turns: deque[str] = field(default_factory=deque)
    """Tenants with due executions, in round-robin order."""
    _deficit: dict[str, float] = field(default_factory=dict)
    _ahead_heap: list[int] = field(default_factory=list)
    _ahead: dict[int, list[Item]] = field(default_factory=dict)
    """due time -> waiting executions that may be claimed ahead (not `leaseless`): `upcoming`
    walks only these, and drops each once it is claimed or gone, so a turn does not look again
    at every execution read ahead."""
    lanes: Lanes = field(default_factory=Lanes)
    """Runs waiting for their destination's rate limit (streams/worker/lanes.py)."""
    shards: Mapping[str, int] = field(default_factory=dict)
    """tenant -> executions partitions it is spread over (`tenant_shards`): they share its
    destinations' limits."""
    on_throttled: Callable[[str, int], None] | None = None
    """Told (tenant, ms) of each run that waited for its destination's rate limit, as it starts
    (the worker's metrics)."""
    _now: int = 0
    """The time of the `due` call under way."""

    def _wait(self, item: Item) -> None:
        bucket = self._waiting.get(item.due_ms)
        if bucket is None:
            self._waiting[item.due_ms] = bucket = []
            heapq.heappush(self._heap, item.due_ms)
        bucket.append(item)
        self._offer(item)

    def _throttled(self, item: Item) -> bool:
        """Whether `item` (with a `lane`, about to start) must wait for its destination's rate
        limit: then it waits in its destination's queue, out of its tenant's (lanes.py)."""
        if not self.lanes.ask(item, self._now):
            return True
        if item.throttled_ms and self.on_throttled is not None:
            self.on_throttled(item.execution.tenant, item.throttled_ms)
        if self.lanes.waiting:  # the next may start in this call too (a burst, a high limit)
            for woken in self.lanes.wake(self._now):
                self._ready_append(woken)
        return False

    def _offer(self, item: Item) -> None:
        """Index `item` for claims ahead, unless it is leaseless, a batch (claimed at its due
        time, all together) or indexed already."""
        if item.leaseless or item.offered or item.batch is not None:
            return
        item.offered = True
        bucket = self._ahead.get(item.due_ms)
        if bucket is None:
            self._ahead[item.due_ms] = bucket = []
            heapq.heappush(self._ahead_heap, item.due_ms)
        bucket.append(item)

    def _release(self, now_ms: int) -> None:
        """Move what is due to its tenant's queue."""
        while self._heap and self._heap[0] <= now_ms:
            for item in self._waiting.pop(heapq.heappop(self._heap)):
                if item.held:
                    self._ready_append(item)
        if self.lanes.waiting:
            for item in self.lanes.wake(now_ms):
                self._ready_append(item)

    def _ready_append(self, item: Item) -> None:
        tenant = item.execution.tenant if self.fairness.by_tenant else ""
        queue = self._ready.get(tenant)
        if queue is None:
            self._ready[tenant] = queue = deque()
            self._turns.append(tenant)
        queue.append(item)

    def _retire(self, tenant: str) -> None:
        self._ready.pop(tenant, None)
        self._deficit.pop(tenant, None)
        self._turns.remove(tenant)

    def upcoming(self, until_ms: int, limit: int, ready: Callable[[Item], bool]) -> list[Item]:
        """Up to `limit` waiting executions due by `until_ms`, not claimed yet, that `ready`
        accepts (earliest due first; walks only the index of what may be claimed ahead before
        `until_ms`, dropping from it what was claimed, started or went away)."""
        while self._ahead_heap and not self._ahead.get(self._ahead_heap[0]):
            self._ahead.pop(heapq.heappop(self._ahead_heap), None)
        times: list[int] = []
        stack = [0] if self._ahead_heap else []
        while stack:
            i = stack.pop()
            if i < len(self._ahead_heap) and self._ahead_heap[i] <= until_ms:
                times.append(self._ahead_heap[i])
                stack += [2 * i + 1, 2 * i + 2]
        out: list[Item] = []
        for due in sorted(times):
            bucket = self._ahead.get(due, [])
            kept = []
            for item in bucket:
                if not item.held or item.claimed or item.leaseless or item.waited_from:
                    item.offered = False
                    continue
                kept.append(item)
                if len(out) < limit and ready(item):
                    out.append(item)
            bucket[:] = kept
            if len(out) >= limit:
                break
        return out

    def due_by_tenant(self, now_ms: int) -> dict[str, int]:
        """Held executions due by `now_ms` and not started (claimed ahead or not), per tenant:
        the part of the backlog a worker holds (streams/worker/backlog.py). Walks them all: call
        it about once a second, not per turn."""
        out: dict[str, int] = {}
        due: list[Iterable[Item]] = list(self._ready.values())
        due += [bucket for at, bucket in self._waiting.items() if at <= now_ms]
        for items in due:
            for item in items:
                if item.held:
                    tenant = item.execution.tenant
                    out[tenant] = out.get(tenant, 0) + item.weight
        return out

    def next_due_ms(self) -> int | None:
        """The due time of the earliest held execution (one already waiting its tenant's turn
        counts as due at its own due time)."""
        while self._heap:
            bucket = self._waiting[self._heap[0]]
            if bucket and not bucket[0].held:  # revoked or handed on: drop them once
                bucket[:] = [i for i in bucket if i.held]
            if bucket:
                break
            del self._waiting[heapq.heappop(self._heap)]
        waiting = [q[0].due_ms for q in self._ready.values() if q and q[0].held]
        candidates = waiting + ([self._heap[0]] if self._heap else [])
        woken = self.lanes.next_ms()
        if woken is not None:
            candidates.append(woken)
        return min(candidates) if candidates else None

    def _purge(self) -> None:
        """Forget the executions no longer held (or their memory stays taken until due)."""
        for bucket in self._waiting.values():
            bucket[:] = [i for i in bucket if i.held]
        for bucket in self._ahead.values():
            for item in bucket:
                item.offered = item.held
            bucket[:] = [i for i in bucket if i.held]
        for tenant, queue in self._ready.items():
            self._ready[tenant] = deque(i for i in queue if i.held)
