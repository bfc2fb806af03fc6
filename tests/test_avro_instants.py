"""Instants kept (kadence/avro_fast.py): a compiled reader gives fastavro's datum whether an
instant is read or taken from what it kept by its bytes, whatever bytes follow it; a compiled
writer gives fastavro's bytes whether an instant is converted or kept by its value, in any
zone; both keep a bounded number. No broker."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kadence import avro_fast
from kadence.avro_fast import (
    INSTANT_BYTES,
    INSTANTS_KEPT,
    compile_reader,
    compile_writer,
    write_long,
)

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Instants",
    "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "then", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "tail", "type": "bytes"},
    ],
}
PARSED = fastavro.parse_schema(SCHEMA)
READ = compile_reader(SCHEMA)
WRITE = compile_writer(SCHEMA, b"")
FIRST_MS, END_MS = avro_fast._FIRST_MS, avro_fast._END_MS
"""What the models accept (`UtcDatetime`); the reader raises outside."""
millis = st.one_of(
    st.integers(FIRST_MS, END_MS - 1),
    st.integers(2**34, 2**41 - 1),  # six-byte varints: the ones kept
    st.sampled_from([2**34 - 1, 2**34, 2**41 - 1, 2**41, 0, -1]),  # where the length changes
)


def fastavro_datum(data: bytes) -> dict[str, Any]:
    datum: dict[str, Any] = fastavro.schemaless_reader(io.BytesIO(data), PARSED, None)  # type: ignore[assignment]
    return datum


def body(at: int, then: int | None, tail: bytes) -> bytes:
    second = b"\x00" if then is None else b"\x02" + write_long(then)
    return write_long(at) + second + write_long(len(tail)) + tail


@settings(max_examples=400, deadline=None)
@given(at=millis, then=st.none() | millis, tail=st.binary(max_size=12))
def test_an_instant_read_or_kept_is_fastavros(at: int, then: int | None, tail: bytes) -> None:
    data = body(at, then, tail)
    for _ in range(2):  # the second read takes what the first kept
        datum, end = READ(data, 0)
        assert end == len(data)
        assert datum == fastavro_datum(data)


def test_the_same_bytes_give_the_kept_instant_whatever_follows() -> None:
    at = int(datetime(2026, 12, 5, 9, 0, tzinfo=UTC).timestamp() * 1000)
    assert len(write_long(at)) == INSTANT_BYTES
    first, _ = READ(body(at, None, b"a"), 0)
    second, _ = READ(body(at, at, b"something else"), 0)
    assert first["at"] is second["at"] is second["then"]  # kept, not built again
    assert second["at"] == datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def test_an_instant_cut_short_fails_as_it_did_though_its_start_is_kept() -> None:
    at = int(datetime(2026, 12, 5, 9, 0, tzinfo=UTC).timestamp() * 1000)
    READ(body(at, None, b""), 0)  # kept
    with pytest.raises(IndexError):
        READ(write_long(at)[:-1], 0)
    outside = (1 << 41) + 5  # 2039-09: a seven-byte varint, never kept by six of its bytes
    with_tail = body(outside, None, b"")
    assert READ(with_tail, 0)[0] == fastavro_datum(with_tail)
    assert with_tail[:INSTANT_BYTES] not in avro_fast._INSTANTS


@pytest.mark.parametrize("ms", [FIRST_MS - 1, END_MS, -(2**42)])
def test_an_instant_the_models_refuse_is_refused_every_time(ms: int) -> None:
    for _ in range(2):
        with pytest.raises(ValueError, match="outside what the models accept"):
            READ(body(ms, None, b""), 0)


def test_what_is_kept_stays_bounded() -> None:
    start = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
    for i in range(INSTANTS_KEPT + 100):
        READ(body(start + i, None, b""), 0)
        assert len(avro_fast._INSTANTS) <= INSTANTS_KEPT


class Instants:
    """What the writer takes: a model's attributes."""

    def __init__(self, at: datetime, then: datetime | None, tail: bytes = b"") -> None:
        self.at, self.then, self.tail = at, then, tail


def fastavro_bytes(record: Instants) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, PARSED, {"at": record.at, "then": record.then, "tail": b""})
    return out.getvalue()


zones = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]
)
aware = st.datetimes(
    min_value=datetime(1900, 1, 2), max_value=datetime(2400, 1, 1), timezones=zones
)


@settings(max_examples=400, deadline=None)
@given(at=aware, then=st.none() | aware)
def test_an_instant_written_or_kept_is_fastavros(at: datetime, then: datetime | None) -> None:
    record = Instants(at, then)
    for _ in range(2):  # the second write takes what the first kept
        assert WRITE(record) == fastavro_bytes(record)
    same_instant = at.astimezone(timezone(timedelta(hours=-3)))
    assert WRITE(Instants(same_instant, then)) == fastavro_bytes(record)


def test_an_instant_written_again_is_the_kept_bytes_and_a_naive_one_fails_every_time() -> None:
    at = datetime(2026, 12, 5, 9, 0, 0, 123_000, tzinfo=UTC)
    first = WRITE(Instants(at, None))
    assert avro_fast._WRITTEN[at] is avro_fast._WRITTEN[at.astimezone(timezone.max)]
    assert first.startswith(avro_fast._WRITTEN[at])
    naive = at.replace(tzinfo=None)
    for _ in range(2):
        with pytest.raises(TypeError):
            WRITE(Instants(naive, None))
    assert naive not in avro_fast._WRITTEN


def test_what_the_writer_keeps_stays_bounded() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(INSTANTS_KEPT + 100):
        WRITE(Instants(start + timedelta(milliseconds=i), None))
        assert len(avro_fast._WRITTEN) <= INSTANTS_KEPT
