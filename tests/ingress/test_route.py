"""The ingress router without a broker: a tenant's records go where the SDK would put them;
another tenant's, Kadence's control records and garbage go to `rejected` with the reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kadence.codec import Codec
from kadence.models import Rejected, ScheduleDefinition, TriggerNow
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.target_topics import ingress_topic
from kadence.topics import Topics
from streams.ingress.route import CONCURRENCY_KEY_HEADER, Out, Router
from streams.runtime.records import InputRecord

CODEC = Codec()
PARTS = 6
TOPICS = Topics(KadenceSettings(partitions=PARTS))
ROUTER = Router(TOPICS, PARTS, CODEC)
SCHEDULES_IN = ingress_topic("kadence", "acme", "schedules")
COMMANDS_IN = ingress_topic("kadence", "acme", "commands")
NOW = "2026-12-01T09:00:00Z"


def definition(tenant: str = "acme", **kw: Any) -> dict[str, Any]:
    return {
        "tenant": tenant, "job_id": "nightly", "version": 1,
        "schedule": {"kind": "cron", "expression": "0 3 * * *", "timezone": "Europe/Berlin"},
        "target": {"kind": "kafka", "topic": "runs"}, **kw,
    }  # fmt: skip


def route(
    topic: str,
    value: bytes | dict[str, Any] | None,
    key: bytes | None = b"acme/nightly",
    headers: list[tuple[str, str | bytes | None]] | None = None,
) -> list[Out]:
    raw = json.dumps(value).encode() if isinstance(value, dict) else value
    return ROUTER.route(InputRecord(topic, 2, 7, key, raw, headers or [], 0), 1_000)


def rejected(outs: list[Out]) -> Rejected:
    [out] = outs
    assert out.topic == TOPICS.rejected
    return CODEC.decode_as(out.value, Rejected)


def test_a_json_definition_goes_to_schedules_as_avro_on_its_routing_partition() -> None:
    [out] = route(SCHEDULES_IN, definition())
    assert (out.topic, out.key) == (TOPICS.schedules, b"acme/nightly")
    assert out.partition == partition_for("acme/nightly", PARTS)
    d = CODEC.decode_as(out.value, ScheduleDefinition)
    assert (d.tenant, d.job_id, d.schedule.timezone) == ("acme", "nightly", "Europe/Berlin")  # type: ignore[union-attr]
    [grouped] = route(SCHEDULES_IN, definition(concurrency_key="etl"))
    assert grouped.partition == partition_for("acme/~etl", PARTS)
    [unkeyed] = route(SCHEDULES_IN, definition(), key=None)  # kcat without -K: the job's key
    assert unkeyed.key == b"acme/nightly"


def test_a_definition_naming_another_tenant_is_rejected() -> None:
    why = rejected(route(SCHEDULES_IN, definition("globex"), key=b"globex/nightly"))
    assert why.code == "foreign_tenant"
    assert "'globex'" in why.reason and "'acme'" in why.reason
    why = rejected(route(SCHEDULES_IN, definition(), key=b"globex/nightly"))
    assert why.code == "key_mismatch"


def test_a_delete_is_a_tombstone_on_every_partition_of_the_tenant_s_own_job_only() -> None:
    outs = route(SCHEDULES_IN, None)
    assert [(o.topic, o.partition, o.key, o.value) for o in outs] == [
        (TOPICS.schedules, p, b"acme/nightly", None) for p in range(PARTS)
    ]
    assert rejected(route(SCHEDULES_IN, None, key=b"globex/nightly")).code == "foreign_tenant"
    assert rejected(route(SCHEDULES_IN, None, key=b"nightly")).code == "invalid_key"
    assert rejected(route(SCHEDULES_IN, None, key=None)).code == "invalid_key"


def test_commands_go_to_commands_on_the_job_s_partition() -> None:
    cmd = {"type": "TriggerNow", "tenant": "acme", "job_id": "nightly", "request_id": "r1",
           "issued_at": NOW}  # fmt: skip
    [out] = route(COMMANDS_IN, cmd)
    assert (out.topic, out.partition) == (TOPICS.commands, partition_for("acme/nightly", PARTS))
    assert isinstance(CODEC.decode(out.value), TriggerNow)
    [grouped] = route(COMMANDS_IN, cmd, headers=[(CONCURRENCY_KEY_HEADER, b"etl")])
    assert grouped.partition == partition_for("acme/~etl", PARTS)
    bad = route(COMMANDS_IN, cmd, headers=[(CONCURRENCY_KEY_HEADER, b"../x")])
    assert rejected(bad).code == "invalid_header"
    other = {**cmd, "tenant": "globex"}
    assert rejected(route(COMMANDS_IN, other, key=b"globex/nightly")).code == "foreign_tenant"


@pytest.mark.parametrize(
    "doc",
    [
        {"type": "JobMoved", "tenant": "acme", "job_id": "nightly", "request_id": "x",
         "issued_at": NOW, "version": 99, "partition": 1},
        {"type": "TenantCircuit", "tenant": "acme", "partition": 1, "at": NOW,
         "open_until": "8999-01-01T00:00:00Z"},
        {"type": "ReplayDeadLetter", "tenant": "acme", "job_id": "nightly", "request_id": "x",
         "issued_at": NOW, "execution_id": "acme/nightly@x",
         "letter": {"execution_id": "acme/nightly@x", "tenant": "acme", "job_id": "nightly",
                    "definition_version": 1, "nominal_at": NOW, "due_at": NOW,
                    "dispatched_at": NOW, "timeout_ms": 1000, "lease_ttl_ms": 30000,
                    "target": {"kind": "http", "url": "https://attacker.example/"}}},
    ],
    ids=["JobMoved", "TenantCircuit", "letter-replay"],
)  # fmt: skip
def test_control_records_from_a_tenant_are_rejected(doc: dict[str, Any]) -> None:
    key = b"acme" if doc["type"] == "TenantCircuit" else b"acme/nightly"
    why = rejected(route(COMMANDS_IN, doc, key=key))
    assert why.code == "control_record"


def test_a_replay_without_a_letter_is_the_tenant_s_to_send() -> None:
    doc = {"type": "ReplayDeadLetter", "tenant": "acme", "job_id": "nightly",
           "request_id": "x", "issued_at": NOW, "execution_id": "acme/nightly@x"}  # fmt: skip
    [out] = route(COMMANDS_IN, doc)
    assert out.topic == TOPICS.commands


@pytest.mark.parametrize(
    ("topic", "value", "code"),
    [
        (SCHEDULES_IN, b"\x00\x01garbage", "garbage_bytes"),
        (SCHEDULES_IN, b"{not json", "garbage_bytes"),
        (SCHEDULES_IN, b"", "empty_record"),
        (SCHEDULES_IN, b'{"tenant": "acme"}', "invalid_record"),
        (COMMANDS_IN, json.dumps(definition()).encode(), "invalid_record"),
        (TOPICS.schedules, json.dumps(definition()).encode(), "not_ingress"),
        ("kadence.from.a_b.schedules", json.dumps(definition()).encode(), "not_ingress"),
    ],
)
def test_what_does_not_decode_is_rejected_with_the_reason(
    topic: str, value: bytes, code: str
) -> None:
    why = rejected(route(topic, value))
    assert why.code == code, why.reason
    assert why.reason


def test_a_huge_record_is_rejected_and_the_rejection_still_fits() -> None:
    huge = json.dumps(definition(payload="x" * 2_000_000)).encode()
    [out] = route(SCHEDULES_IN, huge)
    assert out.topic == TOPICS.rejected
    assert len(out.value or b"") < 1_000_000
