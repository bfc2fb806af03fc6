"""Units of work on a task: all of a unit's writes and records, or none of them."""

from __future__ import annotations

from typing import Any

import pytest

from kadence.errors import RecordTooLargeError
from kadence.sizing import RECORD_LIMIT, check_fits, record_bytes
from streams.runtime.context import ProcessorContext
from streams.runtime.store import MemoryStore
from streams.runtime.task import Task

NOW = 1_000_000


def task() -> tuple[Task, list[tuple[Any, ...]]]:
    t = Task(0, MemoryStore(), NOW, 60_000)
    out: list[tuple[Any, ...]] = []
    t._emit = lambda *a: out.append(a)
    t.changelog = "changelog"
    return t, out


def test_a_unit_that_raises_leaves_nothing_behind_and_its_handler_runs() -> None:
    t, out = task()
    t.put(b"before", b"1", None)
    out.clear()
    errors: list[Exception] = []

    def work() -> None:
        t.put(b"before", b"changed", NOW + 5)
        t.put(b"new", b"x", None)
        t.cache[b"new"] = "decoded"
        t.forward("history", 0, b"k", b"v", [])
        raise RuntimeError("boom")

    def handler(exc: Exception) -> None:
        errors.append(exc)
        t.forward("rejected", 0, b"k", b"why", [])

    assert not t.attempt(work, handler)
    assert [str(e) for e in errors] == ["boom"]
    assert t.get(b"before") == b"1"
    assert t.get(b"new") is None
    assert b"new" not in t.cache
    assert [o[0] for o in out] == ["rejected"]  # neither the changelog records nor the history


def test_a_unit_that_succeeds_sends_its_records_in_order() -> None:
    t, out = task()

    def work() -> None:
        t.put(b"a", b"1", None)
        t.forward("x", 0, b"a", b"v", [])

    assert t.attempt(work, print)
    assert [o[0] for o in out] == ["x"]  # state is changelogged when the transaction commits
    t.changelog_records()
    assert [o[0] for o in out] == ["x", "changelog"]


def test_an_inner_unit_that_fails_keeps_what_the_outer_one_did() -> None:
    t, out = task()

    def inner() -> None:
        t.put(b"inner", b"2", None)
        raise ValueError("inner")

    def outer() -> None:
        t.put(b"outer", b"1", None)
        assert not t.attempt(inner, lambda exc: t.put(b"quarantined", b"q", None))
        t.put(b"after", b"3", None)

    assert t.attempt(outer, lambda exc: pytest.fail(f"outer failed: {exc}"))
    assert (t.get(b"outer"), t.get(b"inner"), t.get(b"quarantined"), t.get(b"after")) == (
        b"1",
        None,
        b"q",
        b"3",
    )
    t.changelog_records()
    assert [o[2] for o in out] == [b"outer", b"quarantined", b"after"]


def test_a_record_too_large_is_refused_before_anything_is_sent() -> None:
    t, out = task()
    t.record_limit = 1_000
    caught: list[Exception] = []

    def work() -> None:
        t.forward("fine", 0, b"k", b"v" * 10, [])
        t.forward("huge", 0, b"k", b"v" * 600, [("h", b"x" * 600)])  # value + header over 1 000

    assert not t.attempt(work, caught.append)
    assert out == []
    [exc] = caught
    assert isinstance(exc, RecordTooLargeError)
    assert "huge" in str(exc) and "1000-byte limit" in str(exc)


def test_a_failing_handler_is_undone_too_and_does_not_escape() -> None:
    t, out = task()

    def handler(exc: Exception) -> None:
        t.forward("rejected", 0, b"k", b"v", [])
        raise RuntimeError("handler too")

    def work() -> None:
        raise ZeroDivisionError

    assert not t.attempt(work, handler)
    assert out == []


def test_record_size_counts_key_value_and_every_header() -> None:
    assert (
        record_bytes(b"key", b"value", [("h1", b"ab"), ("h2", "cd"), ("h3", None)])
        == 3 + 5 + 4 + 4 + 2
    )
    check_fits("t", None, b"x" * (RECORD_LIMIT - 1), [("h", None)])
    with pytest.raises(RecordTooLargeError):
        check_fits("t", b"k", b"x" * RECORD_LIMIT)


def test_a_task_is_the_context_a_processor_sees() -> None:
    t, out = task()
    ctx: ProcessorContext = t
    assert ctx.timers_loaded_until_ms == -1
    t.due(NOW, 10)
    assert ctx.timers_loaded_until_ms == NOW + 60_000
    ctx.put(b"a", b"1", NOW + 1)  # inside the loaded window: in the wheel without a scan
    t.store.apply(t.batch)
    ctx.put(b"b", b"2", None)
    t.store.apply(t.batch)
    ctx.forward("out", None, b"k", b"v", [])
    assert out[-1] == ("out", None, b"k", b"v", [])
    assert ctx.keys_after(b"", 10) == [b"a", b"b"]
    assert ctx.keys_after(b"a", 10) == [b"b"]
    assert t.due(NOW + 1, 10) == [b"a"]


def _json_of(value: object) -> bytes:
    return repr(value).encode()


def test_a_kept_value_is_read_back_and_written_once_at_the_commit() -> None:
    t, out = task()
    encoded: list[object] = []

    def encode(value: object) -> bytes:
        encoded.append(value)
        return repr(value).encode()

    for n in range(1, 6):  # five inputs change it: one unit each
        assert t.attempt(lambda n=n: t.keep(b"~count", n, encode), print)  # type: ignore[misc]
    assert t.cache[b"~count"] == 5
    assert t.get(b"~count") == b"5"  # read your own writes, encoded
    assert encoded == [1, 5]  # sized when first kept, and read back: not at every keep
    t.changelog_records()
    assert [(o[0], o[2]) for o in out] == [("changelog", b"~count")]  # one record, the last
    assert out[0][3].endswith(b"5")
    assert t.kept == {}
    t.committed(7)
    assert t.get(b"~count") == b"5"  # in the store now


def test_a_failed_unit_puts_back_the_kept_value_it_found() -> None:
    t, out = task()
    assert t.attempt(lambda: t.keep(b"k", 1, _json_of), print)

    def work() -> None:
        t.keep(b"k", 2, _json_of)
        t.keep(b"other", 9, _json_of)
        raise RuntimeError("boom")

    assert not t.attempt(work, lambda exc: None)
    assert t.get(b"k") == b"1"
    assert t.get(b"other") is None
    assert b"k" not in t.cache  # read again from what was put back
    t.changelog_records()
    assert [(o[2], o[3][8:]) for o in out] == [(b"k", b"1")]


def test_put_and_keep_of_one_key_the_newer_wins() -> None:
    t, out = task()
    t.keep(b"k", 1, _json_of)
    t.put(b"k", b"put", None)
    assert t.get(b"k") == b"put"
    t.changelog_records()
    assert [o[3][8:] for o in out] == [b"put"]
    out.clear()
    t.put(b"k", b"put", None)
    t.keep(b"k", 2, _json_of)
    t.changelog_records()
    assert [o[3][8:] for o in out] == [b"2"]


def test_a_failed_unit_that_put_over_a_kept_value_puts_it_back() -> None:
    t, out = task()
    t.keep(b"k", 1, _json_of)

    def work() -> None:
        t.put(b"k", b"put", None)
        raise RuntimeError("boom")

    assert not t.attempt(work, lambda exc: None)
    assert t.get(b"k") == b"1"
    t.changelog_records()
    assert [o[3][8:] for o in out] == [b"1"]


def test_an_inner_unit_s_kept_value_is_undone_with_the_outer_unit() -> None:
    t, _ = task()
    t.keep(b"k", 1, _json_of)

    def outer() -> None:
        assert t.attempt(lambda: t.keep(b"k", 2, _json_of), print)
        raise RuntimeError("outer")

    assert not t.attempt(outer, lambda exc: None)
    assert t.get(b"k") == b"1"


def test_an_abort_forgets_kept_values() -> None:
    t, out = task()
    t.keep(b"k", 1, _json_of)
    t.reset_after_abort(NOW)
    t.changelog_records()
    assert out == []
    assert t.get(b"k") is None


def test_a_kept_value_too_large_fails_its_unit_and_one_that_grew_is_not_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    t, out = task()
    t.record_limit = 200
    assert not t.attempt(lambda: t.keep(b"big", "x" * 300, str.encode), lambda exc: None)
    assert t.get(b"big") is None
    assert t.attempt(lambda: t.keep(b"grows", "x", str.encode), print)
    assert t.attempt(lambda: t.keep(b"grows", "x" * 300, str.encode), print)  # sized once
    t.changelog_records()
    assert out == []
    assert "kept b'grows' not written" in caplog.text
