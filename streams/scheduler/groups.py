"""The concurrency-group index: which jobs of a group (`concurrency_key`, one partition) have
runs active, and which wait for the group, in the order they started waiting.

A group runs one run at a time (docs/scheduler.md, "Concurrency groups"). Stored per group:
- `~group/<routing key>`: {job key: [[execution id, expires ms], ...]}; a job with no runs is
  not listed, and an empty group is deleted;
- `~waiting/<routing key>`: [job key, ...], the jobs with runs waiting for the group, first
  come first; deleted when empty (a key of its own, so a previous release reading the group
  index is not surprised by it).
"""

from __future__ import annotations

import json

from streams.scheduler.entries import Running

Group = dict[str, list[list[object]]]


def load(raw: bytes | None) -> Group:
    loaded: Group = json.loads(raw) if raw else {}
    return loaded


def dump(group: Group) -> bytes | None:
    """The stored form; None (delete) for an empty group."""
    return json.dumps(group).encode() if group else None


def busy(group: Group, job_key: str, now_ms: int) -> bool:
    """Another job of the group has a run that has not expired (`job_key` "": any job)."""
    return busy_until(group, job_key, now_ms) > now_ms


def busy_until(group: Group, job_key: str, now_ms: int) -> int:
    """When the other jobs' active runs have all expired at the latest (0: none active)."""
    ends = [int(str(exp)) for job, runs in group.items() if job != job_key for _, exp in runs]
    return max((e for e in ends if e > now_ms), default=0)


def with_runs(group: Group, job_key: str, running: tuple[Running, ...]) -> Group:
    """The group after `job_key`'s runs became `running`."""
    return _listing(group, job_key, [[r.execution_id, r.expires_ms] for r in running])


def without_run(group: Group, job_key: str, execution_id: str) -> Group:
    """The group after one run of `job_key` (a deleted job's) ended."""
    return _listing(group, job_key, [r for r in group.get(job_key, []) if r[0] != execution_id])


def _listing(group: Group, job_key: str, runs: list[list[object]]) -> Group:
    updated = dict(group)
    if runs:
        updated[job_key] = runs
    else:
        updated.pop(job_key, None)
    return updated


def load_waiting(raw: bytes | None) -> list[str]:
    loaded: list[str] = json.loads(raw) if raw else []
    return loaded


def dump_waiting(waiting: list[str]) -> bytes | None:
    return json.dumps(waiting).encode() if waiting else None


def in_line(waiting: list[str], job_key: str, *, waits: bool, started: bool) -> list[str]:
    """The waiting line after a step of `job_key`: it joins at the end when it starts waiting,
    leaves when it has nothing left waiting, and goes to the end when it started a run and
    still has more waiting (jobs take turns)."""
    rest = [k for k in waiting if k != job_key]
    if not waits:
        return rest
    if job_key in waiting and not started:
        return waiting
    return [*rest, job_key]


def turn(waiting: list[str], job_key: str) -> bool:
    """No other job of the group waits before `job_key`."""
    return not waiting or waiting[0] == job_key
