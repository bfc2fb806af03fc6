"""A timer wheel for the next minute or so of due entries: O(1) insert, O(1) per fire.

Entries further out than the wheel's span stay in the store's due index and are loaded as time
approaches them, so memory holds only the near future, whatever the number of jobs.

Entries due in the same tick leave in turns by key group (the part of the key before the first
`/`: the tenant of a job key): one tenant's hundred thousand jobs due at midnight do not all go
out before another tenant's one job due at midnight.
"""

from __future__ import annotations


class TimerWheel:
    """Slots of `tick_ms`; `slots * tick_ms` must exceed the loading window."""

    def __init__(self, start_ms: int, tick_ms: int = 10, slots: int = 8192) -> None:
        self.tick_ms = tick_ms
        self.slots: list[list[tuple[int, bytes]]] = [[] for _ in range(slots)]
        self.span_ms = tick_ms * slots
        self._next_tick = start_ms // tick_ms  # first tick not yet swept
        self._overdue: list[tuple[int, bytes]] = []
        self.size = 0

    def insert(self, due_ms: int, key: bytes) -> bool:
        """Add an entry; False (not added) if it lies beyond the span from the sweep point."""
        tick = due_ms // self.tick_ms
        if tick < self._next_tick:
            self._overdue.append((due_ms, key))
        elif tick - self._next_tick >= len(self.slots):
            return False
        else:
            self.slots[tick % len(self.slots)].append((due_ms, key))
        self.size += 1
        return True

    def pop_due(self, now_ms: int, limit: int) -> list[tuple[int, bytes]]:
        """Up to `limit` entries with due <= now, oldest tick first. Never one that is not due."""
        out = self._overdue[:limit]
        self._overdue = self._overdue[limit:]
        now_tick = now_ms // self.tick_ms
        while self._next_tick <= now_tick and len(out) < limit:
            slot = self.slots[self._next_tick % len(self.slots)]
            if self._next_tick == now_tick:  # the current tick: only what is due by now
                ready = [e for e in slot if e[0] <= now_ms]
                slot[:] = [e for e in slot if e[0] > now_ms]
            else:
                ready, slot[:] = slot[:], []
            ready = interleave(ready)
            room = limit - len(out)
            out.extend(ready[:room])
            self._overdue.extend(ready[room:])
            if self._next_tick == now_tick:
                break
            self._next_tick += 1
        self.size -= len(out)
        return out

    def advance_to(self, now_ms: int) -> None:
        """Move the sweep point to `now_ms`; entries of the ticks passed become overdue.

        Called before loading the next window, so that after a stall (a long GC, SIGSTOP, a
        clock jump) the new window still fits the wheel's span and nothing is dropped.
        """
        now_tick = now_ms // self.tick_ms
        last = min(now_tick, self._next_tick + len(self.slots))
        while self._next_tick < last:
            slot = self.slots[self._next_tick % len(self.slots)]
            self._overdue.extend(slot)
            slot.clear()
            self._next_tick += 1
        self._next_tick = max(self._next_tick, now_tick)

    def clear(self, start_ms: int) -> None:
        for slot in self.slots:
            slot.clear()
        self._overdue.clear()
        self._next_tick = start_ms // self.tick_ms
        self.size = 0


def interleave(entries: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The entries, groups (key prefix before `/`) taking turns, each group in its own order."""
    groups: dict[bytes, list[tuple[int, bytes]]] = {}
    for entry in entries:
        groups.setdefault(entry[1].split(b"/", 1)[0], []).append(entry)
    if len(groups) < 2:
        return entries
    out: list[tuple[int, bytes]] = []
    queues = [iter(g) for g in groups.values()]
    while queues:
        alive = []
        for q in queues:
            turn = next(q, None)
            if turn is not None:
                out.append(turn)
                alive.append(q)
        queues = alive
    return out
