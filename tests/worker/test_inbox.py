"""The worker's inbox: held until due, and the committed offset never passes a held one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kadence.clock import datetime_to_ms
from kadence.models import ExecutionRequested, ExecutionRevoked, KafkaTarget
from kadence.worker.inbox import Inbox

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
T_MS = datetime_to_ms(T)


def ex(n: int, due_s: int, version: int = 1) -> ExecutionRequested:
    due = T + timedelta(seconds=due_s)
    return ExecutionRequested(
        execution_id=f"acme/j{n}@2026-12-01T09:00:00.000Z",
        tenant="acme",
        job_id=f"j{n}",
        definition_version=version,
        nominal_at=due,
        due_at=due,
        dispatched_at=T,
        target=KafkaTarget(topic="t"),
        timeout_ms=1_000,
        lease_ttl_ms=3_000,
    )


def revoke(n: int, version: int = 1) -> ExecutionRevoked:
    return ExecutionRevoked(
        execution_id=f"acme/j{n}@2026-12-01T09:00:00.000Z",
        tenant="acme",
        job_id=f"j{n}",
        definition_version=version,
        due_at=T,
        revoked_at=T,
        reason="paused",
    )


def test_nothing_comes_out_before_it_is_due_and_earliest_first() -> None:
    inbox = Inbox()
    inbox.add(0, 10, ex(1, 20))
    inbox.add(0, 11, ex(2, 10))
    assert inbox.due(T_MS + 9_999, 10) == []
    assert [i.execution.job_id for i in inbox.due(T_MS + 20_000, 10)] == ["j2", "j1"]
    assert inbox.next_due_ms() is None


def test_the_offset_to_commit_stops_at_the_first_held_execution() -> None:
    inbox = Inbox()
    inbox.add(0, 10, ex(1, 30))  # held for 30 s
    inbox.add(0, 11, ex(2, 0))
    inbox.read(0, 12)  # a revocation or a bad record: nothing to hold
    inbox.add(1, 5, ex(3, 0))
    assert inbox.offsets() == {0: 10, 1: 5}
    claimed = inbox.due(T_MS, 10)
    assert [i.execution.job_id for i in claimed] == ["j2", "j3"]
    assert inbox.offsets() == {0: 10, 1: 6}  # j1 still held: a crash re-reads it
    inbox.due(T_MS + 30_000, 10)
    assert inbox.offsets() == {0: 13, 1: 6}


def test_a_claim_that_did_not_commit_is_held_again() -> None:
    inbox = Inbox()
    inbox.add(0, 1, ex(1, 0))
    [item] = inbox.due(T_MS, 1)
    inbox.hold(item)
    assert inbox.offsets() == {0: 1}
    assert inbox.due(T_MS, 1) == [item]


def test_a_revocation_drops_its_version_and_older_not_a_newer_redispatch() -> None:
    inbox = Inbox()
    inbox.add(0, 1, ex(1, 20, version=1))
    assert inbox.revoke(revoke(1, version=1))
    inbox.add(0, 3, ex(1, 20, version=2))  # re-dispatched under version 2 after the revoke
    assert not inbox.revoke(revoke(1, version=1))  # an old revocation does not touch it
    assert [i.execution.definition_version for i in inbox.due(T_MS + 20_000, 10)] == [2]


def test_revoked_partitions_are_forgotten() -> None:
    inbox = Inbox()
    inbox.add(0, 1, ex(1, 20))
    inbox.add(1, 1, ex(2, 20))
    inbox.forget({0})
    assert inbox.offsets() == {1: 1}
    assert [i.execution.job_id for i in inbox.due(T_MS + 20_000, 10)] == ["j2"]
    assert len(inbox) == 0
