"""How the `kadence` CLI tells a run's outcome: why it did not run or failed, and `trigger
--wait`, which follows one run until it is final."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console

from apps.cli_show import result_text
from kadence.api_client import ApiClient, ApiError


class RunNotSucceededError(ApiError):
    """`trigger --wait`: the run ended otherwise, or not in time (exit 1)."""

    def __init__(self, detail: str) -> None:
        super().__init__(0, detail)

    @property
    def exit_code(self) -> int:
        return 1


LETTER_GRACE_S = 5.0
"""How long `trigger --wait` waits for a failed run's dead letter to show."""
FINAL = {"succeeded", "failed", "timed_out", "cancelled", "not_run", "dead_lettered"}
"""Run statuses nothing follows (a failed attempt with retries left shows `retrying`)."""


def wait_run(
    api: ApiClient, job: str, run_id: str, *, timeout_s: float, console: Console, quiet: bool
) -> dict[str, Any]:
    """Poll the job's runs until `run_id` is final; ApiError (exit 1) unless it succeeded."""
    deadline = time.monotonic() + timeout_s
    letter_by: float | None = None
    while True:
        runs = api.call("GET", f"/v1/jobs/{job}/runs")
        run = next((r for r in runs if r["execution_id"] == run_id), None)
        if run is not None and run["status"] == "failed":
            # its last attempt failed: the dead letter that follows is the whole story (what
            # the view shows a moment later), so wait a little for it, not past the deadline
            letter_by = letter_by or min(deadline, time.monotonic() + LETTER_GRACE_S)
            if time.monotonic() >= letter_by:
                break
        elif run is not None and run["status"] in FINAL:
            break
        if time.monotonic() > deadline:
            status = run["status"] if run else "not seen yet"
            raise RunNotSucceededError(
                f"run {run_id} not finished after {timeout_s:g} s ({status})"
            )
        time.sleep(0.25)
    late = "-" if run["lateness_s"] is None else f"{run['lateness_s']:.3f} s late"
    if run["status"] != "succeeded":
        raise RunNotSucceededError(f"run {run_id} {run['status']}: {why(run)}")
    if not quiet:
        got = f", result {result_text(run['result'])}" if run.get("result") else ""
        console.print(f"run {run_id}: succeeded, started {late}{got}", soft_wrap=True)
    return dict(run)


def err(error: dict[str, Any] | None) -> str:
    return "" if not error else f"{error.get('type', '')}: {error.get('message', '')}"[:120]


def why(run: dict[str, Any]) -> str:
    return "; ".join(x for x in (run["reason"], err(run["last_error"])) if x)
