"""The concurrency-group index: which jobs of a group (`concurrency_key`, one partition) have
runs active, so a job of the group waits while another one runs.

Stored per group as JSON: {job key: [[execution id, expires ms], ...]}; a job with no runs
is not listed, and an empty group is deleted.
"""

from __future__ import annotations

import json

from streams.scheduler.state import Running

Group = dict[str, list[list[object]]]


def load(raw: bytes | None) -> Group:
    loaded: Group = json.loads(raw) if raw else {}
    return loaded


def dump(group: Group) -> bytes | None:
    """The stored form; None (delete) for an empty group."""
    return json.dumps(group).encode() if group else None


def busy(group: Group, job_key: str, now_ms: int) -> bool:
    """Another job of the group has a run that has not expired."""
    return any(
        int(str(exp)) > now_ms for job, runs in group.items() if job != job_key for _, exp in runs
    )


def with_runs(group: Group, job_key: str, running: tuple[Running, ...]) -> Group:
    """The group after `job_key`'s runs became `running`."""
    runs: list[list[object]] = [[r.execution_id, r.expires_ms] for r in running]
    updated = dict(group)
    if runs:
        updated[job_key] = runs
    else:
        updated.pop(job_key, None)
    return updated
