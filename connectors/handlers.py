"""In-process handlers: Python functions a worker embedded in a tenant's service calls by name.

    from connectors.handlers import handler

    @handler("send-digest", tenants=["acme"])   # or tenants="*": every tenant may call it
    def send_digest(execution, stop):   # return None (success) or a kadence.targets.Result
        ...

A handler serves only the tenants it names: a job of another tenant naming it fails as if it
did not exist, and the failure names no other handler. A tenant's own handler wins over a
shared ("*") one of the same name.

Exceptions fail the attempt: `RetryableError` ones retryably, any other for good. Long handlers
should check `stop.is_set()` (cancelled, timed out, or the lease was lost) and return.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable

from kadence.models import ExecutionRequested, HandlerTarget, OutcomeStatus
from kadence.models.base import IDENT_RE
from kadence.targets import Result, Stop

Handler = Callable[[ExecutionRequested, Stop], Result | None]
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


def call(ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
    target = ex.target
    assert isinstance(target, HandlerTarget)
    fn = lookup(ex.tenant, target.name)
    if fn is None:
        why = f"handler {target.name!r} is unknown for tenant {ex.tenant!r} in this worker"
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
