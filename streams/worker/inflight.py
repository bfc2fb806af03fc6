"""The runs a worker holds, from a committed claim until their outcome commits.

What a turn needs of them costs in proportion to what happened, not to the runs in flight:
- a finished invocation queues its run and wakes the loop (`completed`, on the invocation's
  thread); the loop takes the queue in (`collect`), no future is polled;
- renewals, lease expiries and timeouts come off a heap of deadlines (`police`);
- the runs by tenant (for the tenants' caps) are counted as runs start and end.
Only runs whose invocation takes a pool thread (`ActiveRun.pooled`) take a slot and count
towards a tenant's cap of slots; one its target started without a thread (an HTTP request on
the event loop, a Kafka produce awaiting its ack) costs no thread while it waits, and counts
towards `worker_async_max_in_flight` and the tenant's share of it instead (`loose`).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future

from kadence.models import OutcomeStatus
from kadence.targets import Result
from streams.worker.active import ActiveRun, TxnWork
from streams.worker.deadlines import Deadlines, Due
from streams.worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)


class InFlight:
    def __init__(self, metrics: WorkerMetrics, now_ms: Callable[[], int]) -> None:
        self.metrics = metrics
        self.now_ms = now_ms
        self.runs: dict[str, ActiveRun] = {}
        """execution id -> the run, until its outcome commits."""
        self.by_tenant: Counter[str] = Counter()
        """tenant -> its pooled invocations still going (for the tenants' caps)."""
        self._pooled = 0
        """Pooled invocations still going: the slots taken."""
        self.loose = 0
        """Invocations without a thread still going (`worker_async_max_in_flight`)."""
        self.loose_by_tenant: Counter[str] = Counter()
        self._completed: queue.SimpleQueue[ActiveRun] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._done: dict[str, ActiveRun] = {}
        """Finished runs whose outcome has not committed yet."""
        self._renewing: dict[str, ActiveRun] = {}
        """Runs whose renewal is due and has not committed yet."""
        self._deadlines = Deadlines()

    @property
    def running(self) -> int:
        """Slots taken: pooled invocations still going. A finished run waits for its outcome
        to commit (it is still ours, and still in `runs`) but no longer holds a slot: the
        slots bound what targets are asked to do at once, and a commit's round trip must not
        idle them."""
        return self._pooled

    def _count(self, run: ActiveRun, delta: int) -> None:
        if run.pooled:
            self._pooled += delta
            counts = self.by_tenant
        else:
            self.loose += delta
            counts = self.loose_by_tenant
        tenant = run.execution.tenant
        counts[tenant] += delta
        if counts[tenant] <= 0:
            del counts[tenant]

    def alive(self, run: ActiveRun) -> bool:
        """`run` is still ours: started, and its outcome not yet committed."""
        return self.runs.get(run.execution.execution_id) is run

    # -- a run's life ------------------------------------------------------------------------

    def started(self, run: ActiveRun, future: Future[Result]) -> None:
        """`run`'s claim committed and its invocation is under way (or already done)."""
        ex = run.execution
        run.future = future
        self.runs[ex.execution_id] = run
        self._count(run, +1)
        self._deadlines.started(run)
        future.add_done_callback(lambda f: self.completed(run, f))

    def completed(self, run: ActiveRun, future: Future[Result]) -> None:
        """On the invocation's thread: stamp and queue the finished run, wake the loop."""
        run.finished_ms = self.now_ms()
        if not future.cancelled():  # cancelled: the pool was shut down with the worker
            self._completed.put(run)
            self._wake.set()

    def renewed(self, run: ActiveRun) -> None:
        """A renewal of `run` committed (its lease times have moved on)."""
        if self._renewing.get(run.execution.execution_id) is run:
            del self._renewing[run.execution.execution_id]
        self._deadlines.renewed(run)

    def ended(self, run: ActiveRun) -> None:
        """The outcome of `run` committed: it is no longer ours. Its stop's callbacks and its
        future (whose done-callback names the run) are let go, so reference counting frees the
        run at once: left to Python's collector, thousands of such cycles a second made
        collections of half a million objects, a second's pause every dozen seconds."""
        ex = run.execution
        run.stop.release()
        run.future = None
        if self.runs.get(ex.execution_id) is run:
            del self.runs[ex.execution_id]
            if self._done.get(ex.execution_id) is not run:  # ended without being collected
                self._count(run, -1)
        self._done.pop(ex.execution_id, None)
        self._renewing.pop(ex.execution_id, None)
        self._deadlines.forget_ended(self.alive)

    # -- a turn ------------------------------------------------------------------------------

    def wait(self, timeout_s: float) -> None:
        """Wait up to `timeout_s`, less if a run finishes meanwhile."""
        if timeout_s > 0 and self._completed.empty():
            self._wake.wait(timeout_s)
        self._wake.clear()  # before `collect` drains the queue: no completion is missed

    def collect(self) -> None:
        """Take in the runs that finished since the last turn."""
        while True:
            try:
                run = self._completed.get_nowait()
            except queue.Empty:
                return
            if self.alive(run) and run.execution.execution_id not in self._done:
                self._done[run.execution.execution_id] = run
                self._renewing.pop(run.execution.execution_id, None)
                self._count(run, -1)  # its slot is free: see `running`

    def police(self, now: int) -> None:
        """Self-fence runs whose lease ran out (finished ones too: an outcome not committed
        before the lease expired is stale, the reaper has handed the run on); stop runs past
        their timeout; note the runs whose renewal is due. Only runs with a deadline by `now`
        are looked at; an entry a renewal has since moved on is out of date and skipped."""
        for due, run in self._deadlines.due(now):
            if not self.alive(run) or run.future is None:
                continue
            if due is Due.expire:
                if not run.lease_lost and now >= run.lease_expires_ms:
                    self._fence(run)
            elif due is Due.timeout:
                if not run.future.done():
                    run.stop.set(OutcomeStatus.timed_out)
            elif not run.lease_lost and not run.future.done() and now >= run.next_renew_ms:
                self._renewing[run.execution.execution_id] = run

    def _fence(self, run: ActiveRun) -> None:
        assert run.future is not None
        log.warning(
            "lease of %s expired before a renewal or the outcome committed: %s",
            run.execution.execution_id,
            "reporting lease_lost" if run.future.done() else "stopping it",
        )
        run.lease_lost = True
        run.stop.set(OutcomeStatus.lease_lost)
        self._renewing.pop(run.execution.execution_id, None)
        self.metrics.lease_lost.inc()

    def report(self, txn: TxnWork) -> None:
        """Add the renewals and outcomes due to `txn`: runs whose renewal is due, and finished
        runs (until their outcome commits; the caller writes a lost lease's outcome but does
        not release it)."""
        txn.renewals.extend(self._renewing.values())
        for run in self._done.values():
            assert run.future is not None
            txn.finished.append((run, run.future.result()))
