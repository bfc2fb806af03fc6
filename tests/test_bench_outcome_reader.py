"""bench.execution's outcome reader keeps what it reads as bytes while outcomes keep coming and
decodes them once the topic is quiet: decoding each record as it came took a third to half a
core of the two being measured during a burst (per-process CPU sampled every 0.1 s). Checked
without a broker, with a consumer that hands out records as the benchmark's would."""

from __future__ import annotations

import time
from collections import deque
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bench.execution import collect
from kadence.codec import Codec
from kadence.models import ExecutionOutcome

DUE = datetime(2026, 12, 7, tzinfo=UTC)


def outcome(i: int, status: str = "succeeded") -> ExecutionOutcome:
    return ExecutionOutcome.model_validate(
        {
            "execution_id": f"acme/job-{i}@2026-12-07T00:00:00.000Z",
            "tenant": "acme",
            "job_id": f"job-{i}",
            "attempt": 1,
            "delivery": 1,
            "worker_id": "w1",
            "status": status,
            "error": None if status == "succeeded" else {"type": "X", "message": "no"},
            "nominal_at": DUE,
            "due_at": DUE,
            "started_at": DUE + timedelta(seconds=0.2),
            "finished_at": DUE + timedelta(seconds=0.3),
        }
    )


class Msg:
    def __init__(self, value: bytes | None, error: object = None) -> None:
        self._value, self._error = value, error

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> object:
        return self._error


class Turns:
    """Each `consume` returns the next list given (empty once they run out: a quiet topic),
    taking `each_s` to do so."""

    def __init__(self, turns: list[list[Msg]], each_s: float = 0.0) -> None:
        self.turns = deque(turns)
        self.calls = 0
        self.each_s = each_s

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        self.calls += 1
        time.sleep(self.each_s)
        return self.turns.popleft() if self.turns else []


class CountingCodec(Codec):
    def __init__(self) -> None:
        super().__init__()
        self.decoded_at_call: list[int] = []
        self.decoded_at: list[float] = []
        self.consumer: Turns | None = None

    def decode(self, data: Any, *args: Any, **kw: Any) -> Any:
        assert self.consumer is not None
        self.decoded_at_call.append(self.consumer.calls)
        self.decoded_at.append(time.time())
        return super().decode(data, *args, **kw)


def test_outcomes_are_decoded_once_the_topic_is_quiet_not_as_they_come() -> None:
    codec = CountingCodec()
    records = [Msg(codec.encode(outcome(i))) for i in range(6)]
    busy = [[records[0], records[1]], [Msg(None, error="eof"), records[2]], [records[3]]]
    consumer = codec.consumer = Turns([*busy, [], [records[4], records[5]]])
    got = collect(consumer, codec, expect=6, timeout_s=30, quiet_s=0.0, late_s=0.0)
    assert sorted(o.job_id for o in got) == [f"job-{i}" for i in range(6)]
    # nothing decoded while the first three reads returned records: all four at the quiet
    # fourth read, the last two at the quiet read after them
    assert codec.decoded_at_call[:4] == [4, 4, 4, 4]
    assert codec.decoded_at_call[4:] == [6, 6]


def test_it_decodes_past_its_bound_even_while_outcomes_keep_coming() -> None:
    codec = CountingCodec()
    values = [codec.encode(outcome(i)) for i in range(4)]
    consumer = codec.consumer = Turns([[Msg(v)] for v in values])
    got = collect(
        consumer, codec, expect=4, timeout_s=30, quiet_s=0.0, pending_max_bytes=1, late_s=0
    )
    assert len(got) == 4
    assert codec.decoded_at_call == [1, 2, 3, 4]  # each read decoded at once: over the bound


def test_only_successes_count_and_a_stall_of_successes_stops_the_wait(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Failed outcomes keep coming (so the topic is never quiet) after one success: the wait
    stops `stall_s` after that success, having decoded what waited, with the one success."""
    codec = CountingCodec()
    ok = Msg(codec.encode(outcome(0)))
    failed = [[Msg(codec.encode(outcome(i, "failed")))] for i in range(1, 400)]
    consumer = codec.consumer = Turns([[ok], *failed], each_s=0.005)
    began = time.monotonic()
    got = collect(consumer, codec, expect=3, timeout_s=30, stall_s=0.3, quiet_s=0.0, late_s=0)
    assert [o.job_id for o in got] == ["job-0"]
    assert 0.3 <= time.monotonic() - began < 1.5  # not the 30 s deadline, nor every record
    assert consumer.turns  # it stopped with failed outcomes still coming
    assert "no success for 0 s: stopped waiting" in capsys.readouterr().out


def test_nothing_is_decoded_before_the_window_ends_quiet_or_stalled() -> None:
    """B2's outcomes come as a few large records a second with quiet spells between them:
    until `hold_until` (its window's end) neither a quiet read nor the stall check decodes."""
    codec = CountingCodec()
    ok = [Msg(codec.encode(outcome(i))) for i in range(2)]
    consumer = codec.consumer = Turns([[ok[0]], [], [], [], [ok[1]]], each_s=0.05)
    hold_until = time.time() + 0.4
    got = collect(
        consumer, codec, expect=2, timeout_s=30, stall_s=0.1, quiet_s=0.0, late_s=0,
        hold_until=hold_until,
    )  # fmt: skip
    assert sorted(o.job_id for o in got) == ["job-0", "job-1"]
    assert codec.decoded_at and min(codec.decoded_at) >= hold_until
