"""One execution a worker read, and what one `Inbox.due` call may still hand out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kadence.models import ExecutionRequested


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


def never(_item: Item) -> bool:
    return False


@dataclass
class Budget:
    """What one `Inbox.due` call may still hand out."""

    slots: int
    room: int
    slotless: Callable[[Item], bool]

    def admits(self, item: Item, tenant_busy: int, cap: int | None) -> bool:
        if not item.claimed and self.room <= 0:
            return False
        if self.slotless(item):
            return True
        return self.slots > 0 and (cap is None or tenant_busy < cap)

    def take(self, item: Item) -> bool:
        """Count `item` in; whether it took a slot."""
        if not item.claimed:
            self.room -= 1
        if self.slotless(item):
            return False
        self.slots -= 1
        return True
