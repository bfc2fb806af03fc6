"""What every target returns, and how a worker asks a running invocation to stop."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kadence.headers import Headers
from kadence.models import ErrorInfo, ExecutionRequested, OutcomeStatus, RunResult


@dataclass(frozen=True, slots=True)
class Result:
    """How one invocation ended, in the outcome's terms; `detail`: what it returned (an HTTP
    answer's status and body start, a handler's value), kept in the outcome."""

    status: OutcomeStatus
    retryable: bool = False
    error: ErrorInfo | None = None
    detail: RunResult | None = None

    @classmethod
    def ok(cls, detail: RunResult | None = None) -> Result:
        return cls(OutcomeStatus.succeeded, detail=detail)

    @classmethod
    def failed(
        cls,
        kind: str,
        message: str,
        *,
        retryable: bool,
        code: str | None = None,
        detail: RunResult | None = None,
    ) -> Result:
        error = ErrorInfo.cut(kind, message, code)
        return cls(OutcomeStatus.failed, retryable, error, detail)


class Stop:
    """Set by the worker to stop an invocation: cancelled, timed out or lease lost.

    Targets check `is_set()` or register an `on_stop` callback that interrupts blocking I/O
    (the HTTP target closes its socket). A run makes one, so it is small: the event a blocking
    `wait` needs is made only by the first such wait (a threading.Event per run, with its
    Condition and locks, was 15-20 µs of the worker's GIL time a run at 3 000 webhooks a second).
    """

    __slots__ = ("__weakref__", "_callbacks", "_event", "_lock", "_set", "reason")

    def __init__(self) -> None:
        self.reason: OutcomeStatus | None = None
        self._set = False
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def set(self, reason: OutcomeStatus) -> None:
        with self._lock:
            if self._set:
                return
            self.reason = reason
            self._set = True
            if self._event is not None:
                self._event.set()
            callbacks = list(self._callbacks)
        for cb in callbacks:
            cb()

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout_s: float) -> bool:
        """Whether the stop was set within `timeout_s` (at once if it already was)."""
        with self._lock:
            if self._set:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout_s)

    def on_stop(self, cb: Callable[[], None]) -> None:
        with self._lock:
            if not self._set:
                self._callbacks.append(cb)
                return
        cb()

    def release(self) -> None:
        """The run is over: forget the callbacks (nothing is left to interrupt). A callback
        that names its stop (a closure over it) is a reference cycle, which only Python's
        collector would free, thousands a second, in pauses of a second."""
        with self._lock:
            self._callbacks.clear()


Target = Callable[[ExecutionRequested, Stop, float], Result]
"""(execution, stop, deadline as time.monotonic()) -> result."""


@runtime_checkable
class Forwards(Protocol):
    """A target that sends the execution record itself: given the record's bytes as the worker
    read them, it may send those instead of encoding the execution again."""

    def forward(self, ex: ExecutionRequested, stop: Stop, deadline: float, record: bytes) -> Result:
        """As a call, with `record`: the bytes `ex` was decoded from."""
        ...


@runtime_checkable
class Starts(Protocol):
    """A target that can start a run without blocking a thread for it: `start` returns a future
    that the target's own I/O (a delivery callback) or the run's stop resolves (the worker's
    timeout, cancel and self-fencing all arrive as a stop), or None when this run needs the
    blocking call (which the worker then makes on its pool). `record`: as in `Forwards`."""

    def start(
        self, ex: ExecutionRequested, stop: Stop, record: bytes | None
    ) -> Future[Result] | None:
        """Must return at once."""
        ...

    def can_start(self, ex: ExecutionRequested) -> bool:
        """Whether `start` would take `ex` now without a thread: such a run does not take one
        of the worker's slots. Must return at once; a wrong yes only makes the run wait for a
        pool thread."""
        ...


@dataclass(frozen=True, slots=True)
class Delivery:
    """The one record a run amounts to, for the worker to write in its own transaction."""

    topic: str
    key: bytes
    value: bytes
    headers: Headers


@runtime_checkable
class Delivers(Protocol):
    """A target whose run is one record on a Kafka topic: the worker may write that record in
    the transaction that also carries the run's outcome and the consumer offsets past its
    execution, so a `read_committed` reader sees it exactly once (streams/worker/delivering.py).
    """

    def delivery(self, ex: ExecutionRequested, record: bytes | None) -> Delivery | None:
        """The record for `ex` (`record`: as in `Forwards`), or None when it cannot be written
        that way now (its topic is not known to exist yet). Must return at once."""
        ...

    def unanswered(self, ex: ExecutionRequested) -> bool:
        """Whether `delivery` returns None only because the broker has not answered yet (its
        topic is being created, or the last try timed out or found no broker): the run then
        waits for the broker instead of taking the claimed path, which needs it as much.
        False once a try failed for good (refused, not allowed). Must return at once."""
        ...


@runtime_checkable
class Prepares(Protocol):
    """A target that can get ready for an execution before it is due (look-ahead gives the
    worker the execution seconds early): e.g. create the tenant's topic, so the run at the due
    time does not wait for it. Must return at once; failures are the run's to report."""

    def prepare(self, ex: ExecutionRequested) -> None: ...
