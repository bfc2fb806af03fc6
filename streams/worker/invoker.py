"""Starting a claimed run's invocation: without a thread when its target can, else on the pool.

A target that `Starts` returns a future without a thread waiting on it, and the run takes no
slot (`pooled` False): the Kafka topic target (its topic known) produces and its delivery
callback settles the future; the HTTP and SQS targets and `async def` handlers run a coroutine
on the targets' event loop (connectors/aio.py). `worker_async_max_in_flight` bounds such runs
(the worker's inbox holds the rest). Others run on the bounded pool, with the bytes the worker
read when they `Forward` them. Timeouts, cancels and self-fencing reach a run through its
`Stop` either way (the worker's deadline heap sets it).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future

from kadence.models import ExecutionRequested
from kadence.targets import Forwards, Result, Starts, Target
from streams.worker.active import ActiveRun, invoke
from streams.worker.event_age import too_old
from streams.worker.inbox import Item

log = logging.getLogger(__name__)


class Invoker:
    def __init__(
        self, targets: dict[str, Target], pool: Executor, now_ms: Callable[[], int]
    ) -> None:
        self.targets = targets
        self.pool = pool
        self.now_ms = now_ms
        self._forwarders: dict[str, Callable[..., Result]] = {}
        self._starters: dict[str, Callable[..., Future[Result] | None]] = {}
        self._can_start: dict[str, Callable[[ExecutionRequested], bool]] = {}
        for kind, target in targets.items():
            if isinstance(target, Forwards):
                self._forwarders[kind] = target.forward
            if isinstance(target, Starts):
                self._starters[kind] = target.start
                self._can_start[kind] = target.can_start

    def slotless(self, item: Item) -> bool:
        """`item`'s run would start without a pool thread (so without a slot)."""
        can = self._can_start.get(item.execution.target.kind)
        try:
            return can is not None and can(item.execution)
        except Exception:  # a target bug must not kill the worker: it runs on the pool
            log.exception("target %s: can_start failed", item.execution.target.kind)
            return False

    def begin(self, run: ActiveRun) -> Future[Result]:
        """The run's invocation, under way (or already ended); `run.pooled` says whether it
        takes a pool thread."""
        ex, record = run.execution, run.item.record
        kind = ex.target.kind
        caller = self.targets.get(kind)
        late = None if ex.start_by is None else too_old(ex, self.now_ms())
        if late is not None:  # past the job's max_event_age_ms: not started
            run.pooled = False
            return _ended(late)
        if caller is None:
            run.pooled = False
            return _ended(
                Result.failed(
                    "UnsupportedTarget", f"this worker has no {kind!r} target", retryable=True
                )
            )
        start = self._starters.get(kind)
        if start is not None:
            try:
                started = start(ex, run.stop, record)
            except Exception as exc:  # a target bug must not kill the worker
                log.exception("target %s failed for %s", kind, ex.execution_id)
                started = _ended(Result.failed(type(exc).__name__, str(exc), retryable=True))
            if started is not None:
                run.pooled = False
                return started
        forward = self._forwarders.get(kind)
        if forward is not None and record is not None:
            caller = functools.partial(forward, record=record)
        deadline = time.monotonic() + ex.timeout_ms / 1000
        return self.pool.submit(self._handed, run, caller, deadline)

    def _handed(self, run: ActiveRun, caller: Target, deadline: float) -> Result:
        """On a pool thread: the run is handed to its target now."""
        run.started_ms = self.now_ms()
        return invoke(caller, run.execution, run.stop, deadline)


def _ended(result: Result) -> Future[Result]:
    future: Future[Result] = Future()
    future.set_result(result)
    return future
