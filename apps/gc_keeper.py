"""What a long-running process keeps alive is moved out of the cyclic collector's sight as it
goes, and the collector looks at everything only every few minutes.

Python's collector walks every young container object each time it runs, and moves what
survives to an older generation, walked again there. A worker holds each execution it has read
(three or four containers: the model, its dict, its fields set, the inbox's item) until it is
due, up to the 30 s of look-ahead, so every one of them was walked twice on its way to the
oldest generation. At 8 000 executions a second (`bench.sustained`) that was 1.5-3 s of a
worker's CPU a minute, about a tenth of it, and it found nothing to free: Kadence's records,
states and entries hold no reference cycles, and the refcounts free them.

So `GcKeeper` freezes (`gc.freeze`, a constant-time move of every tracked object to the
generation the collector never walks) every FREEZE_EVERY_S: what survived that long is left
alone, and young collections see only what was made since. A cycle frozen before it became
garbage would never be freed, so every `sweep_s` (KADENCE_GC_SWEEP_S) the keeper unfreezes
everything and runs a full collection, then freezes again: garbage cycles live `sweep_s` at most,
and the walk of everything a process holds (the pause a full collection always was; without the
keeper one came every 400 middle collections) happens that often. `KADENCE_GC_SWEEP_S=0` turns
the keeper off: the collector as GC_THRESHOLDS leaves it.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kadence.errors import KadenceError

log = logging.getLogger(__name__)
FREEZE_EVERY_S = 0.025
"""How often what is alive is frozen: a run held for its due time is frozen within this."""
SWEEP_EVERY_S = 600.0
"""Seconds between full collections (the default of KADENCE_GC_SWEEP_S)."""
MAX_SWEEP_S = 86_400.0
"""The most KADENCE_GC_SWEEP_S may be: a day."""


def sweep_seconds(text: str | None) -> float:
    """SWEEP_EVERY_S, or the seconds of `text` (0: no keeper)."""
    if not text:
        return SWEEP_EVERY_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= MAX_SWEEP_S:  # (NaN compares false: refused too)
        raise KadenceError(
            f"KADENCE_GC_SWEEP_S={text!r}: seconds between full collections, 0 to {MAX_SWEEP_S:.0f}"
            " (0: the collector as it is, nothing frozen)"
        )
    return value


class GcKeeper:
    """Freezes what is alive at each `step`, and sweeps (unfreeze, full collection, freeze)
    once `sweep_s` has passed since the last sweep."""

    def __init__(self, sweep_s: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.sweep_s = sweep_s
        self.monotonic = monotonic
        self.swept_at = monotonic()
        self.sweeps = 0
        self.collected = 0
        """Garbage objects the sweeps found (in cycles: everything else the refcounts free)."""

    def step(self) -> None:
        now = self.monotonic()
        if now - self.swept_at >= self.sweep_s:
            self.sweep()
        gc.freeze()

    def sweep(self) -> None:
        started = time.perf_counter()
        gc.unfreeze()
        found = gc.collect()
        gc.freeze()
        self.swept_at = self.monotonic()
        self.sweeps += 1
        self.collected += found
        log.info(
            "full collection: %d objects in cycles freed, %d kept, in %.0f ms",
            found,
            gc.get_freeze_count(),
            (time.perf_counter() - started) * 1000,
        )

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(FREEZE_EVERY_S):
            self.step()


def start_keeper(stop: threading.Event, sweep_s: float) -> threading.Thread | None:
    """A daemon thread keeping the collector out of the way until `stop` (None: `sweep_s` is
    0, the keeper is off)."""
    if sweep_s == 0:
        return None
    thread = threading.Thread(target=GcKeeper(sweep_s).run, args=(stop,), name="gc-keeper")
    thread.daemon = True
    thread.start()
    return thread


@contextmanager
def keeping(sweep_s: float) -> Iterator[None]:
    """The keeper for a block (a benchmark run in a process that goes on, a test's): stopped at
    its end and everything unfrozen, so the process's collector sees all of it again."""
    stop = threading.Event()
    thread = start_keeper(stop, sweep_s)
    try:
        yield
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        gc.unfreeze()
