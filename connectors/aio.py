"""One asyncio event loop on a thread of its own, where targets run their I/O without a thread
per run (the HTTP and SQS targets, `async def` handlers).

`run` starts a coroutine on the loop and returns a concurrent future, as the `Starts` protocol
wants: the worker's thread returns at once, and the future settles on the loop's thread. The
run's `Stop` (cancel, timeout, lost lease) cancels the coroutine's task at once, and the future
settles with the stop's reason; a coroutine that raises settles it with a retryable failure.
Blocking work the coroutines need (an async handler's `asyncio.to_thread`) goes to the loop's
small thread pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor

import uvloop

from kadence.models import OutcomeStatus
from kadence.targets import Result, Stop

log = logging.getLogger(__name__)
BLOCKING_THREADS = 16
"""Threads for what the loop must not wait on itself: the blocking work of `async def` handlers
(`asyncio.to_thread`). Host names are looked up without threads (connectors/http_dns.py)."""


class EventLoop:
    """Started on first use; its thread is a daemon (a worker's shutdown does not wait)."""

    def __init__(self, name: str = "kadence-aio") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._pending: list[tuple[Callable[[], Awaitable[Result]], Stop, Future[Result]]] = []
        """Runs handed over and not yet started on the loop: a burst of starts costs the
        loop one wake-up, not one each."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is not None:
            return loop
        with self._lock:
            if self._loop is None:
                loop = uvloop.new_event_loop()
                loop.set_default_executor(
                    ThreadPoolExecutor(BLOCKING_THREADS, thread_name_prefix=f"{self.name}-io")
                )
                threading.Thread(target=loop.run_forever, name=self.name, daemon=True).start()
                self._loop = loop
            return self._loop

    def run(self, make: Callable[[], Awaitable[Result]], stop: Stop) -> Future[Result]:
        """`make()` awaited on the loop, stopped by `stop`; the future never raises."""
        future: Future[Result] = Future()
        loop = self.loop
        with self._lock:
            self._pending.append((make, stop, future))
            wake = len(self._pending) == 1
        if wake:
            loop.call_soon_threadsafe(self._start_pending)
        return future

    def _start_pending(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for make, stop, future in pending:
            task = asyncio.ensure_future(_stoppable(make, stop))
            task.add_done_callback(functools.partial(_settle, future))

    def close(self) -> None:
        """Stop the loop's thread (what still runs there is dropped)."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)


def _settle(future: Future[Result], task: asyncio.Future[Result]) -> None:
    if task.cancelled():
        future.set_result(Result(OutcomeStatus.cancelled))
    else:
        future.set_result(task.result())


async def _stoppable(make: Callable[[], Awaitable[Result]], stop: Stop) -> Result:
    if stop.is_set():
        return Result(stop.reason or OutcomeStatus.cancelled)
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def interrupt() -> None:  # on the thread that sets the stop
        with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
            loop.call_soon_threadsafe(task.cancel)

    stop.on_stop(interrupt)
    try:
        return await make()
    except asyncio.CancelledError:
        if stop.is_set():
            return Result(stop.reason or OutcomeStatus.cancelled)
        raise
    except Exception as exc:  # a target bug must not lose the run
        log.exception("an asynchronous run failed")
        return Result.failed(type(exc).__name__, str(exc), retryable=True)
