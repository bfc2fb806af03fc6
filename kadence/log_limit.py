"""Log lines about bad input, limited: once per key per interval, and a few per interval in all.

A reader that skips what it cannot use says so in its log, but a tenant can write a million
bad records: one line each would flood the log (and its disk) and hide everything else. A
`LogLimit` lets the first line about a key through, then stays quiet about that key for
`every_s`, and lets at most `burst` lines through per `every_s` whatever the keys; what it held
back is counted and said with the next line it lets through.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable


class LogLimit:
    def __init__(
        self,
        every_s: float = 60.0,
        burst: int = 20,
        keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every_s = every_s
        self.burst = burst
        self.keys = keys
        self.clock = clock
        self._last: OrderedDict[Hashable, float] = OrderedDict()
        """key -> when a line about it was last let through (oldest first, `keys` at most)."""
        self._window_start = -float("inf")
        self._in_window = 0
        self.held_back = 0
        """Lines not written since the last one that was."""

    def allow(self, key: Hashable) -> bool:
        """Whether to write a line about `key` now; if not, it is counted in `held_back`."""
        now = self.clock()
        if now - self._window_start >= self.every_s:
            self._window_start, self._in_window = now, 0
        last = self._last.get(key)
        if (last is not None and now - last < self.every_s) or self._in_window >= self.burst:
            self.held_back += 1
            return False
        self._in_window += 1
        self._last[key] = now
        self._last.move_to_end(key)
        while len(self._last) > self.keys:
            self._last.popitem(last=False)
        return True

    def take_held_back(self) -> int:
        """How many lines were held back since the last one written (and start again at 0)."""
        held, self.held_back = self.held_back, 0
        return held
