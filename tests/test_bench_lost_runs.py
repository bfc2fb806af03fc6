"""bench/lost_runs.py: which jobs a B2 run counts lost, from the successes it read and the skips
history gave per job; and the history lines of a few. No broker: records are built here and
the history topic's reader is replaced by a list."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bench import lost_runs
from bench.headline import headline
from bench.lost_runs import SAMPLE_RECORDS
from bench.lost_runs import lost_runs as find_lost
from bench.misfire_skips import Skips
from kadence.codec import Codec
from kadence.models import Decision, HistoryRecord

START = datetime(2026, 12, 8, 1, 0, tzinfo=UTC)
FIRST = int(START.timestamp())
DUE = range(FIRST, FIRST + 5)


def test_a_job_is_lost_only_for_what_neither_succeeded_nor_was_skipped() -> None:
    ok = [("t/a", float(s)) for s in DUE]
    ok += [("t/a", float(FIRST))]  # a duplicate success counts once
    ok += [("t/b", float(s)) for s in DUE[:3]]  # two missing, both skipped
    ok += [("t/c", float(s)) for s in DUE if s != FIRST + 2]  # one missing, not skipped
    ok += [("t/c", float(FIRST + 99))]  # a success past the range is not one of its runs
    found = find_lost(ok, ["t/a", "t/b", "t/c", "t/d"], DUE, {"t/b": 2, "t/d": 1})
    assert found.jobs == {"t/c": 1, "t/d": 4}  # d: five due, none ran, one skipped
    assert found.unsucceeded_s == {0: 1, 1: 1, 2: 2, 3: 1, 4: 1}
    row = found.as_row()
    assert row["jobs"] == 2
    assert row["runs"] == 5
    assert row["per_job"] == {1: 1, 4: 1}


def test_nothing_lost_finds_no_job() -> None:
    ok = [("t/a", float(s)) for s in DUE]
    assert find_lost(ok, ["t/a"], DUE, {}).jobs == {}


def test_skips_are_kept_by_job_for_it() -> None:
    found = Skips(START.timestamp())
    for job, n in (("a", "3"), ("a", "2"), ("b", "7")):
        record = HistoryRecord(
            tenant="t",
            job_id=job,
            decision=Decision.coalesced,
            at=START,
            due_at=START,
            details={"occurrences": n},
        )
        found.add(record, 1_000, 12)
    assert found.by_job == {"t/a": 5, "t/b": 7}


class _Msg:
    def __init__(self, value: bytes | None) -> None:
        self._value = value

    def value(self) -> bytes | None:
        return self._value


def test_a_sampled_jobs_history_is_its_last_records_one_line_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    codec = Codec()
    records = [
        HistoryRecord(
            tenant="t",
            job_id=job,
            decision=Decision.throttled,
            at=START + timedelta(seconds=i),
            execution_id=f"t/{job}@{i}",
            due_at=START + timedelta(seconds=i),
            reason=f"held {i}",
            details={"n": str(i)},
        )
        for i in range(SAMPLE_RECORDS + 5)
        for job in ("a", "b")
    ]
    messages = [_Msg(None), *(_Msg(codec.encode(r)) for r in records)]

    def fake(_bootstrap: str, _topic: str, _timeout: float = 60.0, **_: Any) -> Iterator[_Msg]:
        yield from messages

    monkeypatch.setattr(lost_runs, "read_to_end", fake)
    found = lost_runs.sample_history("host:1", "history", ["t/a"])
    assert list(found) == ["t/a"]
    lines = found["t/a"]
    assert len(lines) == SAMPLE_RECORDS
    assert lines[0].split(" ")[1:3] == ["throttled", "t/a@5"]
    assert lines[-1].endswith(f"held {SAMPLE_RECORDS + 4} [n={SAMPLE_RECORDS + 4}]")


def test_the_line_names_how_many_jobs_lost_runs() -> None:
    row: dict[str, Any] = {"rate_per_s": 100, "on_time": False, "p99_after_warm_up_s": 0.4}
    row |= {"lost": 20, "lost_detail": {"jobs": 20}}
    assert "20 LOST (of 20 jobs: lost_detail)" in headline(row)
