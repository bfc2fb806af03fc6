"""What a Kafka-target topic receives in each delivery format (issue 18, item 6): Kadence's
Avro envelope, the envelope as JSON, or the payload alone, each with the Kadence headers."""

from __future__ import annotations

import base64
import json

from connectors.kafka_topic import delivered
from kadence.codec import Codec
from kadence.examples import examples
from kadence.headers import header_value
from kadence.models import DeliveryFormat, ExecutionRequested, KafkaTarget

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
    value, headers = delivered(ex, record, FP)
    assert value == record
    assert CODEC.decode(value) == ex
    assert header_value(headers, "kadence-schema") == FP.hex()


def test_json_is_the_envelope_a_consumer_in_any_language_reads() -> None:
    ex = execution(DeliveryFormat.json)
    value, headers = delivered(ex, CODEC.encode(ex), FP)
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
    doc = json.loads(delivered(binary, CODEC.encode(binary), FP)[0])
    assert (doc["payload_encoding"], base64.b64decode(doc["payload"])) == ("base64", b"\xff\x00raw")


def test_payload_is_the_message_alone_with_the_kadence_headers() -> None:
    ex = execution(DeliveryFormat.payload, b"\x00binary message")
    value, headers = delivered(ex, CODEC.encode(ex), FP)
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
