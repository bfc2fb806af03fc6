"""In-process handlers the execution benchmark's workers load."""

from __future__ import annotations

from connectors.handlers import handler
from kadence.models import ExecutionRequested
from kadence.targets import Result, Stop


@handler("sleep", tenants="*")
def sleep(ex: ExecutionRequested, stop: Stop) -> Result | None:
    """Runs for the payload's seconds (stops early when asked)."""
    stop.wait(float(ex.payload or b"1"))
    return None


@handler("noop", tenants="*")
def noop(ex: ExecutionRequested, stop: Stop) -> Result | None:
    """Returns at once: the cost of the worker path with nothing to run."""
    return None
