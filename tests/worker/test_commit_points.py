"""The offset commit's point per partition, remembered while nothing it depends on changed
(`CommitPoints`), and `k1` counted before it is written (streams/worker/offsets.py): the same
offsets and metadata as computing them afresh, every time."""

from __future__ import annotations

import base64
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kadence.base36 import base36
from streams.worker import offsets
from streams.worker.offsets import (
    BITMAP_FORMAT,
    FORMAT,
    METADATA_LIMIT,
    CommitPoints,
    HeldRuns,
    commit_point,
    encode_bitmap,
    encode_runs,
    merge_runs,
)


def k1(runs: list[tuple[int, int]], upto: int) -> str:
    """`k1` written out in full, as the format says."""
    base = runs[0][0]
    body = ",".join(f"{base36(s - base)}+{base36(n)}" for s, n in runs)
    return f"{FORMAT}:{base36(upto - base)}:{body}"


runs_strategy = st.lists(
    st.tuples(st.integers(1, 50_000), st.integers(1, 50_000)), min_size=1, max_size=900
)


@settings(max_examples=300, deadline=None)
@given(gaps=runs_strategy, start=st.integers(0, 10**12), tail=st.integers(0, 10**9))
def test_k1_is_chosen_exactly_when_it_fits(
    gaps: list[tuple[int, int]], start: int, tail: int
) -> None:
    runs, at = [], start
    for gap, length in gaps:
        runs.append((at, length))
        at += length + gap
    upto = at + tail
    text = encode_runs(runs, upto)
    full = k1(runs, upto)
    if len(full) <= METADATA_LIMIT:
        assert text == full
    else:
        assert not text.startswith(f"{FORMAT}:")


ops = st.lists(
    st.tuples(
        st.sampled_from(["hold", "free", "owe", "read", "replay", "new held", "look"]),
        st.integers(0, 60),
    ),
    max_size=80,
)


@given(ops)
def test_a_remembered_point_is_the_fresh_one(steps: list[tuple[str, int]]) -> None:
    points = CommitPoints()
    held: HeldRuns | None = None
    owed: HeldRuns | None = None
    nxt, replay = 0, None
    for op, offset in steps:
        if op == "hold":
            held = held or HeldRuns()
            held.add(offset)
            nxt = max(nxt, offset + 1)
        elif op == "free" and held is not None:
            held.remove(offset)
        elif op == "owe":
            owed = owed or HeldRuns()
            owed.add(offset)
            nxt = max(nxt, offset + 1)  # (what is owed was read)
        elif op == "read":
            nxt = max(nxt, offset)
        elif op == "replay":
            replay = (nxt + offset, frozenset({nxt + offset // 2}))
        elif op == "new held":  # the partition revoked and assigned again
            held = HeldRuns()
        runs = held.runs() if held is not None else []
        if owed is not None and owed.starts:
            runs = merge_runs(runs, owed.runs())
        assert points.of(0, held, owed, nxt, replay) == commit_point(runs, nxt, replay)


def test_a_partition_that_did_not_change_is_not_walked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walked: list[int] = []
    real = offsets.commit_point

    def counting(runs: list[tuple[int, int]], nxt: int, replay: object) -> tuple[int, str]:
        walked.append(nxt)
        return real(runs, nxt, None)

    monkeypatch.setattr(offsets, "commit_point", counting)
    points, held = CommitPoints(), HeldRuns()
    for o in (3, 5, 9):
        held.add(o)
    first = points.of(0, held, None, 10, None)
    assert points.of(0, held, None, 10, None) == first
    assert walked == [10]
    held.remove(5)
    assert points.of(0, held, None, 10, None) != first
    assert points.of(0, held, None, 11, None)[1] != ""
    assert walked == [10, 10, 11]


def test_k1_at_the_limit_and_one_past_it() -> None:
    """Runs of `k1` lengths around METADATA_LIMIT, one character apart: each is chosen exactly
    when it fits."""
    lengths = set()
    for k in range(570, 590):
        runs = [(0, 1)] + [(1_296 + 2 * i, 1) for i in range(k)]  # "0+1", then "xyz+1" each
        for upto in (36**d for d in range(3, 10)):  # 4 to 10 digits, past every run
            full = k1(runs, upto)
            lengths.add(len(full))
            assert (encode_runs(runs, upto) == full) == (len(full) <= METADATA_LIMIT)
    assert {METADATA_LIMIT - 1, METADATA_LIMIT, METADATA_LIMIT + 1} <= lengths


def bitmap_as_specified(runs: list[tuple[int, int]], upto: int) -> str:
    """`k2` as the format says: one character per offset from the first held, read as a number
    whose bit i is offset first + i, little-endian bytes, deflated, URL-safe base64."""
    base, window = runs[0][0], upto - runs[0][0]
    marks = ["1" if any(s <= base + i < s + n for s, n in runs) else "0" for i in range(window)]
    raw = int("".join(reversed(marks)), 2).to_bytes((window + 7) // 8, "little")
    packed = base64.urlsafe_b64encode(zlib.compress(raw, 6)).decode().rstrip("=")
    return f"{BITMAP_FORMAT}:{base36(window)}:{packed}"


@given(
    gaps=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 40)), min_size=1, max_size=60),
    tail=st.integers(0, 100),
)
def test_the_bitmap_is_the_one_specified(gaps: list[tuple[int, int]], tail: int) -> None:
    runs, at = [], 1_000
    for gap, length in gaps:
        runs.append((at, length))
        at += length + gap
    assert encode_bitmap(runs, at + tail) == bitmap_as_specified(runs, at + tail)


def test_runs_out_of_order_are_refused_as_before() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        encode_runs([(10, 1), (5, 1)], 20)
    with pytest.raises(ValueError, match="non-negative"):
        encode_runs([(10, 1)], 5)


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(
        st.tuples(st.integers(1, 30), st.integers(1, 30)),
        min_size=offsets._K1_MAX_RUNS + 1,
        max_size=3 * offsets._K1_MAX_RUNS,
    ),
    tail=st.integers(0, 1_000),
    owe=st.booleans(),
)
def test_a_partition_in_more_runs_than_k1_names_gets_the_bitmap_of_its_runs(
    gaps: list[tuple[int, int]], tail: int, owe: bool
) -> None:
    """Past what `k1` can name, the commit point is built from the held runs' own lists: the
    same offset and metadata as from their (start, length) runs, owed offsets merged in."""
    held, at = HeldRuns(), 5_000
    for gap, length in gaps:
        for o in range(at, at + length):
            held.add(o)
        at += length + gap
    owed = None
    if owe:
        owed = HeldRuns()
        owed.add(at - 1)  # in the last gap
    nxt = at + tail
    runs = held.runs() if owed is None else merge_runs(held.runs(), owed.runs())
    point = CommitPoints().of(3, held, owed, nxt, None)
    assert point == commit_point(runs, nxt, None)
    assert point[1].startswith(f"{BITMAP_FORMAT}:") or point[1] == ""


def test_the_bitmap_of_runs_out_of_order_is_refused() -> None:
    with pytest.raises(ValueError, match="sorted"):
        encode_bitmap([(10, 5), (12, 1)], 40)
    with pytest.raises(ValueError, match="sorted"):
        offsets.encode_spans([10, 20], [15, 20], 40)
