"""A batch's executions read from their job's kept parts (kadence/entry_templates.py) are
exactly what `Codec.decode` reads, for any runs of any jobs in any order, and damaged bytes get
the codec's model or error; the runs of a wake after the second are made from the parts."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from kadence import avro_fast
from kadence.codec import HEADER_LEN, Codec
from kadence.entry_templates import JOBS_KEPT, PART_BYTES, EntryReader
from kadence.errors import DecodeError
from kadence.examples import examples
from kadence.models import ExecutionRequested, WireModel
from tests.test_codec_fast import executions
from tests.test_execution_bytes import other_changes, run_changes, wake_runs

CODEC = Codec()


def read(codec: Codec | EntryReader, data: bytes) -> WireModel | str:
    """What reading `data` gives: the model, or the error's class and text."""
    try:
        if isinstance(codec, EntryReader):
            return codec.decode(data)
        return codec.decode(data, (ExecutionRequested,))
    except DecodeError as exc:
        return f"{type(exc).__name__}: {exc}"


def same(got: WireModel | str, expected: WireModel | str) -> bool:
    if isinstance(expected, ExecutionRequested):
        return (
            type(got) is ExecutionRequested
            and got == expected
            and got.model_dump() == expected.model_dump()
            and got.model_fields_set == set(ExecutionRequested.model_fields)
        )
    return got == expected


def example() -> ExecutionRequested:
    ex = CODEC.decode(CODEC.encode(examples()["ExecutionRequested"]), (ExecutionRequested,))
    assert isinstance(ex, ExecutionRequested)
    return ex


@settings(max_examples=200, deadline=None)
@given(
    jobs=st.lists(executions, min_size=1, max_size=3),
    changes=st.lists(
        st.tuples(
            st.integers(0, 2),
            st.one_of(run_changes, run_changes, st.tuples(run_changes, other_changes)),
        ),
        max_size=16,
    ),
)
def test_runs_read_from_kept_parts_are_the_codecs(
    jobs: list[ExecutionRequested], changes: list[tuple[int, object]]
) -> None:
    """Runs of a few jobs, interleaved (a batch holds one run of each of many jobs), some with
    other constants (a new wake, another attempt)."""
    reader = EntryReader(CODEC)
    runs = list(jobs)
    for which, change in changes:
        update = {**change[0], **change[1]} if isinstance(change, tuple) else change
        assert isinstance(update, dict)
        runs.append(jobs[which % len(jobs)].model_copy(update=update))
    for ex in runs * 2:  # each job's parts are kept from its second run read in full
        data = CODEC.encode(ex)
        assert same(read(reader, data), read(CODEC, data))


@settings(max_examples=300, deadline=None)
@given(
    first=executions,
    pos=st.integers(min_value=HEADER_LEN),
    flip=st.integers(1, 255),
    cut=st.integers(0, 4),
)
def test_damaged_runs_read_as_the_codec_reads_them(
    first: ExecutionRequested, pos: int, flip: int, cut: int
) -> None:
    reader = EntryReader(CODEC)
    data = CODEC.encode(first)
    for _ in range(2):  # its parts kept
        reader.decode(data)
    damaged = bytearray(data)
    damaged[HEADER_LEN + pos % (len(data) - HEADER_LEN)] ^= flip
    bad = bytes(damaged[: len(damaged) - cut])
    assert same(read(reader, bad), read(CODEC, bad))


def test_the_runs_of_a_wake_after_the_second_are_made_from_the_parts() -> None:
    first = example()
    reader = EntryReader(CODEC)
    runs = wake_runs(first, 15)
    for ex in runs:
        assert reader.decode(CODEC.encode(ex)) == ex
    assert reader.used == 13
    other = first.model_copy(update={"job_id": "one-off", "execution_id": "acme/one-off@1"})
    assert reader.decode(CODEC.encode(other)) == other  # another job: in full
    assert reader.used == 13
    later = first.dispatched_at + timedelta(seconds=15)
    next_wake = runs[3].model_copy(update={"dispatched_at": later})
    assert reader.decode(CODEC.encode(next_wake)) == next_wake  # in full, and kept
    assert reader.decode(CODEC.encode(next_wake)) == next_wake
    assert reader.used == 14


def with_id(data: bytes, ex: ExecutionRequested, raw_id: bytes) -> bytes:
    """`data` (the bytes of `ex`) with its execution id's bytes `raw_id` instead."""
    old = avro_fast.write_long(len(ex.execution_id.encode())) + ex.execution_id.encode()
    assert data[HEADER_LEN:].startswith(old)
    own = avro_fast.write_long(len(raw_id)) + raw_id
    return data[:HEADER_LEN] + own + data[HEADER_LEN + len(old) :]


def test_an_id_out_of_bounds_is_read_in_full_and_refused_as_the_codec_refuses_it() -> None:
    first = example()
    reader = EntryReader(CODEC)
    data = CODEC.encode(first)
    for _ in range(2):
        reader.decode(data)
    used = reader.used
    for raw_id in (b"x" * 401, b"", b"\xff\xfe", b"\xed\xa0\x80"):  # a surrogate, too
        bad = with_id(data, first, raw_id)
        got = read(reader, bad)
        assert isinstance(got, str) and got == read(CODEC, bad)
    for bad in (data + b"\x00", data + data[-3:]):  # bytes after the record
        got = read(reader, bad)
        assert isinstance(got, str) and got == read(CODEC, bad)
    assert reader.used == used
    longest = with_id(data, first, "\u00e9".encode() * 400)  # 400 characters, 800 bytes
    made = read(reader, longest)
    assert same(made, read(CODEC, longest)) and reader.used == used + 1


def test_jobs_kept_are_bounded() -> None:
    first = example()
    reader = EntryReader(CODEC)
    for i in range(JOBS_KEPT + 10):
        ex = first.model_copy(update={"job_id": f"j{i}", "execution_id": f"acme/j{i}@1"})
        data = CODEC.encode(ex)
        reader.decode(data)
        reader.decode(data)
    assert len(reader._jobs) <= JOBS_KEPT
    assert len(reader._seen) <= JOBS_KEPT


def test_a_job_with_a_large_payload_is_read_in_full_and_nothing_of_it_kept() -> None:
    first = example().model_copy(update={"payload": b"x" * PART_BYTES})
    reader = EntryReader(CODEC)
    for i in range(3):
        ex = first.model_copy(update={"execution_id": f"acme/job@{i}"})
        assert reader.decode(CODEC.encode(ex)) == ex
    assert reader.used == 0 and not reader._jobs
