"""In-process handlers the test stack's workers load (`handler_modules`, set by
`testkit.stack.execution_settings`)."""

from __future__ import annotations

import json
import os
import signal
import time

from connectors.handlers import handler
from kadence.models import ExecutionRequested
from kadence.targets import Result, Stop


@handler("crash", tenants="*")
def crash(_ex: ExecutionRequested, _stop: Stop) -> Result | None:
    """The poison job: kills the worker that runs it, every time."""
    os.kill(os.getpid(), signal.SIGKILL)
    return None


@handler("sleep", tenants="*")
def sleep(ex: ExecutionRequested, stop: Stop) -> Result | None:
    """Sleeps for the payload's seconds, stopping early when asked."""
    stop.wait(float(ex.payload or b"1"))
    return None


@handler("stubborn", tenants="*")
def stubborn(ex: ExecutionRequested, _stop: Stop) -> Result | None:
    """Sleeps for the payload's seconds and does not stop when asked (a target that ignores
    cancellation): the worker holds the run until it returns."""
    time.sleep(float(ex.payload or b"1"))
    return None


@handler("echo-value", tenants="*")
def echo_value(ex: ExecutionRequested, _stop: Stop) -> object:
    """Returns the job's JSON payload under "echo": the run's result is that value."""
    return {"echo": json.loads(ex.payload or b"null")}
