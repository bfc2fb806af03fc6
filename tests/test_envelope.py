"""A `"format": "json"` Kafka target's envelope holds the payload as a JSON string, up to six
times its size (issue 43, item 7): the model refuses a payload whose envelope the broker would
refuse, names both sizes, and accepts it for the other formats and targets. No broker."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from connectors.kafka_topic import AT_LEAST_ONCE, delivered, envelope_json
from kadence import envelope
from kadence.codec import Codec
from kadence.envelope import (
    CHEAP_LIMIT,
    ENVELOPE_ROOM,
    PAYLOAD_ROOM,
    payload_json_bytes,
    payload_refusal,
)
from kadence.examples import examples
from kadence.models import (
    MAX_PAYLOAD_BYTES,
    DeliveryFormat,
    ExecutionRequested,
    HttpTarget,
    KafkaTarget,
    ScheduleDefinition,
)
from kadence.sizing import RECORD_LIMIT, record_bytes

CODEC = Codec()
FP = CODEC.schema_fingerprint(ExecutionRequested)
CONTROL = b"\x01" * MAX_PAYLOAD_BYTES
"""The hostile payload: 512 KiB the model accepts, 3 MiB as a JSON string."""
HOSTILE = {
    "control characters": CONTROL,
    "quotes": b'"' * MAX_PAYLOAD_BYTES,
    "backslashes": b"\\" * MAX_PAYLOAD_BYTES,
    "two-byte characters": "é".encode() * (MAX_PAYLOAD_BYTES // 2),
    "four-byte characters": "😀".encode() * (MAX_PAYLOAD_BYTES // 4),
    "newlines": b"\n" * MAX_PAYLOAD_BYTES,
}
FITTING = {
    "plain text": b"p" * MAX_PAYLOAD_BYTES,
    "not UTF-8 (base64)": b"\xff" * MAX_PAYLOAD_BYTES,
    "empty": b"",
    "control characters, small": b"\x01" * CHEAP_LIMIT,
}


def largest(payload: bytes, fmt: DeliveryFormat = DeliveryFormat.json) -> ExecutionRequested:
    """An execution with every field besides the payload as long as the model lets it be, and
    escaped as much as JSON escapes."""
    ex = examples()["ExecutionRequested"]
    assert isinstance(ex, ExecutionRequested)
    return ex.model_copy(
        update={
            "tenant": "t" * 128,
            "job_id": "j" * 128,
            "execution_id": "\x01" * 400,
            "target": KafkaTarget(topic="o" * 249, format=fmt, pool="p" * 32),
            "payload": payload,
            "content_type": "application/" + "x" * 116,
            "concurrency_key": "c" * 128,
            "start_by": datetime(8999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC),
            "attempt": 1_000,
            "delivery": 1_000_000,
        }
    )


def size(ex: ExecutionRequested) -> int:
    value, headers = delivered(ex, CODEC.encode(ex), FP, AT_LEAST_ONCE)
    return record_bytes(ex.key.encode(), value, headers)


def test_the_room_kept_for_the_envelope_holds_its_largest_other_fields() -> None:
    empty_string = len('""')
    assert size(largest(b"")) - empty_string <= ENVELOPE_ROOM
    assert size(largest(b"")) - empty_string > ENVELOPE_ROOM // 2  # nor a loose guess


@pytest.mark.parametrize("payload", [*HOSTILE.values(), *FITTING.values(), b'a"b\\c\x7f\x00'])
def test_the_payload_s_size_is_exactly_what_the_encoder_writes(payload: bytes) -> None:
    ex = largest(payload)
    with_it, without = len(envelope_json(ex)), len(envelope_json(largest(b"")))
    assert with_it - without == payload_json_bytes(payload) - len('""')


@pytest.mark.parametrize("name", HOSTILE)
def test_a_payload_whose_envelope_the_broker_refuses_is_refused_with_both_sizes(
    name: str,
) -> None:
    payload = HOSTILE[name]
    assert size(largest(payload)) > RECORD_LIMIT  # what the worker would have produced
    reason = payload_refusal(payload)
    assert reason is not None
    assert f"is {payload_json_bytes(payload)} bytes" in reason
    assert str(PAYLOAD_ROOM) in reason and str(RECORD_LIMIT) in reason


@pytest.mark.parametrize("name", FITTING)
def test_every_payload_it_accepts_fits_the_record_limit_with_the_largest_fields(
    name: str,
) -> None:
    payload = FITTING[name]
    assert payload_refusal(payload) is None
    assert size(largest(payload)) <= RECORD_LIMIT


def test_the_limit_is_exact_at_the_byte() -> None:
    quotes = len('""')
    at_limit = b"\x01" * ((PAYLOAD_ROOM - quotes) // 6) + b"p" * ((PAYLOAD_ROOM - quotes) % 6)
    assert payload_json_bytes(at_limit) == PAYLOAD_ROOM
    assert payload_refusal(at_limit) is None
    assert size(largest(at_limit)) <= RECORD_LIMIT
    assert payload_refusal(at_limit + b"p") is not None


def test_a_payload_that_fits_at_six_times_its_size_is_not_encoded_to_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def never(payload: bytes) -> int:
        raise AssertionError("encoded to check a payload that cannot be too large")

    monkeypatch.setattr(envelope, "payload_json_bytes", never)
    assert payload_refusal(b"\x01" * CHEAP_LIMIT) is None
    with pytest.raises(AssertionError):
        payload_refusal(b"\x01" * (CHEAP_LIMIT + 1))
    assert 6 * CHEAP_LIMIT + len(',"payload_encoding":"base64"') + 2 <= PAYLOAD_ROOM


def definition(payload: bytes, target: Any) -> dict[str, Any]:
    return {
        "tenant": "acme",
        "job_id": "hostile",
        "version": 1,
        "schedule": {"kind": "cron", "expression": "0 0 * * *"},
        "target": target,
        "payload": payload,
    }


def test_the_model_refuses_the_payload_for_a_json_target_naming_sizes_and_the_way_out() -> None:
    with pytest.raises(ValidationError) as refused:
        ScheduleDefinition.model_validate(
            definition(CONTROL, {"kind": "kafka", "topic": "out", "format": "json"})
        )
    [error] = refused.value.errors()
    assert error["loc"] == ("payload",) and str(6 * MAX_PAYLOAD_BYTES + 2) in error["msg"]
    assert '"format": "avro"' in error["msg"]


@pytest.mark.parametrize(
    "target",
    [
        KafkaTarget(topic="out", format=DeliveryFormat.avro),
        KafkaTarget(topic="out", format=DeliveryFormat.payload),
        HttpTarget(url="https://example.com/hook"),
    ],
)
def test_the_same_payload_to_another_format_or_target_is_accepted(target: Any) -> None:
    d = ScheduleDefinition.model_validate(definition(CONTROL, target))
    assert d.payload == CONTROL
    if isinstance(target, KafkaTarget):  # and its record fits
        assert size(largest(CONTROL, target.format)) <= RECORD_LIMIT


def test_a_json_target_with_a_payload_that_fits_is_accepted() -> None:
    json_target = {"kind": "kafka", "topic": "out", "format": "json"}
    d = ScheduleDefinition.model_validate(definition(b"p" * MAX_PAYLOAD_BYTES, json_target))
    assert len(d.payload) == MAX_PAYLOAD_BYTES
