"""In-process handlers: Python functions a worker embedded in a tenant's service calls by name.

    from connectors.handlers import handler

    @handler("send-digest", tenants=["acme"])   # or tenants="*": every tenant may call it
    def send_digest(execution, stop):   # None or a value (success), or a kadence.targets.Result
        ...

A handler serves only the tenants it names: a job of another tenant naming it fails as if it
did not exist, and the failure names no other handler. A tenant's own handler wins over a
shared ("*") one of the same name.

A returned value other than a Result is the run's result (connectors/results.py): kept as JSON,
at most 4 KiB; one that is not JSON or larger is left out, with a note saying why, and the run
still succeeds. Exceptions fail the attempt: `RetryableError` ones retryably, any other for
good. Long handlers should check `stop.is_set()` (cancelled, timed out, or the lease was lost)
and return.

An `async def` handler runs on the worker's event loop (connectors/aio.py), without a thread or
a slot of the worker's pool: thousands can wait on I/O at once. It must not block (use
`asyncio.to_thread` for blocking work); a stop cancels it at once (CancelledError at its
current `await`). Plain functions run on the worker's bounded thread pool.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from connectors.aio import EventLoop
from connectors.results import value_result
from kadence.models import ExecutionRequested, HandlerTarget, OutcomeStatus
from kadence.models.base import IDENT_RE
from kadence.targets import Result, Stop

Handler = Callable[[ExecutionRequested, Stop], object]
"""Returns None, a value (the run's result), a Result, or an awaitable of one of them."""
SHARED = "*"
"""The scope of handlers every tenant may call."""
_REGISTRY: dict[str, dict[str, Handler]] = {}
"""tenant (or "*") -> handler name -> handler."""


class RetryableError(Exception):
    """Raise from a handler to have the attempt retried after backoff."""


class HandlerScopeError(TypeError):
    """A handler registered without saying which tenants may call it."""


def handler(
    name: str, *, tenants: str | Iterable[str] | None = None
) -> Callable[[Handler], Handler]:
    """Register `fn` as handler `name` for `tenants`: one tenant, a list, or "*" for all."""
    scopes = _scopes(name, tenants)

    def register(fn: Handler) -> Handler:
        for scope in scopes:
            _REGISTRY.setdefault(scope, {})[name] = fn
        return fn

    return register


def _scopes(name: str, tenants: str | Iterable[str] | None) -> tuple[str, ...]:
    how = (
        f'name the tenants that may call it: @handler({name!r}, tenants=["<tenant>", ...]), '
        f'or tenants="*" to let every tenant call it'
    )
    scopes = () if tenants is None else (tenants,) if isinstance(tenants, str) else tuple(tenants)
    if not scopes:
        raise HandlerScopeError(f"handler {name!r} names no tenants; {how}")
    bad = [t for t in scopes if t != SHARED and not IDENT_RE.fullmatch(t)]
    if bad:
        raise HandlerScopeError(f"handler {name!r}: {bad} are not tenant identifiers; {how}")
    return scopes


def lookup(tenant: str, name: str) -> Handler | None:
    """The tenant's own handler `name`, else the shared one; never another tenant's."""
    for scope in (tenant, SHARED):
        fn = _REGISTRY.get(scope, {}).get(name)
        if fn is not None:
            return fn
    return None


def load(modules: Iterable[str]) -> None:
    """Import the modules that register handlers (KADENCE_HANDLER_MODULES)."""
    for module in modules:
        importlib.import_module(module)


class HandlerCaller:
    """The handler target: `async def` handlers start on `loop` (`Starts`), plain ones are
    called on the worker's pool."""

    def __init__(self, loop: EventLoop | None = None) -> None:
        self.loop = loop or EventLoop("handlers")

    def _found(self, ex: ExecutionRequested) -> Handler | None:
        target = ex.target
        assert isinstance(target, HandlerTarget)
        return lookup(ex.tenant, target.name)

    def can_start(self, ex: ExecutionRequested) -> bool:
        return inspect.iscoroutinefunction(self._found(ex))

    def start(
        self, ex: ExecutionRequested, stop: Stop, record: bytes | None = None
    ) -> Future[Result] | None:
        fn = self._found(ex)
        if fn is None or not inspect.iscoroutinefunction(fn):
            return None
        return self.loop.run(lambda: _awaited(fn, ex, stop), stop)

    def __call__(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        fn = self._found(ex)
        if fn is not None and inspect.iscoroutinefunction(fn):
            return self.loop.run(lambda: _awaited(fn, ex, stop), stop).result()
        return call(ex, stop, deadline)


async def _awaited(fn: Handler, ex: ExecutionRequested, stop: Stop) -> Result:
    try:
        result = fn(ex, stop)
        if inspect.isawaitable(result):
            result = await result
    except RetryableError as exc:
        return Result.failed(type(exc).__name__, str(exc) or "retryable failure", retryable=True)
    except Exception as exc:
        return Result.failed(type(exc).__name__, str(exc) or repr(exc), retryable=False)
    return _ended(result, stop)


def _ended(result: object, stop: Stop) -> Result:
    if stop.is_set():
        return Result(stop.reason or OutcomeStatus.cancelled)
    if result is None:
        return Result.ok()
    if not isinstance(result, Result):  # a value: the run succeeded, the value is its result
        return Result.ok(value_result(result))
    return result


_DEFAULT: list[HandlerCaller] = []


def call(ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
    target = ex.target
    assert isinstance(target, HandlerTarget)
    fn = lookup(ex.tenant, target.name)
    if fn is None:
        why = f"handler {target.name!r} is unknown for tenant {ex.tenant!r} in this worker"
        return Result.failed("UnknownHandler", why, retryable=True)
    if inspect.iscoroutinefunction(fn):  # called directly: on a loop of this module's own
        if not _DEFAULT:
            _DEFAULT.append(HandlerCaller())
        return _DEFAULT[0](ex, stop, deadline)
    try:
        result = fn(ex, stop)
    except RetryableError as exc:
        return Result.failed(type(exc).__name__, str(exc) or "retryable failure", retryable=True)
    except Exception as exc:
        return Result.failed(type(exc).__name__, str(exc) or repr(exc), retryable=False)
    return _ended(result, stop)
