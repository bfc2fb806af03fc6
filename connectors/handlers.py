"""In-process handlers: Python functions a worker embedded in a tenant's service calls by name.

    from connectors.handlers import handler

    @handler("send-digest")
    def send_digest(execution, stop):   # return None (success) or a connectors.base.Result
        ...

Exceptions fail the attempt: `RetryableError` ones retryably, any other for good. Long handlers
should check `stop.is_set()` (cancelled, timed out, or the lease was lost) and return.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable

from connectors.base import Result, Stop
from kadence.models import ExecutionRequested, HandlerTarget, OutcomeStatus

Handler = Callable[[ExecutionRequested, Stop], Result | None]
_REGISTRY: dict[str, Handler] = {}


class RetryableError(Exception):
    """Raise from a handler to have the attempt retried after backoff."""


def handler(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _REGISTRY[name] = fn
        return fn

    return register


def load(modules: Iterable[str]) -> None:
    """Import the modules that register handlers (KADENCE_HANDLER_MODULES)."""
    for module in modules:
        importlib.import_module(module)


def call(ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
    target = ex.target
    assert isinstance(target, HandlerTarget)
    fn = _REGISTRY.get(target.name)
    if fn is None:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        why = f"no handler {target.name!r} in this worker (registered: {known})"
        return Result.failed("UnknownHandler", why, retryable=True)
    try:
        result = fn(ex, stop)
    except RetryableError as exc:
        return Result.failed(type(exc).__name__, str(exc) or "retryable failure", retryable=True)
    except Exception as exc:
        return Result.failed(type(exc).__name__, str(exc) or repr(exc), retryable=False)
    if stop.is_set():
        return Result(stop.reason or OutcomeStatus.cancelled)
    return result or Result.ok()
