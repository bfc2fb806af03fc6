"""When each run next needs the worker loop: its renewal, its lease expiry, its timeout.

A heap, so a turn touches only the runs whose time has come, not every run in flight. Entries
are never removed: a renewal pushes the run's new renewal and expiry times, and the old entries,
when they come up, are found out of date by the caller (the run's own times decide).
"""

from __future__ import annotations

import enum
import heapq
import itertools
from collections.abc import Callable, Iterator

from streams.worker.active import ActiveRun


class Due(enum.Enum):
    renew = "renew"
    expire = "expire"
    timeout = "timeout"


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Due, ActiveRun]] = []
        self._seq = itertools.count()
        self._limit = 1_024

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, run: ActiveRun, due: Due, at_ms: int) -> None:
        heapq.heappush(self._heap, (at_ms, next(self._seq), due, run))

    def started(self, run: ActiveRun) -> None:
        """A run just started: its first renewal, its lease expiry and its timeout."""
        self.push(run, Due.renew, run.next_renew_ms)
        self.push(run, Due.expire, run.lease_expires_ms)
        self.push(run, Due.timeout, run.started_ms + run.execution.timeout_ms)

    def renewed(self, run: ActiveRun) -> None:
        """A renewal committed: the run's next renewal and its new expiry."""
        self.push(run, Due.renew, run.next_renew_ms)
        self.push(run, Due.expire, run.lease_expires_ms)

    def due(self, now_ms: int) -> Iterator[tuple[Due, ActiveRun]]:
        """Take out every entry due by `now_ms`, earliest first."""
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            _, _, due, run = heapq.heappop(heap)
            yield due, run

    def forget_ended(self, alive: Callable[[ActiveRun], bool], *, at_once: bool = False) -> None:
        """Drop the entries of runs that have ended, once the heap has doubled since it was
        last cleaned (a finished run's timeout entry would hold the run until that time):
        amortized, a few entries' work per run. `at_once`: now, whatever its size."""
        if len(self._heap) <= self._limit and not at_once:
            return
        self._heap = [entry for entry in self._heap if alive(entry[3])]
        heapq.heapify(self._heap)
        self._limit = 2 * len(self._heap) + 1_024
