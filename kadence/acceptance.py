"""Whether a definition read from `schedules` is accepted: the one rule the scheduler applies
and the query view mirrors, so the view never shows a job the scheduler refused.

Both read a key's records in the same order (one partition), so applying the same rule to
the same sequence gives the same answer: the first of two concurrent writes of one version
wins in both, and a record keyed for one tenant whose body names another is refused by both.
"""

from __future__ import annotations

from dataclasses import dataclass

from kadence.errors import InvalidScheduleError
from kadence.models import ScheduleDefinition
from kadence.partitioning import partition_for
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.engine import CompiledSchedule


@dataclass(frozen=True, slots=True)
class Refusal:
    code: str
    """The `rejected` record's code: key_mismatch, misrouted, stale_version, invalid_schedule."""
    reason: str


def refusal(
    key: bytes,
    partition: int,
    partitions: int,
    definition: ScheduleDefinition,
    current_version: int | None,
) -> Refusal | None:
    """Why the record at (`key`, `partition`) holding `definition` is refused, given the
    version accepted before it (None: no job under that key); None when it is accepted."""
    verdict = accepted(key, partition, partitions, definition, current_version)
    return verdict if isinstance(verdict, Refusal) else None


def accepted(
    key: bytes,
    partition: int,
    partitions: int,
    definition: ScheduleDefinition,
    current_version: int | None,
) -> Refusal | CompiledSchedule:
    """`refusal`, or the schedule compiled when the definition is accepted (the scheduler
    keeps it: a definition is compiled once)."""
    if definition.key.encode() != key:
        return Refusal("key_mismatch", f"record key {key!r} is not {definition.key}")
    expected = partition_for(definition.routing_key, partitions)
    if expected != partition:
        return Refusal(
            "misrouted",
            f"{definition.key} belongs on partition {expected} (murmur2 of its routing key "
            f"{definition.routing_key!r}), not {partition}; write it with the SDK or "
            "partitioner=murmur2_random",
        )
    if current_version is not None and definition.version <= current_version:
        return Refusal(
            "stale_version",
            f"version {definition.version} of {definition.key} is not newer than {current_version}",
        )
    try:
        return compile_schedule(definition.schedule, definition.key)
    except InvalidScheduleError as exc:
        return Refusal("invalid_schedule", "; ".join(exc.errors))
