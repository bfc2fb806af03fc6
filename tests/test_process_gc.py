"""The long-running processes collect cyclic garbage rarely and leave start-up's objects out of
the collector's sight (apps/processes.tune_gc), in a child so this process keeps its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from apps.processes import GC_THRESHOLDS, gc_thresholds
from kadence.errors import KadenceError

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


def test_the_thresholds_can_be_set_from_the_environment() -> None:
    env = {**os.environ, "KADENCE_GC_THRESHOLDS": "10000,5,400"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60,
        env=env,
    ).stdout  # fmt: skip
    assert tuple(json.loads(out)[1][0]) == (10_000, 5, 400)


@pytest.mark.parametrize("text", ["10000,5", "a,b,c", "10000,0,400", "1,2,3,4", "-1,5,5"])
def test_thresholds_that_are_not_three_positive_integers_are_refused(text: str) -> None:
    with pytest.raises(KadenceError, match="KADENCE_GC_THRESHOLDS"):
        gc_thresholds(text)
    assert gc_thresholds(None) == gc_thresholds("") == GC_THRESHOLDS
