"""The codec: Avro single-object round trips, JSON input, and a specific error for bad bytes."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kadence.codec import MAGIC, Codec
from kadence.errors import (
    DecodeError,
    EmptyRecordError,
    GarbageBytesError,
    InvalidRecordError,
    TruncatedRecordError,
    UnexpectedRecordTypeError,
    UnknownSchemaError,
)
from kadence.examples import T0, examples, schedule_definition
from kadence.models import (
    COMMAND_TYPES,
    CronSchedule,
    HttpTarget,
    IntervalSchedule,
    KafkaTarget,
    OnceSchedule,
    ScheduleDefinition,
    TriggerNow,
    WireModel,
)

CODEC = Codec()
EXAMPLES = examples()


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_record_type_round_trips_byte_for_byte(name: str) -> None:
    record = EXAMPLES[name]
    data = CODEC.encode(record)
    assert data[:2] == MAGIC
    assert data[2:10] == CODEC.schema_fingerprint(type(record))
    decoded = CODEC.decode(data)
    assert decoded == record
    assert type(decoded) is type(record)
    assert CODEC.encode(decoded) == data


def test_union_members_keep_their_type() -> None:
    once = schedule_definition().model_copy(
        update={"schedule": OnceSchedule(run_at=T0), "target": KafkaTarget(topic="acme.jobs")}
    )
    decoded = CODEC.decode_as(CODEC.encode(once), ScheduleDefinition)
    assert decoded.schedule == OnceSchedule(run_at=T0)
    assert decoded.target == KafkaTarget(topic="acme.jobs")
    cron = CODEC.decode_as(CODEC.encode(schedule_definition()), ScheduleDefinition)
    assert isinstance(cron.schedule, CronSchedule)
    assert isinstance(cron.target, HttpTarget)
    every = IntervalSchedule(every_s=5400, offset_s=900, timezone="Europe/Paris", spread_s=30)
    interval = schedule_definition().model_copy(update={"schedule": every})
    assert CODEC.decode_as(CODEC.encode(interval), ScheduleDefinition).schedule == every


def test_json_input_as_kcat_would_send_it() -> None:
    doc = {
        "tenant": "acme",
        "job_id": "hourly",
        "version": 1,
        "schedule": {"kind": "cron", "expression": "0 * * * *", "timezone": "America/New_York"},
        "target": {"kind": "kafka", "topic": "acme.jobs"},
        "payload": {"hello": "world"},
    }
    record = CODEC.decode_as(json.dumps(doc).encode(), ScheduleDefinition)
    assert record.schedule == CronSchedule(expression="0 * * * *", timezone="America/New_York")
    assert record.payload == b'{"hello":"world"}'
    # and it re-encodes to Avro like any other definition
    assert CODEC.decode(CODEC.encode(record)) == record


def test_json_commands_name_their_type() -> None:
    doc = {
        "type": "TriggerNow",
        "tenant": "acme",
        "job_id": "hourly",
        "request_id": "r-1",
        "issued_at": "2026-12-01T09:00:00+01:00",
    }
    record = CODEC.decode(json.dumps(doc).encode(), COMMAND_TYPES)
    assert isinstance(record, TriggerNow)
    assert record.issued_at.isoformat() == "2026-12-01T08:00:00+00:00"


def test_json_command_without_type_is_a_field_error() -> None:
    with pytest.raises(InvalidRecordError) as err:
        CODEC.decode(b'{"tenant": "acme"}', COMMAND_TYPES)
    assert err.value.errors == ['type: field required (e.g. "TriggerNow")']


@pytest.mark.parametrize(
    ("data", "error", "code"),
    [
        (b"", EmptyRecordError, "empty_record"),
        (None, EmptyRecordError, "empty_record"),
        (b"\x00\x01\x02garbage", GarbageBytesError, "garbage_bytes"),
        (b"\xc3\x01\x01\x02", TruncatedRecordError, "truncated_record"),
        (MAGIC + b"\xde\xad\xbe\xef\x00\x00\x00\x00body", UnknownSchemaError, "unknown_schema"),
        (b'{"tenant": ', GarbageBytesError, "garbage_bytes"),
        (b"[1, 2]", GarbageBytesError, "garbage_bytes"),
    ],
)
def test_bad_bytes_decode_to_a_specific_error(
    data: bytes | None, error: type[DecodeError], code: str
) -> None:
    with pytest.raises(error) as err:
        CODEC.decode(data)
    assert err.value.code == code


def test_truncated_avro_body() -> None:
    data = CODEC.encode(schedule_definition())
    with pytest.raises(TruncatedRecordError, match="ends early"):
        CODEC.decode(data[:-5])


def test_trailing_bytes_are_not_silently_ignored() -> None:
    data = CODEC.encode(schedule_definition())
    with pytest.raises(GarbageBytesError, match="trailing"):
        CODEC.decode(data + b"\x00")


def test_unknown_fingerprint_names_it() -> None:
    data = CODEC.encode(schedule_definition())
    forged = data[:2] + b"\x01" * 8 + data[10:]
    with pytest.raises(UnknownSchemaError) as err:
        CODEC.decode(forged)
    assert err.value.fingerprint == b"\x01" * 8
    assert "0101010101010101" in str(err.value)


def test_json_failing_validation_names_every_field() -> None:
    doc = {
        "tenant": "acme/evil",
        "job_id": "j",
        "version": 0,
        "schedule": {"kind": "once", "run_at": "2026-12-01T09:00:00"},
        "target": {"kind": "http", "url": "ftp://x"},
    }
    with pytest.raises(InvalidRecordError) as err:
        CODEC.decode_as(json.dumps(doc).encode(), ScheduleDefinition)
    fields = {e.split(":")[0] for e in err.value.errors}
    assert fields == {
        "tenant",
        "version",
        "schedule.once.run_at",
        "target.http.url",
    }
    assert err.value.code == "invalid_record"


def test_record_of_the_wrong_type_for_the_topic() -> None:
    data = CODEC.encode(EXAMPLES["LeaseEvent"])
    with pytest.raises(UnexpectedRecordTypeError, match="LeaseEvent does not belong here"):
        CODEC.decode(data, (ScheduleDefinition,))


def test_avro_record_that_fails_model_validation() -> None:
    # Avro can carry what the model forbids (here a naive identifier with a slash).
    import io  # noqa: PLC0415

    import fastavro  # noqa: PLC0415

    parsed, fp = CODEC.schemas.current["kadence.PauseJob"]
    buf = io.BytesIO()
    buf.write(MAGIC + fp)
    fastavro.schemaless_writer(
        buf,
        parsed,
        {"tenant": "a/b", "job_id": "j", "request_id": "r", "issued_at": 0, "reason": ""},
    )
    with pytest.raises(InvalidRecordError, match="tenant"):
        CODEC.decode(buf.getvalue())


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_escape_as_anything_but_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        CODEC.decode(data)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(sorted(EXAMPLES)), cut=st.integers(min_value=0, max_value=400))
def test_any_truncation_of_a_valid_record_is_a_decode_error(name: str, cut: int) -> None:
    data = CODEC.encode(EXAMPLES[name])
    if cut >= len(data):
        return
    with pytest.raises(DecodeError):
        CODEC.decode(data[:cut])


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(sorted(EXAMPLES)), pos=st.integers(min_value=10), flip=st.integers(1, 255)
)
def test_corrupted_avro_body_decodes_or_fails_cleanly(name: str, pos: int, flip: int) -> None:
    data = bytearray(CODEC.encode(EXAMPLES[name]))
    data[pos % len(data) if pos % len(data) >= 10 else 10] ^= flip
    try:
        record: WireModel = CODEC.decode(bytes(data))
    except DecodeError:
        return
    assert isinstance(record, WireModel)


def test_topics_decode_only_their_own_records() -> None:
    from kadence.topics import COMMANDS, EXECUTIONS, SCHEDULES  # noqa: PLC0415

    definition = schedule_definition()
    assert SCHEDULES.decode(CODEC, CODEC.encode(definition)) == definition
    assert SCHEDULES.decode(CODEC, definition.model_dump_json().encode()) == definition
    with pytest.raises(UnexpectedRecordTypeError):
        COMMANDS.decode(CODEC, CODEC.encode(definition))
    execution = EXAMPLES["ExecutionRequested"]
    assert EXECUTIONS.decode(CODEC, CODEC.encode(execution)) == execution
    with pytest.raises(GarbageBytesError, match="JSON is accepted only on the input topics"):
        EXECUTIONS.decode(CODEC, execution.model_dump_json().encode())


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_records_type_is_told_by_its_fingerprint_alone(name: str) -> None:
    """`Codec.names`, which the worker asks of each record a take-over reads again and skips:
    true for its own type only, false for garbage, JSON and a cut-off header."""
    record = EXAMPLES[name]
    data = CODEC.encode(record)
    assert CODEC.names(data, type(record))
    others = {type(r) for r in EXAMPLES.values()} - {type(record)}
    assert not any(CODEC.names(data, other) for other in others)
    for bad in (data[:9], b"", None, b'{"type": "x"}', MAGIC + b"\x00" * 8):
        assert not CODEC.names(bad, type(record))
