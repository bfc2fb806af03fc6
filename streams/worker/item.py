"""An execution a worker has read, as its inbox holds it."""

from __future__ import annotations

from dataclasses import dataclass

from kadence.models import ExecutionRequested
from kadence.targets import Delivery
from kadence.throttle import Lane


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
    lane: Lane | None = None
    """The destination whose rate limit its run keeps (None: none): kadence/throttle.py."""
    waited_from: int = 0
    """When it began to wait for its destination's rate limit (0: it has not waited)."""
    throttled_ms: int = 0
    """How long it waited for it before it started."""
