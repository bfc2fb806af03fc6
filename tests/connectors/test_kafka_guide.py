"""docs/kafka.md, the tenant's guide, against the code (issue 43, item 7): its JSON envelope
sample has the fields a worker writes, its stale-version event is the one the ingress writes,
and its deduplication recipe runs as printed."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from connectors.kafka_topic import EXACTLY_ONCE, delivered
from kadence.codec import Codec
from kadence.examples import examples
from kadence.models import DeliveryFormat, ExecutionRequested, KafkaTarget, Rejected
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.ingress.events import Events
from streams.runtime.records import InputRecord

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "kafka.md"
CODEC = Codec()


def block(name: str) -> str:
    """The fenced code between `<!-- name -->` and `<!-- /name -->` in the guide."""
    found = re.search(
        rf"<!-- {name} -->\s*```\w*\n(.*?)```\s*<!-- /{name} -->", GUIDE.read_text(), re.S
    )
    assert found is not None, f"docs/kafka.md lost its {name} block"
    return found.group(1)


def doc_sample() -> dict[str, Any]:
    sample = json.loads(block("json-envelope"))
    assert isinstance(sample, dict)
    return sample


def same_fields(written: dict[str, Any], sample: dict[str, Any]) -> None:
    """The sample names every field the worker wrote, nested, and no other."""

    def keys(doc: Any, at: str = "") -> set[str]:
        if not isinstance(doc, dict):
            return set()
        return {f"{at}{k}" for k in doc} | {x for k, v in doc.items() for x in keys(v, f"{at}{k}.")}

    assert keys(written) == keys(sample)


def test_the_guide_shows_the_json_envelope_a_worker_writes() -> None:
    ex = examples()["ExecutionRequested"]
    assert isinstance(ex, ExecutionRequested)
    ex = ex.model_copy(
        update={
            "target": KafkaTarget(topic="orders", format=DeliveryFormat.json),
            "payload": b'{"order":42}',
        }
    )
    value, _ = delivered(
        ex, CODEC.encode(ex), CODEC.schema_fingerprint(ExecutionRequested), EXACTLY_ONCE
    )
    written = json.loads(value)
    sample = doc_sample()
    same_fields(written, sample)
    assert isinstance(sample["payload"], str)  # the payload is a JSON string inside the JSON
    assert json.loads(sample["payload"]) is not None


def test_the_guide_shows_a_stale_version_event_as_the_ingress_tells_it() -> None:
    topics = Topics(KadenceSettings(namespace="kadence"))
    sample = json.loads(block("rejected-event"))
    refused = Rejected(
        source_topic=topics.schedules,
        partition=sample["partition"],
        offset=sample["offset"],
        code="stale_version",
        reason=sample["reason"],
        processor="scheduler",
        rejected_at=datetime(2026, 12, 1, 9, 0, 0, 123000, tzinfo=UTC),
    )
    key = b"acme/hello"
    event = Events(topics, CODEC).of(
        InputRecord(topics.rejected, 0, 0, key, CODEC.encode(refused), [], 0)
    )
    assert event is not None
    assert event.tenant == "acme"
    assert json.loads(event.value) == sample


def test_the_deduplication_recipe_applies_each_execution_once() -> None:
    scope: dict[str, Any] = {}
    exec(block("dedup-recipe"), scope)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE handled (execution_id TEXT PRIMARY KEY)")
    db.execute("CREATE TABLE orders (body BLOB)")

    def apply(conn: sqlite3.Connection, value: bytes) -> None:
        conn.execute("INSERT INTO orders VALUES (?)", (value,))

    first = [("kadence-execution-id", b"acme/j@1"), ("kadence-guarantee", b"at-least-once")]
    again = [("kadence-execution-id", b"acme/j@1"), ("kadence-attempt", b"2")]
    other = [("kadence-execution-id", b"acme/j@2")]
    handle_once = scope["handle_once"]
    said = [handle_once(db, h, b"{}", apply) for h in (first, again, other, first)]
    assert said == [True, False, True, False]
    assert db.execute("SELECT count(*) FROM orders").fetchone() == (2,)

    def broken(conn: sqlite3.Connection, value: bytes) -> None:
        raise RuntimeError("the effect failed")

    with pytest.raises(RuntimeError):
        handle_once(db, [("kadence-execution-id", b"acme/j@3")], b"{}", broken)
    assert handle_once(db, [("kadence-execution-id", b"acme/j@3")], b"{}", apply)  # not lost
