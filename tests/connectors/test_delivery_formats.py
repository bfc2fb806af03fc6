"""What a Kafka-target topic receives in each delivery format (issue 18, item 6): Kadence's
Avro envelope, the envelope as JSON, or the payload alone, each with the Kadence headers."""

from __future__ import annotations

import base64
import json

import pytest

from connectors.kafka_topic import AT_LEAST_ONCE, EXACTLY_ONCE, delivered
from kadence.codec import Codec
from kadence.examples import examples
from kadence.headers import header_value
from kadence.models import MAX_PAYLOAD_BYTES, DeliveryFormat, ExecutionRequested, KafkaTarget
from kadence.sizing import RECORD_LIMIT, record_bytes

CODEC = Codec()
FP = CODEC.schema_fingerprint(ExecutionRequested)


def execution(fmt: DeliveryFormat, payload: bytes = b'{"order":42}') -> ExecutionRequested:
    ex = examples()["ExecutionRequested"]
    assert isinstance(ex, ExecutionRequested)
    return ex.model_copy(
        update={"target": KafkaTarget(topic="orders", format=fmt), "payload": payload}
    )


def test_avro_is_the_envelope_as_kadence_writes_it() -> None:
    ex = execution(DeliveryFormat.avro)
    record = CODEC.encode(ex)
    value, headers = delivered(ex, record, FP, EXACTLY_ONCE)
    assert value == record
    assert CODEC.decode(value) == ex
    assert header_value(headers, "kadence-schema") == FP.hex()


def test_json_is_the_envelope_a_consumer_in_any_language_reads() -> None:
    ex = execution(DeliveryFormat.json)
    value, headers = delivered(ex, CODEC.encode(ex), FP, EXACTLY_ONCE)
    doc = json.loads(value)
    assert (doc["execution_id"], doc["tenant"], doc["payload"]) == (
        ex.execution_id,
        ex.tenant,
        '{"order":42}',
    )
    assert doc["target"] == {"kind": "kafka", "topic": "orders", "format": "json", "pool": None}
    assert header_value(headers, "content-type") == "application/json"
    assert header_value(headers, "kadence-execution-id") == ex.execution_id
    assert header_value(headers, "kadence-schema") is None  # not Avro: no schema to name
    binary = execution(DeliveryFormat.json, b"\xff\x00raw")
    doc = json.loads(delivered(binary, CODEC.encode(binary), FP, AT_LEAST_ONCE)[0])
    assert (doc["payload_encoding"], base64.b64decode(doc["payload"])) == ("base64", b"\xff\x00raw")


def test_payload_is_the_message_alone_with_the_kadence_headers() -> None:
    ex = execution(DeliveryFormat.payload, b"\x00binary message")
    value, headers = delivered(ex, CODEC.encode(ex), FP, EXACTLY_ONCE)
    assert value == b"\x00binary message"
    assert header_value(headers, "content-type") == ex.content_type
    for name, want in (
        ("kadence-execution-id", ex.execution_id),
        ("kadence-tenant", ex.tenant),
        ("kadence-job", ex.job_id),
        ("kadence-attempt", str(ex.attempt)),
    ):
        assert header_value(headers, name) == want, name
    assert header_value(headers, "kadence-type") is None


def test_definitions_say_which_format_and_avro_is_the_default() -> None:
    assert KafkaTarget(topic="t").format is DeliveryFormat.avro
    assert KafkaTarget.model_validate({"topic": "t", "format": "payload"}).format.value == "payload"


@pytest.mark.parametrize("fmt", list(DeliveryFormat))
@pytest.mark.parametrize("guarantee", [EXACTLY_ONCE, AT_LEAST_ONCE])
def test_every_format_says_once_which_guarantee_it_went_out_under(
    fmt: DeliveryFormat, guarantee: tuple[str, bytes]
) -> None:
    ex = execution(fmt)
    _, headers = delivered(ex, CODEC.encode(ex), FP, guarantee)
    assert [v for k, v in headers if k == "kadence-guarantee"] == [guarantee[1]]


def test_the_largest_execution_still_fits_the_record_limit_with_the_guarantee() -> None:
    """Longest ids and the largest payload, as Avro and as JSON (payload text that JSON
    writes as it is): key, value and every header within what the producer sends."""
    for fmt in (DeliveryFormat.avro, DeliveryFormat.json):
        ex = execution(fmt, b"p" * MAX_PAYLOAD_BYTES).model_copy(
            update={"tenant": "t" * 128, "job_id": "j" * 128}
        )
        ex = ex.model_copy(update={"execution_id": f"{ex.key}@manual:" + "r" * 128})
        value, headers = delivered(ex, CODEC.encode(ex), FP, AT_LEAST_ONCE)
        assert record_bytes(ex.key.encode(), value, headers) <= RECORD_LIMIT, fmt
