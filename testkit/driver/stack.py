"""Kadence's processes on the test driver: the scheduler, reaper and query view wired exactly as
`apps/*.py` wire them (their `wire` functions, on the driver's clients and clock), workers with
an in-process target, the inputs as `KadenceClient` writes them, and readers of what they wrote.

The whole execution path (definition -> firing -> claim -> run -> outcome -> history, and the
reaper's redeliveries) then runs in one process, in milliseconds, with time moving only when a
test advances the clock: `settle()` turns every loop until nothing moves any more.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TypeVar

from apps import reaper as reaper_app
from apps import scheduler as scheduler_app
from apps import views as views_app
from kadence.batches import records_in
from kadence.client import routing_key
from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.headers import TYPE
from kadence.models import (
    COMMAND_TYPES,
    DeadLetter,
    ExecutionOutcome,
    ExecutionRequested,
    ExecutionRevoked,
    HistoryRecord,
    LeaseSnapshot,
    ScheduleDefinition,
    WireModel,
)
from kadence.models.commands import Command
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.targets import Target
from streams.runtime.loop import Runner
from streams.views.materializer import Materializer
from streams.worker.loop import Worker
from testkit.driver.driver import Driver
from testkit.driver.leases import LeaseFact, lease_facts, snapshots
from testkit.driver.reader import LogReader
from testkit.driver.targets import InProcessTarget

R = TypeVar("R", bound=WireModel)


class DriverStack:
    """One Kadence deployment (a namespace's topics) on a driver."""

    def __init__(self, driver: Driver, settings: KadenceSettings) -> None:
        self.driver = driver
        self.settings = settings
        self.topics = driver.provision(settings)
        self.codec = Codec()
        self.target = InProcessTarget(driver.clock)
        self.reader = LogReader(driver.cluster, self.topics.executions)
        self.created_ms: dict[str, int] = {}
        """When each job's latest definition was written (the checker's `created`)."""

    def _as(self, instance: str) -> KadenceSettings:
        return self.settings.model_copy(update={"instance_id": instance})

    # -- processes -----------------------------------------------------------------------------

    def scheduler(self, instance: str = "s0", *, in_memory: bool = False) -> Runner:
        d = self.driver
        return d.add(
            scheduler_app.wire(self._as(instance), d.clients, d.clock, in_memory=in_memory)
        )

    def reaper(self, instance: str = "r0", *, in_memory: bool = False) -> Runner:
        """A reaper reading expired snapshot refs straight from the in-memory log
        (`self.reader` counts its reads)."""
        d = self.driver
        wired = reaper_app.wire(
            self._as(instance), d.clients, d.clock, in_memory=in_memory, reader=self.reader
        )
        return d.add(wired)

    def views(self, instance: str = "v0", *, in_memory: bool = False) -> Materializer:
        d = self.driver
        wired = views_app.wire(self._as(instance), d.clients, d.clock, in_memory=in_memory)
        return d.add(wired)

    def worker(self, instance: str = "w0", targets: Mapping[str, Target] | None = None) -> Worker:
        """A worker whose `handler` target is this stack's in-process one (unless given)."""
        chosen: dict[str, Target] = dict(targets or {"handler": self.target})
        return self.driver.worker(self.settings, chosen, instance_id=instance)

    # -- inputs, as KadenceClient writes them --------------------------------------------------

    def put(self, *definitions: ScheduleDefinition) -> None:
        for d in definitions:
            partition = partition_for(d.routing_key, self.settings.partitions)
            self.driver.send(self.topics.schedules, d, key=d.key, partition=partition)
            self.created_ms[d.key] = self.driver.now_ms()

    def delete(self, tenant: str, job_id: str) -> None:
        key = f"{tenant}/{job_id}"
        partition = partition_for(routing_key(tenant, job_id, None), self.settings.partitions)
        self.driver.produce(
            self.topics.schedules,
            None,
            key=key.encode(),
            partition=partition,
            headers=[(TYPE, b"tombstone")],
        )

    def send(self, command: Command) -> None:
        assert isinstance(command, COMMAND_TYPES)
        route = routing_key(command.tenant, command.job_id, None)
        partition = partition_for(route, self.settings.partitions)
        self.driver.send(self.topics.commands, command, key=command.key, partition=partition)

    # -- time ----------------------------------------------------------------------------------

    def settle(self, *, passes: int = 500, wait_s: float = 5.0) -> None:
        """Turn every loop until nothing moves: two passes in a row with no record written and
        every run parked in a shut gate. Target calls run on the workers' threads, so this
        may wait for them (in real time); the clock stays where it is."""
        deadline = time.monotonic() + wait_s
        quiet = 0
        for _ in range(passes):
            before = self._written()
            self.driver.turn()
            if self._written() == before and self._runs_quiet():
                if self._commit_open():
                    quiet = 0
                    continue
                quiet += 1
                if quiet == 2:
                    return
            else:
                quiet = 0
            time.sleep(0.0002)  # the GIL for the invocation threads
            if time.monotonic() > deadline:
                break
        raise AssertionError("the stack did not settle")

    def run_for(self, ms: int, *, step_ms: int = 500) -> None:
        """Let `ms` of the clock pass in steps, settling after each (leases renew, timers fire
        and retries fall due as they would in a running deployment)."""
        self.settle()
        left = ms
        while left > 0:
            step = min(step_ms, left)
            self.driver.advance(step)
            left -= step
            self.settle()

    def _commit_open(self) -> bool:
        """Commit the runners' open transactions, as their commit interval would once the clock
        moved (which settling must not make it do); True if there was one."""
        open_ = [
            loop for loop in self.driver.loops if isinstance(loop, Runner) and loop.session.open
        ]
        for loop in open_:
            loop.commit_now()
        return bool(open_)

    def _written(self) -> int:
        cluster = self.driver.cluster
        with cluster.lock:
            return sum(log.high for logs in cluster.logs.values() for log in logs)

    def _runs_quiet(self) -> bool:
        """Every run of a live worker is parked in a shut gate (not computing, not finished
        and waiting to be reported)."""
        return all(
            run.future is not None and not run.future.done() and self.target.holds(run.stop)
            for loop in self.driver.loops
            if isinstance(loop, Worker)
            for run in loop.runs.values()
        )

    # -- outputs -------------------------------------------------------------------------------

    def read(self, topic: str, kind: type[R]) -> list[R]:
        """The committed records of `kind` on `topic` (undecodable ones left out)."""
        out: list[R] = []
        for m in self.driver.messages(topic):
            value = m.value()
            if value is None:
                continue
            try:
                record = self.codec.decode(value)
            except DecodeError:
                continue
            out += [r for r in records_in(self.codec, record) if isinstance(r, kind)]
        return out

    def executions(self) -> list[ExecutionRequested]:
        return self.read(self.topics.executions, ExecutionRequested)

    def revocations(self) -> list[ExecutionRevoked]:
        return self.read(self.topics.executions, ExecutionRevoked)

    def outcomes(self, job_id: str | None = None) -> list[ExecutionOutcome]:
        found = self.read(self.topics.outcomes, ExecutionOutcome)
        return [o for o in found if job_id is None or o.job_id == job_id]

    def history(self, job_id: str | None = None) -> list[HistoryRecord]:
        found = self.read(self.topics.history, HistoryRecord)
        return [h for h in found if job_id is None or h.job_id == job_id]

    def dead_letters(self) -> list[DeadLetter]:
        return self.read(self.topics.dead_letter, DeadLetter)

    def leases(self) -> list[LeaseFact]:
        """(kind, execution id, delivery) of every lease event, or of what the snapshots
        stand for (`testkit.driver.leases`), in time order."""
        return lease_facts(self.driver.cluster, self.topics)

    def snapshots(self) -> list[LeaseSnapshot]:
        return snapshots(self.driver.cluster, self.topics)

    def close(self) -> None:
        self.target.close()
