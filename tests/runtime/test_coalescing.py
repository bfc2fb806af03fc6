"""Records forwarded with a group (streams/runtime/coalescing.py): those of a partition of a
topic with one key and group, in one transaction, are written as one record when it commits; a
group of one as it was; a record without a group is written after the groups before it and
before those after it; a unit that fails leaves nothing in a group, an abort clears them all."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest

from streams.runtime.coalescing import Coalescer
from streams.runtime.context import Headers
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
