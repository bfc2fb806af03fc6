"""An execution a worker has read, as its inbox holds it (or a batch of them, moving together)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kadence.clock import datetime_to_ms
from kadence.models import ExecutionRequested
from kadence.targets import Delivery
from kadence.throttle import Lane

Prepared = tuple[int, tuple[bytes, ...]]
"""A delivered run's `succeeded` outcome made while its execution waited
(streams/worker/outcome_bytes.py, `DeliveredOutcomes.prepare`): its outcomes partition and the
bytes of its value around the instants."""


@dataclass(eq=False)
class Item:
    partition: int
    offset: int
    execution: ExecutionRequested
    due_ms: int
    held: bool = True
    record: bytes | None = None
    """The execution's bytes as read (a target that forwards them sends them unchanged)."""
    claimed: bool = False
    """Claimed ahead of its due time: covered by the worker's lease, no longer by the offset
    commit, still waiting (in due order and tenant fairness) for its start."""
    leaseless: bool = False
    """Never claimed ahead (delivered in a transaction when due: streams/worker/delivering.py)."""
    offered: bool = False
    """In the inbox's index of what may be claimed ahead (`upcoming`)."""
    prepared: Delivery | None = None
    """A leaseless execution's record, built while it waited for its due time (so the turn at
    its due time only produces it): streams/worker/delivering.py."""
    outcome: Prepared | None = None
    """A leaseless execution's `succeeded` outcome but its start, made with `prepared`."""
    lane: Lane | None = None
    """The destination whose rate limit its run keeps (None: none): kadence/throttle.py."""
    waited_from: int = 0
    """When it began to wait for its destination's rate limit (0: it has not waited)."""
    throttled_ms: int = 0
    """How long it waited for it before it started."""
    batch: list[Item] | None = None
    """An ExecutionBatch held as one item (its `execution` the first of them): its executions,
    one item each, all of its partition, offset and due time, that move together (delivered in
    one transaction, or claimed together). None: a record of one execution."""
    head: Item | None = None
    """Of an execution of a batch: the item that holds the batch."""
    weight: int = 1
    """Executions it stands for (a batch's that are left)."""
    nbytes: int = 0
    """Their bytes as read (`record`'s length, or the batch's entries')."""
    pins: list[int] | None = None
    """Of a batch: the offsets of the revocations that took executions out of it. The offset
    commit holds them open with the batch's own, so that a next owner of the partition, reading
    the batch again, reads them again too (streams/worker/inbox.py, `_revoke_in`)."""

    def __post_init__(self) -> None:
        if not self.nbytes and self.record:
            self.nbytes = len(self.record)


def read_after(item: Item, partition: int, offset: int) -> bool:
    """Whether `item` was read after the record at `partition`, `offset` (-1: unknown), on
    the same partition: a revocation there does not revoke it (the scheduler writes each
    revocation after the execution it revokes; one after it is a newer dispatch)."""
    return item.partition == partition and item.offset > offset >= 0


DUE_KEPT = 8_192
"""Due instants whose milliseconds are kept (the executions of a second share theirs, and the
reader hands them the same datetime: kadence/avro_fast.py); cleared when full."""
_DUE_MS: dict[datetime, int] = {}


def due_ms(at: datetime) -> int:
    """`datetime_to_ms(at)`, kept: it cost more than the rest of holding an execution. Equal
    aware instants are the same milliseconds in any zone; a naive one equals none of them and
    raises, as `datetime_to_ms` does."""
    ms = _DUE_MS.get(at)
    if ms is None:
        ms = datetime_to_ms(at)
        if len(_DUE_MS) >= DUE_KEPT:
            _DUE_MS.clear()
        _DUE_MS[at] = ms
    return ms
