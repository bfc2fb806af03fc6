"""A batch in the worker's inbox (`Inbox.add_batch`): one item that stands for its executions.
The inbox's bound and a tenant's count weigh each execution; a batch let go is owed whole, as
one record; revoking its executions takes them out one by one and the offset passes the batch
once none is left; one `due` hands a batch out whole, counting each of its executions against
what one transaction delivers. A revocation that takes a run out of a batch is held open with it,
and read again by a next owner before the batch can start."""

from __future__ import annotations

from kadence.codec import Codec
from kadence.models import ExecutionRequested, HttpTarget, KafkaTarget, RateLimit
from streams.worker.inbox import Fairness, Inbox, has_rate_limit
from streams.worker.offsets import decode_metadata
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


def test_a_revocation_out_of_a_held_batch_is_named_in_the_commit_while_the_batch_is_held() -> None:
    """The revocation's offset is held with the batch's (`Item.pins`): a next owner reading the
    batch again reads the revocation again too; once the batch goes, the commit passes both."""
    inbox = Inbox()
    inbox.add_batch(0, 0, entries(0, 2, due_s=5), leaseless=True)
    for o in (1, 2):
        inbox.read(0, o)
    inbox.read(0, 3)
    assert inbox.revoke(revoke(0), 0, 3)
    offset, meta = inbox.offsets()[0]
    assert (offset, decode_metadata(offset, meta)) == (0, (4, frozenset({0, 3})))
    [head] = inbox.due(T_MS + 5_000, 10)
    assert [i.execution.job_id for i in head.batch or []] == ["j1"]
    assert committed(inbox) == {0: 4}


def test_a_next_owner_starts_no_batch_read_again_before_its_revocation_is_read_again() -> None:
    """The batch is due when the next owner reads it again, and its revocation is 600 records
    further (more than a poll's worth): the batch waits until the replay is back where the
    previous owner had read to, and goes without the revoked run."""
    first = Inbox()
    first.add_batch(0, 0, entries(0, 2), leaseless=True)
    for o in range(1, 600):
        first.read(0, o)  # others' records, done with
    first.read(0, 600)
    first.revoke(revoke(0), 0, 600)
    offset, meta = first.offsets()[0]
    second = Inbox()
    second.resume(0, offset, meta)
    assert second.wanted(0, 0)
    second.add_batch(0, 0, entries(0, 2), leaseless=True)
    assert second.due(T_MS, 10) == []  # due, but its revocation is not read again yet
    for o in range(1, 600):
        assert not second.wanted(0, o)
        second.read(0, o)
    assert second.due(T_MS, 10) == []
    assert second.wanted(0, 600)
    second.read(0, 600)
    assert second.revoke(revoke(0), 0, 600)
    [head] = second.due(T_MS, 10)
    assert [i.execution.job_id for i in head.batch or []] == ["j1"]
    assert committed(second) == {0: 601}


def test_a_batch_let_go_owes_its_revocations_with_it() -> None:
    """`shed` lets a batch go (its tenant at its cap): the revocations it pins are owed too, so
    that reading it again meets them after it."""
    inbox = Inbox(Fairness(max_running=0, caps={"acme": 1}))
    inbox.add_batch(0, 0, entries(0, 3, due_s=9), leaseless=False)
    inbox.read(0, 1)
    assert inbox.revoke(revoke(0), 0, 1)
    inbox.add(0, 2, ex(5, 5))
    inbox.add(0, 3, ex(6, 5))
    assert inbox.due(T_MS, 10, {"acme": 1}) == []  # nothing due; its slot is taken
    assert inbox.shed() == 1
    assert inbox.owed.count(0) == 2
    offset, meta = inbox.offsets()[0]
    assert (offset, decode_metadata(offset, meta)) == (0, (4, frozenset({0, 1, 2, 3})))


def test_a_revocation_revokes_only_what_was_read_before_it_on_its_partition() -> None:
    """Read again (after a take-over, or owed), a revocation must not take a run dispatched
    again after it, under the same execution id (its job resumed): only what precedes it."""
    inbox = Inbox()
    inbox.add(0, 5, ex(0, 5))  # j0 dispatched again at 5, after its revocation at 3
    inbox.add_batch(1, 0, entries(0, 2, due_s=5), leaseless=True)  # another partition's
    assert inbox.revoke(revoke(0), 0, 3)  # the other partition's batch: revoked
    assert len(inbox) == 2
    [single, head] = sorted(inbox.due(T_MS + 5_000, 10), key=lambda i: i.partition)
    assert (single.offset, [i.execution.job_id for i in head.batch or []]) == (5, ["j1"])
