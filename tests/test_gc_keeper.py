"""What a process keeps alive is frozen as it goes and young collections no longer walk it; a
garbage cycle frozen meanwhile is freed at the next sweep (apps/gc_keeper.py). Each test runs in
a child: freezing changes the collector of the whole process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from apps.gc_keeper import SWEEP_EVERY_S, sweep_seconds
from kadence.errors import KadenceError


def in_child(source: str, **env: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, **env},
    ).stdout
    result: dict[str, object] = json.loads(out.splitlines()[-1])
    return result


KEPT = """
import gc, json
from apps.gc_keeper import GcKeeper
now = [0.0]
keeper = GcKeeper(600, monotonic=lambda: now[0])
held = [{"execution": [i]} for i in range(50_000)]  # containers kept alive, as an inbox does
keeper.step()
print(json.dumps({"frozen": gc.get_freeze_count(), "sweeps": keeper.sweeps,
                  "seen": sum(len(gc.get_objects(generation=g)) for g in range(3))}))
"""


def test_what_is_kept_alive_is_frozen_at_each_step() -> None:
    got = in_child(KEPT)
    assert got["frozen"] >= 100_000  # type: ignore[operator]  # each dict and its list
    assert got["seen"] < 1_000  # type: ignore[operator]  # what the collector still walks
    assert got["sweeps"] == 0


CYCLE = """
import gc, json, weakref
from apps.gc_keeper import GcKeeper
now = [0.0]
keeper = GcKeeper(600, monotonic=lambda: now[0])
class Node:
    pass
freed = []
a, b = Node(), Node()
a.other, b.other = b, a  # a reference cycle: only the collector frees it
weakref.finalize(a, freed.append, "a")
keeper.step()  # frozen while alive
del a, b
gc.collect()  # a full collection leaves the frozen alone
before_sweep = list(freed)
now[0] = 599.0
keeper.step()
at_599 = list(freed)
now[0] = 600.0
keeper.step()  # the sweep: unfreeze, collect, freeze again
print(json.dumps({"before_sweep": before_sweep, "at_599": at_599, "after": freed,
                  "sweeps": keeper.sweeps, "collected": keeper.collected,
                  "frozen_again": gc.get_freeze_count() > 0}))
"""


def test_a_cycle_frozen_while_alive_is_freed_at_the_next_sweep() -> None:
    got = in_child(CYCLE)
    assert got["before_sweep"] == [] and got["at_599"] == []  # frozen: out of sight till then
    assert got["after"] == ["a"]
    assert got["sweeps"] == 1 and got["collected"] >= 2  # type: ignore[operator]
    assert got["frozen_again"] is True


THREAD = """
import gc, json, threading, time
from apps.gc_keeper import start_keeper
stop = threading.Event()
thread = start_keeper(stop, 600)
held = [{"n": [i]} for i in range(10_000)]
deadline = time.monotonic() + 10
while gc.get_freeze_count() < 20_000 and time.monotonic() < deadline:
    time.sleep(0.01)
frozen = gc.get_freeze_count()
stop.set()
thread.join(5)
off = start_keeper(threading.Event(), 0)
print(json.dumps({"frozen": frozen, "alive": thread.is_alive(), "daemon": thread.daemon,
                  "off": off is None}))
"""


def test_the_keeper_thread_freezes_as_it_goes_and_stops_when_told() -> None:
    got = in_child(THREAD)
    assert got["frozen"] >= 20_000  # type: ignore[operator]
    assert got["alive"] is False and got["daemon"] is True
    assert got["off"] is True  # KADENCE_GC_SWEEP_S=0: no keeper


BLOCK = """
import gc, json, threading, time
from apps.gc_keeper import keeping
before = threading.active_count()
with keeping(600):
    held = [{"n": [i]} for i in range(10_000)]
    deadline = time.monotonic() + 10
    while gc.get_freeze_count() < 20_000 and time.monotonic() < deadline:
        time.sleep(0.01)
    inside = gc.get_freeze_count()
print(json.dumps({"inside": inside, "after": gc.get_freeze_count(),
                  "threads": threading.active_count() - before}))
"""


def test_a_block_keeps_and_gives_the_collector_everything_back_at_its_end() -> None:
    """As bench.sustained runs a rate in a process that goes on (a test's): frozen inside,
    nothing frozen and no keeper thread after."""
    got = in_child(BLOCK)
    assert got["inside"] >= 20_000  # type: ignore[operator]
    assert got == {"inside": got["inside"], "after": 0, "threads": 0}


def test_sweep_seconds_from_the_environment() -> None:
    assert sweep_seconds(None) == sweep_seconds("") == SWEEP_EVERY_S
    assert sweep_seconds("0") == 0
    assert sweep_seconds("30") == 30.0
    for bad in ("-1", "ten", "nan", "86401", "inf"):
        with pytest.raises(KadenceError, match="KADENCE_GC_SWEEP_S"):
            sweep_seconds(bad)


def test_a_process_refuses_a_bad_sweep_period_at_start() -> None:
    """The scheduler's entry point stops with the reason (exit 2) before it starts anything."""
    proc = subprocess.run(
        [sys.executable, "-m", "apps.scheduler", "--in-memory"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KADENCE_GC_SWEEP_S": "soon", "KADENCE_BOOTSTRAP_SERVERS": "x:1"},
    )
    assert proc.returncode == 2, proc.stderr
    assert "KADENCE_GC_SWEEP_S='soon'" in proc.stderr
