"""Where a tenant's delete (a null value keyed tenant/job_id) goes: one tombstone on the
partition of `schedules` the job lives on when Kadence knows it, a tombstone on every
partition only when it does not.

A job's partition follows its routing key, so a new concurrency key moves it; the scheduler
partition that receives the moved version tells the others (`JobMoved`), and the old copy goes
(docs/decisions/0003). A tombstone on the new partition alone is not always enough: while a
`JobMoved` is still on its way, a partition may hold an older copy that only that message (or
its answer) would remove, and a partition that has deleted its copy no longer answers. So one
tombstone is sent only where no other partition can hold a copy: the query view's `home`,
the one partition every definition of the job came from (streams/views/apply.py), together
with the partitions this process routed a definition of the job to recently (the view may
not show them yet). One partition in all: one tombstone there, ordered after every
definition of the job on it. Otherwise (the job moved, the view is down or does not know it,
it is unknown to the view because it was just created elsewhere) a tombstone on every
partition, as before: a partition without the job ignores it.

The `kadence-concurrency-key` header, which a command names its job's partition with, is not
used for deletes: a stale or wrong one would send the only tombstone where the job is not,
and the job would silently stay; the view's `home` cannot be wrong that way.

A delete racing an update written elsewhere (the API, the SDK, another ingress process) that
moves the job, and that the view does not show yet, removes the old copy; the moved version
stays, as if the update had come just after the delete.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from streams.ingress.lookup import Answer, Known

RECENT_S = 600.0
"""Partitions this process routed a job's definitions to are remembered this long (the view
shows a definition within milliseconds; a view further behind than this is not expected)."""
RECENT_KEYS = 100_000


@dataclass
class _Routed:
    partitions: set[int]
    at: float


@dataclass
class Placement:
    partitions: int
    clock: Callable[[], float] = time.monotonic
    _routed: OrderedDict[str, _Routed] = field(default_factory=OrderedDict)
    _known: dict[str, Known | None] = field(default_factory=dict)
    """This batch: what the view said of each deleted job (absent: not asked, or no answer)."""

    def question(self, deletes: Iterable[str]) -> set[str]:
        """The jobs of a batch's deletes, to ask the view about."""
        return set(deletes)

    def answered(self, answer: Answer | None, asked: Iterable[str]) -> None:
        self._known = {}
        if answer is not None:
            self._known = {k: answer.jobs.get(k) for k in asked if k in answer.jobs}

    def routed(self, key: str, partition: int) -> None:
        """A definition of `key` was routed to `partition`."""
        now = self.clock()
        entry = self._routed.pop(key, None)
        if entry is None or now - entry.at >= RECENT_S:
            entry = _Routed(set(), now)
        entry.partitions.add(partition)
        entry.at = now
        self._routed[key] = entry  # the newest last: the oldest go first past RECENT_KEYS
        while len(self._routed) > RECENT_KEYS:
            self._routed.popitem(last=False)

    def tombstones(self, key: str) -> list[int]:
        """The partitions a delete of `key` writes a tombstone to. Within the batch, the job
        is gone after it: a definition after it creates it anew, where it is routed."""
        everywhere = list(range(self.partitions))
        entry = self._routed.pop(key, None)
        if key not in self._known:
            return everywhere  # the view was not asked, or did not answer
        known, self._known[key] = self._known[key], None
        found: set[int] = set()
        if known is not None:
            if known.home is None:
                return everywhere  # the job has been on more than one partition
            found.add(known.home)
        if entry is not None and self.clock() - entry.at < RECENT_S:
            found |= entry.partitions
        if len(found) == 1 and 0 <= (home := min(found)) < self.partitions:
            return [home]
        return everywhere
