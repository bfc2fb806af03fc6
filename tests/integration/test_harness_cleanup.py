"""A stack whose start fails half-way stops what it had started: nothing outlives the fixture
(the dashboard fixture once left its scheduler, reaper and worker running this way)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kadence.settings import KadenceSettings
from testkit import process_tree
from testkit.scheduler_process import SchedulerProcess
from testkit.stack import ReaperProcess, Stack
from tests.conftest import session_broker

pytestmark = pytest.mark.kafka


def test_a_stack_whose_reaper_fails_to_start_stops_its_scheduler(
    settings: KadenceSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schedulers: list[SchedulerProcess] = []
    start_scheduler = SchedulerProcess.start

    def scheduler_started(self: SchedulerProcess, wait_assigned: bool = True) -> SchedulerProcess:
        schedulers.append(self)
        return start_scheduler(self, wait_assigned)

    def reaper_fails(self: ReaperProcess) -> ReaperProcess:
        raise RuntimeError("apps.reaper exited: the port was taken")

    monkeypatch.setattr(SchedulerProcess, "start", scheduler_started)
    monkeypatch.setattr(ReaperProcess, "start", reaper_fails)
    with pytest.raises(RuntimeError, match="port was taken"):
        Stack.start(settings, tmp_path)
    (scheduler,) = schedulers
    assert scheduler.proc is not None  # it did start ...
    assert not scheduler.running  # ... and was stopped
    assert process_tree.leftovers(os.getpid(), expected=session_broker()) == []
