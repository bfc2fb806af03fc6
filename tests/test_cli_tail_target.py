"""`kadence tail --tenant T --target NAME` (issue 43, item 7), without a broker: which topic a
name means for a tenant (never another tenant's, never Kadence's own), and each record of a
target topic as one bounded JSON document whatever it holds."""

from __future__ import annotations

import base64
import json

import pytest

from apps import cli
from apps.tail_target import HEAD_SHOWN, MAX_HEADERS, MAX_SHOWN, target_record, tenant_topic
from connectors.kafka_topic import EXACTLY_ONCE, delivered
from kadence.codec import Codec
from kadence.errors import InvalidInputError
from kadence.examples import examples
from kadence.models import DeliveryFormat, ExecutionRequested, KafkaTarget

CODEC = Codec()


def test_a_target_name_or_the_full_name_means_the_tenants_own_topic() -> None:
    assert tenant_topic("ns", "acme", "orders") == "ns.to.acme.orders"
    assert tenant_topic("ns", "acme", "ns.to.acme.orders") == "ns.to.acme.orders"
    assert tenant_topic("ns", "acme", "kadence-events") == "ns.to.acme.kadence-events"
    assert tenant_topic("ns", "acme.eu", "orders") == "ns.to.acme--2eeu.orders"
    assert tenant_topic("ns", "acme", "ns.executions") == "ns.to.acme.ns.executions"  # not ours


@pytest.mark.parametrize(
    ("tenant", "name", "field"),
    [
        ("acme", "ns.to.bob.orders", "topic"),  # another tenant's
        ("acme", "ns.to.acme-eu.orders", "topic"),  # a tenant whose name extends acme's
        ("acme.eu", "ns.to.acme.eu.orders", "topic"),  # acme's topic `eu.orders`, not acme.eu's
        ("acme", "../etc", "target"),
        ("acme", "", "target"),
        ("acme", "x" * 250, "target"),
        ("acme", "t" * 200, "target"),  # fits Kafka's 249 only without the namespace
        ("acme", "orders\n", "target"),
        ("ac/me", "orders", "tenant"),
        ("", "orders", "tenant"),
        ("a" * 129, "orders", "tenant"),
    ],
)
def test_another_tenants_topic_or_a_bad_name_is_refused(tenant: str, name: str, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        tenant_topic("ns", tenant, name)
    assert caught.value.errors[0].startswith(f"{field}: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["tail", "--target", "orders"],  # whose?
        ["tail", "--tenant", "acme"],  # which?
        ["tail", "history", "--tenant", "acme", "--target", "orders"],
        ["tail", "--tenant", "acme", "--target", "kadence.to.bob.orders"],
        ["tail", "kadence.to.acme.orders"],  # a target only with its tenant
        ["tail", "--tenant", "acme", "--target", "orders", "-n", "-1"],
    ],
)
def test_the_cli_refuses_before_connecting(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KADENCE_BOOTSTRAP_SERVERS", "127.0.0.1:9")  # nothing listens there
    assert cli.main(argv) == 3
    assert "invalid input" in capsys.readouterr().err


def envelope(
    fmt: DeliveryFormat, payload: bytes = b'{"order":42}'
) -> tuple[bytes, list[tuple[str, str | bytes | None]], ExecutionRequested]:
    ex = examples()["ExecutionRequested"]
    assert isinstance(ex, ExecutionRequested)
    ex = ex.model_copy(
        update={"target": KafkaTarget(topic="orders", format=fmt), "payload": payload}
    )
    value, headers = delivered(
        ex, CODEC.encode(ex), CODEC.schema_fingerprint(ExecutionRequested), EXACTLY_ONCE
    )
    return value, headers, ex


def test_each_delivery_format_reads_as_json_with_its_headers() -> None:
    value, headers, ex = envelope(DeliveryFormat.avro)
    doc = target_record(CODEC, value, headers)
    assert (doc["type"], doc["execution_id"], doc["payload"]) == (
        "ExecutionRequested",
        ex.execution_id,
        '{"order":42}',
    )
    assert doc["headers"]["kadence-guarantee"] == "exactly-once"
    value, headers, ex = envelope(DeliveryFormat.json)
    doc = target_record(CODEC, value, headers)
    assert (doc["type"], doc["value"]["execution_id"], doc["value"]["payload"]) == (
        "json",
        ex.execution_id,
        '{"order":42}',
    )
    assert doc["headers"]["kadence-execution-id"] == ex.execution_id
    value, headers, _ = envelope(DeliveryFormat.payload, b"ship order 42")
    assert target_record(CODEC, value, headers)["value"] == "ship order 42"
    json.dumps(doc)  # printable


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, "tombstone"),
        (b"\xc3\x01" + b"\x00" * 8 + b"garbage", "undecodable"),  # Avro magic, unknown schema
        (b"\xc3\x01", "undecodable"),
        (b"[" * 60_000, "payload"),  # nested past the parser's depth: shown as text
        (b"\xff\xfe\x00garbage", "payload"),
        (b'{"a": 1', "payload"),
        (b"", "payload"),
    ],
)
def test_garbage_is_shown_as_what_it_is_never_raised(value: bytes | None, kind: str) -> None:
    doc = target_record(CODEC, value, [("x", b"\xff" * 10)])
    assert doc["type"] == kind
    assert len(json.dumps(doc)) < MAX_SHOWN + 4 * HEAD_SHOWN
    if value == b"\xff\xfe\x00garbage":
        assert (doc["encoding"], base64.b64decode(doc["value"])) == ("base64", value)


def test_a_huge_record_and_many_headers_print_bounded() -> None:
    headers: list[tuple[str, str | bytes | None]] = [
        (f"h{i}" * 1000, b"v" * 100_000) for i in range(1000)
    ]
    doc = target_record(CODEC, b"x" * (MAX_SHOWN + 1), headers)
    assert (doc["type"], doc["bytes"], doc["head"]) == (
        "too_large",
        MAX_SHOWN + 1,
        "x" * HEAD_SHOWN,
    )
    assert len(doc["headers"]) == MAX_HEADERS
    assert all(len(k) <= HEAD_SHOWN and len(v) <= HEAD_SHOWN for k, v in doc["headers"].items())
    assert len(json.dumps(doc)) < 20 * 1024


def test_an_avro_execution_with_a_binary_payload_shows_it_in_base64() -> None:
    """`model_dump(mode="json")` raises on bytes that are not UTF-8: tail used to stop there."""
    value, headers, ex = envelope(DeliveryFormat.avro, b"\xff\x00binary")
    doc = target_record(CODEC, value, headers)
    assert (doc["bytes_encoding"], base64.b64decode(doc["payload"])) == ("base64", ex.payload)
    json.dumps(doc)
