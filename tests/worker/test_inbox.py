"""The worker's inbox: held until due, and the committed offset never passes a held one."""

from __future__ import annotations

import base64
import random
import zlib
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kadence.clock import datetime_to_ms
from kadence.models import ExecutionRequested, ExecutionRevoked, KafkaTarget
from streams.worker.inbox import Inbox, Item
from streams.worker.offsets import (
    BITMAP_MAX_OFFSETS,
    METADATA_LIMIT,
    HeldRuns,
    decode_metadata,
    encode_bitmap,
    encode_metadata,
    runs_of,
)

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


def committed(inbox: Inbox) -> dict[int, int]:
    return {p: o for p, (o, _meta) in inbox.offsets().items()}


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
    assert committed(inbox) == {0: 10, 1: 5}
    claimed = inbox.due(T_MS, 10)
    assert [i.execution.job_id for i in claimed] == ["j2", "j3"]
    assert committed(inbox) == {0: 10, 1: 6}  # j1 still held: a crash re-reads it
    inbox.due(T_MS + 30_000, 10)
    assert committed(inbox) == {0: 13, 1: 6}


def test_a_claim_that_did_not_commit_is_held_again() -> None:
    inbox = Inbox()
    inbox.add(0, 1, ex(1, 0))
    [item] = inbox.due(T_MS, 1)
    inbox.hold(item)
    assert committed(inbox) == {0: 1}
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
    assert committed(inbox) == {1: 1}
    assert [i.execution.job_id for i in inbox.due(T_MS + 20_000, 10)] == ["j2"]
    assert len(inbox) == 0


def test_the_next_due_time_skips_what_was_revoked_or_handed_on() -> None:
    inbox = Inbox()
    for o in range(3):
        inbox.add(0, o, ex(o, 20))  # three due at the same instant, on a partition that goes
    inbox.add(1, 0, ex(9, 30))
    inbox.add(1, 1, ex(8, 40))
    assert inbox.next_due_ms() == T_MS + 20_000
    inbox.forget({0})
    assert inbox.next_due_ms() == T_MS + 30_000
    assert inbox.revoke(revoke(9))
    assert inbox.next_due_ms() == T_MS + 40_000
    assert [i.execution.job_id for i in inbox.due(T_MS + 60_000, 10)] == ["j8"]
    assert inbox.next_due_ms() is None


def test_the_next_owner_reads_again_only_what_was_still_held() -> None:
    """Job-ordered dispatch: j1's look-ahead (held) comes before j2's (claimed at once)."""
    a = Inbox()
    a.add(0, 0, ex(1, 0))
    a.add(0, 1, ex(1, 25))  # held
    a.add(0, 2, ex(1, 26))  # held
    a.add(0, 3, ex(2, 0))
    a.add(0, 4, ex(3, 0))
    a.read(0, 5)  # a revocation
    a.add(0, 6, ex(4, 27))  # held
    assert [i.offset for i in a.due(T_MS, 10)] == [0, 3, 4]
    [(offset, meta)] = a.offsets().values()
    assert offset == 1
    b = Inbox()  # the partition moves: b reads from offset 1 with the metadata
    b.resume(0, offset, meta)
    assert [o for o in range(1, 9) if b.wanted(0, o)] == [1, 2, 6, 7, 8]


def test_while_re_reading_a_commit_keeps_naming_what_is_not_re_read_yet() -> None:
    b = Inbox()
    b.resume(0, 10, encode_metadata([10, 14, 15], 20))
    assert b.wanted(0, 10)
    b.add(0, 10, ex(1, 0))
    assert b.due(T_MS, 10) == []  # read again: it waits until the replay is back at 20
    for o in (11, 12, 13):
        assert not b.wanted(0, o)
        b.read(0, o)
    [(offset, meta)] = b.offsets().values()
    assert offset == 10  # 14 and 15 not re-read yet: still named, nothing lost
    assert decode_metadata(offset, meta) == (20, frozenset({10, 14, 15}))
    for o in range(14, 20):
        b.read(0, o)
    [item] = b.due(T_MS, 10)
    assert item.offset == 10
    [(offset, meta)] = b.offsets().values()
    assert (offset, decode_metadata(offset, meta)) == (20, None)


@given(
    held=st.sets(st.integers(min_value=0, max_value=5_000), min_size=1, max_size=300),
    extra=st.integers(min_value=1, max_value=1_000),
)
def test_metadata_round_trips(held: set[int], extra: int) -> None:
    base = 1_000_000
    ordered = sorted(base + h for h in held)
    upto = ordered[-1] + extra
    text = encode_metadata(ordered, upto)
    if text:  # too long to name: left out (the next owner re-reads everything)
        assert decode_metadata(ordered[0], text) == (upto, frozenset(ordered))
    assert decode_metadata(ordered[0], "") is None
    assert decode_metadata(ordered[0], "k1:zz:garbage") is None


@given(
    held=st.sets(st.integers(min_value=0, max_value=20_000), min_size=1, max_size=5_000),
    extra=st.integers(min_value=1, max_value=1_000),
)
def test_scattered_held_offsets_are_named_in_a_bitmap(held: set[int], extra: int) -> None:
    """More runs than `k1` can name (B2 at 5 000/s: one gap per job) fit in the `k2` bitmap:
    a window of 20 000 offsets always does, however scattered."""
    base = 7_000_000
    ordered = sorted(base + h for h in held)
    upto = ordered[-1] + extra
    text = encode_metadata(ordered, upto)
    assert text.startswith(("k1:", "k2:")) and len(text) <= METADATA_LIMIT
    assert decode_metadata(ordered[0], text) == (upto, frozenset(ordered))
    bitmap = encode_bitmap(runs_of(ordered), upto)
    assert decode_metadata(ordered[0], bitmap) == (upto, frozenset(ordered))


def test_every_other_offset_of_twenty_thousand_is_named_in_a_bitmap() -> None:
    ordered = list(range(500, 20_500, 2))  # 10 000 runs: k1 cannot name them
    text = encode_metadata(ordered, 20_500)
    assert text.startswith("k2:") and len(text) <= METADATA_LIMIT
    assert decode_metadata(500, text) == (20_500, frozenset(ordered))


def test_a_window_too_scattered_for_both_forms_is_left_out() -> None:
    rng = random.Random(5)
    ordered = sorted(rng.sample(range(10**5), 20_000))  # incompressible: ~9 KB of bitmap
    assert encode_metadata(ordered, ordered[-1] + 1) == ""
    wide = [0, 2, BITMAP_MAX_OFFSETS + 5]  # a bitmap past its bound is not even built
    assert encode_bitmap(runs_of(wide), wide[-1] + 1) == ""


@pytest.mark.parametrize(
    "text",
    [
        "k2:zz:!!!not-base64",
        "k2:10:" + base64.urlsafe_b64encode(b"not deflated").decode(),
        "k2:0:" + base64.urlsafe_b64encode(zlib.compress(b"")).decode(),
        "k2:8:" + base64.urlsafe_b64encode(zlib.compress(b"\xff" * 5)).decode(),  # too long
        "k2:" + "z" * 12 + ":" + base64.urlsafe_b64encode(zlib.compress(b"\xff")).decode(),
        "k2:zzzz:" + base64.urlsafe_b64encode(zlib.compress(b"\0" * 10**6)).decode(),  # a bomb
        "k2:only-two-parts",
    ],
)
def test_a_damaged_bitmap_reads_as_no_list(text: str) -> None:
    """Whatever the commit carried, a worker taking the partition over re-reads everything
    (duplicates, with the same execution id) rather than crash or skip executions."""
    assert decode_metadata(1_000, text) is None


@given(
    st.lists(
        st.tuples(st.sampled_from(["add", "remove"]), st.integers(0, 40)),
        max_size=120,
    )
)
def test_held_runs_are_the_held_set(ops: list[tuple[str, int]]) -> None:
    runs, model = HeldRuns(), set[int]()
    for op, offset in ops:
        if op == "add":
            runs.add(offset)
            model.add(offset)
        else:
            runs.remove(offset)
            model.discard(offset)
        expanded = [o for start, n in runs.runs() for o in range(start, start + n)]
        assert expanded == sorted(model)  # sorted, no overlap, nothing lost or invented
        assert all(n > 0 for _s, n in runs.runs())
        assert all(  # maximal runs: neighbours never touch
            a + n < b for (a, n), (b, _m) in zip(runs.runs(), runs.runs()[1:], strict=False)
        )


@given(
    reads=st.integers(1, 60),
    due=st.lists(st.integers(0, 5), min_size=60, max_size=60),
    claims=st.integers(0, 60),
    back=st.lists(st.integers(0, 59), max_size=5),
)
def test_the_commit_names_exactly_the_held_offsets(
    reads: int, due: list[int], claims: int, back: list[int]
) -> None:
    """Whatever was read, claimed and put back, the offset and metadata are those of the
    sorted held set (what the run-length form must reproduce)."""
    inbox = Inbox()
    for o in range(reads):
        inbox.add(0, 100 + o, ex(o, due[o]))
    taken = inbox.due(T_MS + 10_000, claims)
    for i in back:
        if i < len(taken):
            inbox.hold(taken[i])
    held = sorted(o for o, item in inbox._open[0].items() if item.held)
    [(offset, meta)] = inbox.offsets().values()
    if held:
        assert (offset, meta) == (held[0], encode_metadata(held, 100 + reads))
    else:
        assert (offset, meta) == (100 + reads, "")


def test_claims_ahead_look_only_at_what_may_be_claimed_and_once_each() -> None:
    """`upcoming` walks an index of executions that may be claimed ahead: leaseless ones
    (delivered in a transaction when due) are never in it, and one claimed leaves it, so a
    worker holding thousands read ahead does not look at each of them every turn."""
    inbox = Inbox()
    for n in range(50):
        inbox.add(0, n, ex(n, 10), leaseless=n % 2 == 0)
    looked: list[int] = []

    def ready(item: Item) -> bool:
        looked.append(item.offset)
        return True

    first = inbox.upcoming(20_000 + T_MS, 10, ready)
    assert [i.offset for i in first] == [1, 3, 5, 7, 9, 11, 13, 15, 17, 19]
    for item in first:
        inbox.claim(item)
    looked.clear()
    rest = inbox.upcoming(20_000 + T_MS, 100, ready)
    assert [i.offset for i in rest] == list(range(21, 50, 2))
    assert looked == [i.offset for i in rest]  # neither the claimed nor the leaseless
    inbox.unclaim(first[0])  # its claim did not commit: it may be claimed again
    again = inbox.upcoming(20_000 + T_MS, 100, ready)
    assert [i.offset for i in again] == [*range(21, 50, 2), 1]


def test_leaseless_runs_are_handed_out_one_transaction_s_worth_at_a_time_fairly() -> None:
    inbox = Inbox(max_leaseless=4)
    for n in range(10):
        for tenant in ("acme", "beta"):
            run = ex(n, 10).model_copy(
                update={"tenant": tenant, "execution_id": f"{tenant}/j{n}@x"}
            )
            inbox.add(0, len(inbox) + 100 * n, run, leaseless=True)
    other = ex(99, 10).model_copy(update={"tenant": "gamma", "execution_id": "gamma/j99@x"})
    inbox.add(1, 0, other)  # another tenant's claimed run: the leaseless budget does not stop it
    first = inbox.due(T_MS + 10_000, 1)
    taken = sorted(i.execution.tenant for i in first if i.leaseless)
    assert taken == ["acme", "acme", "beta", "beta"]
    assert [i.execution.job_id for i in first if not i.leaseless] == ["j99"]
    assert len(inbox) == 16  # the rest still held, in place
    seen = [i.execution.execution_id for i in first if i.leaseless]
    while len(inbox):
        batch = inbox.due(T_MS + 10_000, 0)
        assert 0 < len(batch) <= 4
        seen += [i.execution.execution_id for i in batch]
    assert sorted(seen) == sorted({*seen}) and len(seen) == 20
