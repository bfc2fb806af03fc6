"""A batch in the worker's inbox (`Inbox.add_batch`): one item that stands for its executions.
The inbox's bound and a tenant's count weigh each execution; a batch let go is owed whole, as
one record; revoking its executions takes them out one by one and the offset passes the batch
once none is left; one `due` hands a batch out whole, counting each of its executions against
what one transaction delivers."""

from __future__ import annotations

from kadence.codec import Codec
from kadence.models import ExecutionRequested, HttpTarget, KafkaTarget, RateLimit
from streams.worker.inbox import Inbox, has_rate_limit
from tests.worker.test_inbox import T_MS, committed, ex, revoke

CODEC = Codec()


def entries(first: int, n: int, due_s: int = 0) -> list[tuple[ExecutionRequested, bytes]]:
    return [(e, CODEC.encode(e)) for e in (ex(i, due_s) for i in range(first, first + n))]


def test_the_bound_and_the_counts_weigh_each_execution() -> None:
    inbox = Inbox()
    head = inbox.add_batch(0, 0, entries(0, 3), leaseless=True)
    assert head is not None and head.batch is not None and len(head.batch) == 3
    assert (len(inbox), inbox.size) == (3, sum(len(raw) for _, raw in entries(0, 3)))
    assert {i.head for i in head.batch} == {head}
    inbox.max_count = 4
    assert inbox.full() is False
    inbox.add_batch(0, 1, entries(3, 2), leaseless=True)
    assert inbox.full() and len(inbox) == 5
    assert inbox.add_batch(0, 2, entries(5, 2), leaseless=True) is None
    assert inbox.owed.count(0) == 1  # owed whole: one record to read again
    assert committed(inbox) == {0: 0}


def test_revoking_its_executions_one_by_one_lets_the_offset_pass_it() -> None:
    inbox = Inbox()
    inbox.add_batch(0, 0, entries(0, 2, due_s=5), leaseless=True)
    inbox.read(0, 1)
    assert inbox.revoke(revoke(0), 0, 1)
    assert (len(inbox), committed(inbox)) == (1, {0: 0})
    assert not inbox.revoke(revoke(0), 0, 1)  # gone already
    assert inbox.revoke(revoke(1), 0, 1)
    assert (len(inbox), committed(inbox)) == (0, {0: 2})
    assert inbox.due(T_MS + 5_000, 10) == []


def test_a_batch_goes_whole_and_counts_each_execution_against_a_transaction() -> None:
    inbox = Inbox(max_leaseless=3)
    for offset in range(3):
        inbox.add_batch(0, offset, entries(2 * offset, 2), leaseless=True)
    first = inbox.due(T_MS, 10)
    assert [len(h.batch or []) for h in first] == [2, 2]  # 2 + 2 > 3: less than a batch past it
    assert len(inbox) == 2
    [last] = inbox.due(T_MS, 10)
    assert last.offset == 2 and len(inbox) == 0
    assert last.batch is not None
    inbox.hold(last.batch[0])  # one of them puts the whole batch back
    inbox.hold(last.batch[1])  # once
    assert len(inbox) == 2
    [again] = inbox.due(T_MS, 10)
    assert again is last


def test_only_a_target_with_a_rate_limit_set_has_one() -> None:
    """What the worker asks of each entry of a batch: a Kafka target (a type without the field)
    and an HTTP target without a limit have none."""
    assert not has_rate_limit(KafkaTarget(topic="out"))
    assert not has_rate_limit(HttpTarget(url="https://example.com/"))
    limited = HttpTarget(url="https://example.com/", rate_limit=RateLimit(per_second=1))
    assert has_rate_limit(limited)
