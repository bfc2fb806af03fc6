"""Records forwarded with a group (streams/runtime/coalescing.py): those of a partition of a
topic with one key and group, in one transaction, are written as one record when it commits; a
group of one as it was; a record without a group is written after the groups before it and
before those after it; a unit that fails leaves nothing in a group, an abort clears them all."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from typing import Any

import pytest

from kadence.codec import Codec
from kadence.errors import RecordTooLargeError
from kadence.headers import headers_for
from kadence.models import ExecutionRequested, KafkaTarget, TriggerKind
from kadence.models.base import MAX_ATTEMPTS, MAX_DELIVERIES
from kadence.sizing import record_bytes
from streams.runtime.coalescing import Coalescer
from streams.runtime.context import ALONE_HEADROOM, Headers
from streams.runtime.store import MemoryStore
from streams.runtime.task import Task

NOW = 1_000_000


def combine(key: bytes | None, group: Hashable, values: list[bytes]) -> tuple[bytes, Headers]:
    return b"+".join(values), [("group", str(group).encode())]


def task(max_entries: int = 100, max_bytes: int = 1_000) -> tuple[Task, list[tuple[Any, ...]]]:
    t = Task(0, MemoryStore(), NOW, 60_000)
    out: list[tuple[Any, ...]] = []
    t._emit = lambda *a: out.append(a)
    t.changelog = "changelog"
    t.coalescer = Coalescer(combine, max_entries, max_bytes)
    return t, out


def values(out: list[tuple[Any, ...]]) -> list[tuple[str, int, bytes]]:
    return [(topic, p, value) for topic, p, _k, value, _h in out if topic != "changelog"]


def test_a_transactions_records_of_a_group_are_one_record_at_its_commit() -> None:
    t, out = task()
    t.forward("ex", 0, b"acme", b"a", [], group=1)
    t.forward("history", 3, b"k", b"h", [])  # another topic: written at once
    t.forward("ex", 0, b"acme", b"b", [], group=1)
    t.forward("ex", 0, b"acme", b"c", [], group=2)
    t.forward("ex", 0, b"globex", b"d", [], group=1)  # another key
    t.forward("ex", 1, b"acme", b"e", [], group=1)  # another partition
    assert values(out) == [("history", 3, b"h")]
    assert t.coalescer is not None and t.coalescer.count == 5  # what the runner counts
    t.changelog_records()
    assert t.coalescer.count == 0
    assert values(out)[1:] == [
        ("ex", 0, b"a+b"),
        ("ex", 0, b"c"),  # a group of one is the record as it was
        ("ex", 0, b"d"),
        ("ex", 1, b"e"),
    ]
    assert out[1][4] == [("group", b"1")] and out[2][4] == []
    out.clear()
    t.changelog_records()
    assert values(out) == []  # each transaction starts empty


def test_a_record_without_a_group_keeps_its_place_on_its_partition() -> None:
    """A revocation follows the execution it revokes: the groups forwarded before it are
    written before it, and one forwarded after it begins anew after it."""
    t, out = task()
    t.forward("ex", 0, b"acme", b"a", [], group=1)
    t.forward("ex", 0, b"acme", b"revoke-a", [])
    t.forward("ex", 0, b"acme", b"b", [], group=1)
    t.forward("ex", 1, b"acme", b"elsewhere", [])  # nothing waits on partition 1: at once
    assert values(out) == [("ex", 1, b"elsewhere")]
    t.changelog_records()
    assert values(out)[1:] == [("ex", 0, b"a"), ("ex", 0, b"revoke-a"), ("ex", 0, b"b")]


@pytest.mark.parametrize(
    ("max_entries", "max_bytes", "expected"),
    [(2, 100, [b"a+b", b"c"]), (9, 2, [b"a+b", b"c"]), (9, 1, [b"a", b"b", b"c"])],
)
def test_a_group_is_cut_at_its_bounds(
    max_entries: int, max_bytes: int, expected: list[bytes]
) -> None:
    t, out = task(max_entries, max_bytes)
    for v in (b"a", b"b", b"c"):
        t.forward("ex", 0, b"acme", v, [], group=1)
    t.changelog_records()
    assert [v for _t, _p, v in values(out)] == expected


def test_a_failed_unit_leaves_nothing_in_a_group_and_an_abort_clears_them() -> None:
    t, out = task()

    def work() -> None:
        t.forward("ex", 0, b"acme", b"kept", [], group=1)

    def fails() -> None:
        t.forward("ex", 0, b"acme", b"undone", [], group=1)
        raise RuntimeError("boom")

    assert t.attempt(work, print)
    assert not t.attempt(fails, lambda _exc: None)
    t.changelog_records()
    assert values(out) == [("ex", 0, b"kept")]
    out.clear()
    t.forward("ex", 0, b"acme", b"aborted", [], group=1)
    t.reset_after_abort(NOW)
    t.changelog_records()
    assert values(out) == []


def test_without_a_coalescer_the_group_is_ignored() -> None:
    t, out = task()
    t.coalescer = None
    t.forward("ex", 0, b"acme", b"a", [], group=1)
    assert values(out) == [("ex", 0, b"a")]


def test_a_group_holds_one_record_at_least() -> None:
    with pytest.raises(ValueError, match="one record"):
        Coalescer(combine, 0, 10)


def test_a_grouped_records_headers_are_made_only_if_it_is_written_alone() -> None:
    """A grouped record's headers may be left for later: a group's record has the group's
    own, so they are made only for a group of one."""
    t, out = task()
    made: list[bytes] = []

    def later(value: bytes) -> Callable[[], Headers]:
        def make() -> Headers:
            made.append(value)
            return [("own", value)]

        return make

    t.forward("ex", 0, b"acme", b"a", later(b"a"), group=1)
    t.forward("ex", 0, b"acme", b"b", later(b"b"), group=1)
    t.forward("ex", 0, b"acme", b"c", later(b"c"), group=2)
    assert made == []
    t.changelog_records()
    assert made == [b"c"]  # the group of one only
    assert [(v, h) for _t, _p, _k, v, h in out] == [
        (b"a+b", [("group", b"1")]),
        (b"c", [("own", b"c")]),
    ]


def test_headers_left_for_later_are_made_at_once_where_the_record_is_written_alone() -> None:
    """Without a group or a coalescer the record is written alone: its headers are made at
    once, and it is sized with them."""
    t, out = task()
    t.forward("history", 0, b"k", b"v", lambda: [("own", b"x")])  # no group
    bare = Task(0, MemoryStore(), NOW, 60_000)
    bare._emit = lambda *a: out.append(a)
    bare.forward("ex", 0, b"acme", b"w", lambda: [("own", b"y")], group=1)  # no coalescer
    written = [(v, h) for _t, _p, _k, v, h in out]
    assert written == [(b"v", [("own", b"x")]), (b"w", [("own", b"y")])]
    bare.record_limit = 10
    with pytest.raises(RecordTooLargeError):
        bare.forward("ex", 0, b"k", b"12345", lambda: [("own", b"123456")], group=1)


def test_a_grouped_record_is_sized_with_room_for_its_headers_and_they_are_made_without() -> None:
    """Sized with ALONE_HEADROOM for its headers; a key and value that leave less than that
    have them made at once, and are sized with them (a record that fits, written alone)."""
    t, out = task(max_bytes=100_000)
    t.record_limit = ALONE_HEADROOM + 100
    made: list[int] = []

    def make() -> Headers:
        made.append(1)
        return [("own", b"h")]

    t.forward("ex", 0, b"k", b"x" * 99, make, group=1)  # room for the headers: later
    assert made == []
    t.forward("ex", 0, b"k", b"x" * 200, make, group=2)  # less room: made now, and it fits
    assert made == [1]
    with pytest.raises(RecordTooLargeError):
        t.forward("ex", 0, b"k", b"x" * (ALONE_HEADROOM + 99), make, group=3)
    t.changelog_records()
    assert [len(v) for _t, _p, _k, v, _h in out] == [99, 200]
    assert all(h == [("own", b"h")] for *_, h in out)


def test_an_executions_headers_fit_the_room_left_for_them() -> None:
    """The headers the scheduler leaves for later (an execution's) fit ALONE_HEADROOM for
    the longest identifiers the models take."""
    codec = Codec()
    longest = "t" * 128
    due = datetime(8999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)
    ex = ExecutionRequested(
        execution_id="\U0001f600" * 400,  # four bytes a character
        tenant=longest,
        job_id=longest,
        definition_version=2**53 - 1,
        trigger=TriggerKind.schedule,
        nominal_at=due,
        due_at=due,
        dispatched_at=due,
        attempt=MAX_ATTEMPTS,
        delivery=MAX_DELIVERIES,
        target=KafkaTarget(topic="t"),
        timeout_ms=60_000,
        lease_ttl_ms=3_000,
    )
    headers = headers_for(ex, codec.schema_fingerprint(ExecutionRequested))
    assert 2_000 < record_bytes(None, None, headers) <= ALONE_HEADROOM
