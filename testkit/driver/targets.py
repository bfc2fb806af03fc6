"""An in-process target for workers on the driver: job behaviours by name, every call logged
with the driver's clock, and gates a test opens when it wants a run to end.

It serves `handler` targets (`HandlerTarget(name=...)`) as `connectors.handlers.call` does, from
its own table rather than the process-wide registry, so tests do not leak handlers into each
other. The driver's `settle` needs to know when no invocation is still computing: a run is
quiet only while its call is parked in a gate that stays shut.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from kadence.clock import Clock, datetime_to_ms
from kadence.models import ExecutionRequested, HandlerTarget, OutcomeStatus
from kadence.targets import Result, Stop

Behaviour = Callable[[ExecutionRequested, Stop], Result | None]
"""What a job does when it runs: None is success; raising fails the attempt for good."""


@dataclass(frozen=True)
class Hit:
    """One call of the target, as a webhook receiver would log it."""

    execution_id: str
    key: str
    attempt: int
    delivery: int
    due_ms: int
    at_ms: int
    """The driver's clock when the call began."""


@dataclass
class Gate:
    """A behaviour that runs until the test opens the gate, or the worker stops the run (then
    it returns the stop's reason), unless it is stubborn and ignores the stop."""

    owner: InProcessTarget
    stubborn: bool = False
    opened: threading.Event = field(default_factory=threading.Event)
    result: Result = field(default_factory=Result.ok)

    def open(self, result: Result | None = None) -> None:
        if result is not None:
            self.result = result
        self.opened.set()

    waiting: list[Stop] = field(default_factory=list)
    """The stops of the calls parked here now."""

    @property
    def waking(self) -> bool:
        """A parked call is about to return (the gate is open, or its run was stopped)."""
        return bool(self.waiting) and (
            self.opened.is_set() or any(s.is_set() and not self.stubborn for s in self.waiting)
        )

    def __call__(self, _ex: ExecutionRequested, stop: Stop) -> Result | None:
        with self.owner.parked(self, stop):
            while not self.opened.wait(0.001):
                if self.owner.closed.is_set():
                    return Result(OutcomeStatus.cancelled)
                if stop.is_set() and not self.stubborn:
                    return Result(stop.reason or OutcomeStatus.cancelled)
        return self.result


class InProcessTarget:
    """The `handler` target of the workers on a driver."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.behaviours: dict[str, Behaviour] = {"ok": lambda _ex, _stop: None}
        self.hits: list[Hit] = []
        self.closed = threading.Event()
        self._lock = threading.Lock()
        self._gates: list[Gate] = []

    def on(self, name: str, behaviour: Behaviour) -> None:
        self.behaviours[name] = behaviour

    def gate(self, name: str, *, stubborn: bool = False) -> Gate:
        gate = Gate(self, stubborn=stubborn)
        self._gates.append(gate)
        self.on(name, gate)
        return gate

    def failing(self, name: str, code: str = "503", message: str = "target is down") -> None:
        """A job whose every attempt fails retryably (a webhook answering 503)."""
        failed = Result.failed("HttpError", message, retryable=True, code=code)
        self.on(name, lambda _ex, _stop: failed)

    def calls(self, job_id: str) -> list[Hit]:
        return [h for h in self.hits if h.key.endswith(f"/{job_id}")]

    def holds(self, stop: Stop) -> bool:
        """The call of the run with `stop` is parked in a gate and stays there until the test
        opens it (it is not computing, and not about to return)."""
        with self._lock:
            return any(stop in g.waiting and not g.waking for g in self._gates)

    @contextmanager
    def parked(self, gate: Gate, stop: Stop) -> Iterator[None]:
        with self._lock:
            gate.waiting.append(stop)
        try:
            yield
        finally:
            with self._lock:
                gate.waiting.remove(stop)

    def close(self) -> None:
        """Let every parked call return (a crashed worker's threads too)."""
        self.closed.set()

    def __call__(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        target = ex.target
        assert isinstance(target, HandlerTarget)
        with self._lock:
            self.hits.append(
                Hit(
                    ex.execution_id,
                    ex.key,
                    ex.attempt,
                    ex.delivery,
                    datetime_to_ms(ex.due_at),
                    self.clock.now_ms(),
                )
            )
        behaviour = self.behaviours.get(target.name)
        if behaviour is None:
            why = f"handler {target.name!r} is unknown in this test"
            return Result.failed("UnknownHandler", why, retryable=True)
        try:
            result = behaviour(ex, stop)
        except Exception as exc:
            return Result.failed(type(exc).__name__, str(exc), retryable=False)
        return result or Result.ok()
