"""The runner's side of deferred writes (streams/runtime/deferred.py): where each replay topic is
read from after an assignment or an abort, which records are replays, and writing what waited.

After a restore (or an abort, which drops what was only in memory) a partition's replay topic is
read from its stored replay point R instead of its committed offset C: the records in [R, C)
were processed before, and go to the processor's `replay`; they are not consumed again (C is
not moved back). From C on, records are processed as usual.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from typing import cast

from streams.runtime.processor import Processor, Replaying
from streams.runtime.records import InputRecord
from streams.runtime.task import Task

log = logging.getLogger(__name__)


class Replays:
    def __init__(self, topics: tuple[str, ...], write_behind_ms: int, processor: Processor) -> None:
        self.topics = topics
        self.write_behind_ms = write_behind_ms
        if topics and not isinstance(processor, Replaying):
            raise TypeError(f"replay topics {topics} need a processor that replays (Replaying)")
        self.processor = cast("Replaying", processor)
        self.until: dict[tuple[str, int], int] = {}
        """(topic, partition) -> the committed offset: records before it are replays."""
        self.replayed = 0

    def starts(
        self, tasks: Mapping[int, Task], committed: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """Where to read each replay topic of `tasks` from, when it is before the committed
        offset (what is not here is read from its committed offset)."""
        starts: dict[tuple[str, int], int] = {}
        for p, task in tasks.items():
            for topic in self.topics:
                point = task.replay_point(topic)
                at = committed.get((topic, p))
                if point is not None and at is not None and point < at:
                    starts[(topic, p)] = point
                    self.until[(topic, p)] = at
                    log.info("partition %d: replaying %s from %d to %d", p, topic, point, at)
                else:
                    self.until.pop((topic, p), None)
        return starts

    def is_replay(self, record: InputRecord) -> bool:
        where = (record.topic, record.partition)
        until = self.until.get(where)
        if until is None:
            return False
        if record.offset >= until - 1:
            del self.until[where]  # caught up (with this record, or before it)
        return record.offset < until

    def forget(self, topic: str, partition: int) -> None:
        self.until.pop((topic, partition), None)

    def replay(self, task: Task, record: InputRecord, now_ms: int) -> None:
        """Hand a replay to the processor as a unit of work; a replay that raises is logged
        and skipped (its effect was written, or is lost: a run left `running` expires)."""
        self.replayed += 1
        task.attempt(
            partial(self.processor.replay, task, record, now_ms),
            partial(_replay_failed, record),
        )

    def due(self, tasks: Mapping[int, Task], now_ms: int) -> bool:
        """Whether a key has waited `write_behind_ms` (then a commit must come, to write it,
        even when nothing else happens)."""
        cutoff = now_ms - self.write_behind_ms
        return any(
            (since := task.deferred.waiting_since()) is not None and since < cutoff
            for task in tasks.values()
        )

    def write_due(self, tasks: Mapping[int, Task], now_ms: int) -> None:
        """Just before a commit: write the keys that waited `write_behind_ms`, then store
        every task's replay points (in this transaction, with the input offsets)."""
        if not self.topics:
            return
        cutoff = now_ms - self.write_behind_ms
        replaying = {p for _, p in self.until}
        for p, task in tasks.items():
            for key in task.deferred.older_than(cutoff):
                task.attempt(
                    partial(self.processor.flush, task, key, now_ms),
                    partial(_flush_failed, task, key),
                )
            if p not in replaying:  # the stored point stays until the replay has caught up
                task.store_replay_points()


def _replay_failed(record: InputRecord, exc: Exception) -> None:
    log.error(
        "replaying %s[%d]@%d failed; skipped",
        record.topic,
        record.partition,
        record.offset,
        exc_info=exc,
    )


def _flush_failed(task: Task, key: bytes, exc: Exception) -> None:
    """A deferred state that cannot be written stays deferred (it is retried at the next
    commit; a restore replays it meanwhile)."""
    log.error("partition %d: writing %r failed", task.partition, key[:300], exc_info=exc)
