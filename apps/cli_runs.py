"""How the `kadence` CLI tells a run's outcome: why it did not run or failed, and `trigger
--wait`, which follows one run until it is final (`ApiClient.wait_run`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from apps.cli_show import result_text
from kadence.api_client import ApiClient, ApiError, RunTimeoutError


class RunNotSucceededError(ApiError):
    """`trigger --wait`: the run ended otherwise, or not in time (exit 1)."""

    def __init__(self, detail: str) -> None:
        super().__init__(0, detail)

    @property
    def exit_code(self) -> int:
        return 1


def wait_run(
    api: ApiClient, job: str, run_id: str, *, timeout_s: float, console: Console, quiet: bool
) -> dict[str, Any]:
    """The run once final (ApiClient.wait_run); ApiError (exit 1) unless it succeeded."""
    try:
        run = api.wait_run(job, run_id, timeout_s)
    except RunTimeoutError as exc:
        raise RunNotSucceededError(str(exc.detail)) from None
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
