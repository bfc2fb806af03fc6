"""Occurrence identity: the execution id every delivery, retry and backfill of it carries.

`execution_id = "<tenant>/<job_id>@<nominal UTC, ms, Z>"`, e.g.
`acme/nightly-report@2026-03-29T00:30:00.000Z`. It depends only on the job key and the nominal
instant (never on spread, due time, attempt, version or process), so it is stable across
processes, restarts and releases, and readable in logs. A one-off's nominal instant is its
`run_at`. A manual trigger has no nominal instant; its id is `<job key>@manual:<request_id>`, so
resending the same trigger request is recognisably the same execution.
"""

from __future__ import annotations

from functools import lru_cache

from kadence.clock import ms_to_datetime
from kadence.headers import iso_utc


@lru_cache(maxsize=8192)
def _instant(nominal_ms: int) -> str:
    return iso_utc(ms_to_datetime(nominal_ms))


def execution_id(job_key: str, nominal_ms: int) -> str:
    return f"{job_key}@{_instant(nominal_ms)}"


def manual_execution_id(job_key: str, request_id: str) -> str:
    return f"{job_key}@manual:{request_id}"
