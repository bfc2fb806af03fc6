"""What a tenant is told on its events topic (issue 28, item 8), without a broker: its dead
letters, its circuit opening and closing (once per change, from the partition that changed
it), and its refused records, never another tenant's."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from kadence import rejects
from kadence.codec import Codec
from kadence.models import DeadLetter, KafkaTarget, ScheduleDefinition, TenantCircuit
from kadence.settings import KadenceSettings
from kadence.target_topics import events_topic, ingress_topic, reserved
from kadence.topics import Topics
from streams.ingress.events import Events
from streams.runtime.records import InputRecord
from streams.scheduler.metrics import SchedulerMetrics
from tests.views.test_view import _dead_doc

CODEC = Codec()
TOPICS = Topics(KadenceSettings(partitions=4))
EVENTS = Events(TOPICS, CODEC)
AT = datetime(2026, 12, 1, 9, tzinfo=UTC)


def record(topic: str, value: bytes, key: bytes | None = None, partition: int = 0) -> InputRecord:
    return InputRecord(topic, partition, 5, key, value, [], 0)


def told(
    topic: str, value: bytes, key: bytes | None = None, partition: int = 0
) -> dict[str, object]:
    event = EVENTS.of(record(topic, value, key, partition))
    assert event is not None
    doc: dict[str, object] = json.loads(event.value)
    assert doc["tenant"] == event.tenant
    return doc


def rejected_on(source: str, key: bytes | None, code: str = "foreign_tenant") -> bytes:
    _k, value, _h = rejects.rejected_record(
        topic=source, partition=1, offset=9, key=key, value=b"{}", headers=[], code=code,
        reason="why", processor="x", now_ms=0, codec=CODEC, to_topic=TOPICS.rejected,
    )  # fmt: skip
    return value


def test_a_dead_letter_is_told_to_its_tenant() -> None:
    letter = DeadLetter.model_validate(_dead_doc())
    doc = told(TOPICS.dead_letter, CODEC.encode(letter), b"acme/tick")
    assert doc["type"] == "dead_letter"
    assert (doc["tenant"], doc["job_id"]) == ("acme", "tick")
    assert doc["error"] == {"type": "HttpStatus", "message": "503 from target", "code": None}
    assert doc["reason"] == "retries_exhausted"


def test_a_circuit_change_is_told_once_from_the_partition_that_made_it() -> None:
    opened = TenantCircuit(tenant="acme", partition=2, at=AT, open_until=AT, reason="9 of 10")
    value = CODEC.encode(opened)
    copies = [EVENTS.of(record(TOPICS.scheduler_control, value, b"acme", p)) for p in range(4)]
    assert [c is not None for c in copies] == [False, False, True, False]
    doc = told(TOPICS.scheduler_control, value, b"acme", 2)
    assert doc["type"] == "circuit_opened"
    closed = opened.model_copy(update={"open_until": None})
    assert told(TOPICS.scheduler_control, CODEC.encode(closed), b"acme", 2)["type"] == (
        "circuit_closed"
    )


def test_a_refusal_of_a_tenant_s_ingress_record_goes_to_that_tenant_whatever_it_named() -> None:
    mine = ingress_topic(TOPICS.settings.namespace, "acme", "schedules")
    doc = told(TOPICS.rejected, rejected_on(mine, b"globex/planted"), b"globex/planted")
    assert doc["tenant"] == "acme"  # the topic's tenant: acme cannot write into globex's events
    assert (doc["code"], doc["source_topic"], doc["key"]) == (
        "foreign_tenant",
        mine,
        "globex/planted",
    )


def test_a_refusal_on_kadence_s_input_topics_goes_to_the_tenant_its_key_names() -> None:
    doc = told(TOPICS.rejected, rejected_on(TOPICS.commands, b"acme/j", "unknown_job"), b"acme/j")
    assert (doc["tenant"], doc["code"]) == ("acme", "unknown_job")


@pytest.mark.parametrize(
    ("source", "key"),
    [
        (TOPICS.executions, b"acme"),  # Kadence's internal topics: the operators'
        (TOPICS.outcomes, b"acme/j"),
        (TOPICS.commands, b"not a job key"),
        (TOPICS.commands, None),
        (TOPICS.commands, b"\xff\xfe/j"),
    ],
)
def test_other_refusals_are_told_to_nobody(source: str, key: bytes | None) -> None:
    assert EVENTS.of(record(TOPICS.rejected, rejected_on(source, key), key)) is None


def test_what_does_not_decode_is_told_to_nobody() -> None:
    for topic in EVENTS.sources:
        assert EVENTS.of(record(topic, b"\x00garbage")) is None
        assert EVENTS.of(record(topic, b"")) is None
    assert EVENTS.of(record(TOPICS.history, b"{}")) is None


def test_no_job_may_name_the_events_topic_as_its_target() -> None:
    assert reserved("kadence-events") is not None and reserved("orders") is None
    with pytest.raises(ValueError, match="kadence-events"):
        ScheduleDefinition(
            tenant="acme", job_id="j", version=1, target=KafkaTarget(topic="kadence-events"),
            schedule={"kind": "cron", "expression": "* * * * *"},
        )  # fmt: skip
    assert events_topic("kadence", "acme") == "kadence.to.acme.kadence-events"


def test_dead_letters_and_circuit_changes_are_counted_per_tenant() -> None:
    metrics = SchedulerMetrics()
    metrics.observe(DeadLetter.model_validate(_dead_doc()))
    got = metrics.registry.get_sample_value(
        "kadence_scheduler_dead_letters_total", {"tenant": "acme"}
    )
    assert got == 1.0
