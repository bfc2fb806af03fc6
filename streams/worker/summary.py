"""One INFO line about the worker's runs every so often, instead of one line per run.

Per-run lines are DEBUG: at hundreds of runs a second, a line each costs the worker more than
the runs' bookkeeping, and buries the warnings. The summary says what a per-run log was read
for: how many started and finished (by status), how late they started, how many are running.
"""

from __future__ import annotations

import logging
from collections import Counter

log = logging.getLogger(__name__)
EVERY_MS = 10_000


class RunSummary:
    def __init__(self, now_ms: int, every_ms: int = EVERY_MS) -> None:
        self.every_ms = every_ms
        self._since_ms = now_ms
        self._lateness_s: list[float] = []
        self._finished: Counter[str] = Counter()

    def started(self, lateness_s: float) -> None:
        self._lateness_s.append(lateness_s)

    def started_all(self, lateness_s: list[float]) -> None:
        """`started` of each (the runs of one transaction)."""
        self._lateness_s.extend(lateness_s)

    def finished(self, status: str, runs: int = 1) -> None:
        self._finished[status] += runs

    def tick(self, now_ms: int, in_flight: int) -> None:
        """Log the window's summary once it is `every_ms` long (nothing when the worker was
        idle all along), and start the next."""
        if now_ms - self._since_ms < self.every_ms:
            return
        window_s = (now_ms - self._since_ms) / 1000
        self._since_ms = now_ms
        late, finished = sorted(self._lateness_s), self._finished
        self._lateness_s, self._finished = [], Counter()
        if not late and not finished and not in_flight:
            return
        by_status = ", ".join(f"{status} {n}" for status, n in sorted(finished.items()))
        log.info(
            "runs in the last %.0f s: %d started (start lateness p50 %.3f s, p99 %.3f s), "
            "%d finished (%s); %d in flight",
            window_s,
            len(late),
            _quantile(late, 0.50),
            _quantile(late, 0.99),
            sum(finished.values()),
            by_status or "none",
            in_flight,
        )


def _quantile(ordered: list[float], q: float) -> float:
    """Nearest rank of an ascending list (0 when it is empty)."""
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
