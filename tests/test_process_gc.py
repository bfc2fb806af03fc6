"""The long-running processes collect cyclic garbage rarely and leave start-up's objects out of
the collector's sight (apps/processes.tune_gc), in a child so this process keeps its own."""

from __future__ import annotations

import json
import subprocess
import sys

from apps.processes import GC_THRESHOLDS

PROBE = """
import gc, json
before = (gc.get_threshold(), gc.get_freeze_count())
from apps.processes import tune_gc
tune_gc()
print(json.dumps([before, (gc.get_threshold(), gc.get_freeze_count())]))
"""


def test_tune_gc_raises_the_thresholds_and_freezes_what_start_up_built() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    (threshold, frozen), (tuned, frozen_after) = json.loads(out)
    assert tuple(threshold) == (700, 10, 10)  # CPython's default, as a process starts
    assert tuple(tuned) == GC_THRESHOLDS
    assert frozen == 0 and frozen_after > 10_000  # the modules imported by then, at least
