"""A run's Stop (kadence/targets.py): set once, its reason kept, every callback called once,
and a blocking `wait` woken whether the stop comes before it, during it, or never; the event a
wait needs is made only by a wait."""

from __future__ import annotations

import threading
import time

from kadence.models import OutcomeStatus
from kadence.targets import Stop


def test_a_stop_set_once_keeps_its_first_reason_and_calls_back_once() -> None:
    stop = Stop()
    called: list[str] = []
    stop.on_stop(lambda: called.append("early"))
    assert not stop.is_set()
    stop.set(OutcomeStatus.timed_out)
    stop.set(OutcomeStatus.cancelled)
    assert stop.is_set()
    assert stop.reason is OutcomeStatus.timed_out
    stop.on_stop(lambda: called.append("late"))  # after the stop: called at once
    assert called == ["early", "late"]


def test_a_wait_returns_at_once_on_a_stop_already_set() -> None:
    stop = Stop()
    stop.set(OutcomeStatus.cancelled)
    started = time.monotonic()
    assert stop.wait(30.0)
    assert time.monotonic() - started < 1.0


def test_a_wait_is_woken_by_a_stop_from_another_thread_and_times_out_without_one() -> None:
    stop = Stop()
    assert not stop.wait(0.05)
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(stop.wait(30.0)))
    waiter.start()
    time.sleep(0.1)
    started = time.monotonic()
    stop.set(OutcomeStatus.lease_lost)
    waiter.join(10.0)
    assert woken == [True]
    assert time.monotonic() - started < 5.0


def test_a_run_that_never_waits_makes_no_event() -> None:
    stop = Stop()
    stop.on_stop(lambda: None)
    stop.set(OutcomeStatus.cancelled)
    stop.release()
    assert stop._event is None  # the per-run cost the lazy event saves
