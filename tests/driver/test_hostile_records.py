"""Issue 41, item 1, on the real loops: hostile records on every input topic of the scheduler,
the reaper, the workers and the query view (a definition with version 2^63, a CRLF content
type, records that are not UTF-8, nested 100 000 deep, truncated Avro, forged ids and counts)
stop none of them. Each is on `rejected` with its reason (the view, which writes nothing,
skips and counts them), and good jobs of two tenants written after them run."""

from __future__ import annotations

import json
from pathlib import Path

from kadence.codec import Codec
from kadence.examples import examples
from kadence.models import Rejected
from kadence.partitioning import partition_for
from testkit.driver import Driver
from testkit.driver.stack import DriverStack
from tests.driver.stack_helpers import once, settings_for

CODEC = Codec()
EXAMPLES = examples()


def _definition(**changes: object) -> bytes:
    doc = once("hostile").model_dump(mode="json")
    return json.dumps({**doc, **changes}).encode()


BACKFILL = {
    "type": "Backfill",
    "tenant": "acme",
    "job_id": "hostile",
    "request_id": "r",
    "issued_at": "2026-12-01T08:00:00Z",
    "start": "0001-01-01T00:00:00+01:00",
    "end": "2026-12-01T08:00:00Z",
    "max_occurrences": 2**64,
}


def _forged_execution() -> bytes:
    """An execution whose attempt and delivery fit an Avro long and no model (written by a
    producer that skipped validation)."""
    bad = EXAMPLES["ExecutionRequested"].model_copy(update={"attempt": 2**62, "delivery": 2**62})
    return CODEC.encode(bad)


def test_hostile_records_on_every_input_stop_no_loop(driver: Driver, tmp_path: Path) -> None:
    stack = DriverStack(driver, settings_for(tmp_path / "state"))
    scheduler, reaper = stack.scheduler(), stack.reaper()
    worker, view = stack.worker(), stack.views()
    stack.settle()
    topics, parts = stack.topics, stack.settings.partitions
    key = b"acme/hostile"
    p = partition_for("acme/hostile", parts)
    good_avro = CODEC.encode(once("hostile"))
    hostile = {
        topics.schedules: [
            _definition(version=2**63),
            _definition(version=-(2**63) - 1),
            _definition(content_type="text/plain\r\nX-Injected: 1"),
            _definition(description="x" * 900_000),
            b'{"tenant": "acme", "job_id": "hostile", "description": "\xff\xfe"}',
            b'{"payload": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            good_avro[: len(good_avro) // 2],
        ],
        topics.commands: [json.dumps(BACKFILL).encode()],
        topics.outcomes: [CODEC.encode(EXAMPLES["ExecutionOutcome"])[:-3]],
        topics.leases: [b"\xc3\x01" + b"\xff" * 40, b'{"type": "LeaseSnapshot"}'],
        topics.executions: [_forged_execution(), b"\x00garbage"],
        topics.history: [b"\xc3\x01\x00\x00\x00\x00\x00\x00\x00\x00\x02"],
        topics.dead_letter: [b"not a dead letter"],
    }
    sent = 0
    for topic, values in hostile.items():
        for value in values:
            driver.produce(topic, value, key=key, partition=p % len(driver.cluster.logs[topic]))
            sent += 1
    stack.settle()
    mine, theirs = (
        once("after", in_s=30),
        once("theirs", in_s=30).model_copy(update={"tenant": "globex"}),
    )
    stack.put(mine, theirs)
    stack.run_for(40_000)
    assert {h.key for h in stack.target.hits} >= {"acme/after", "globex/theirs"}
    refused = [CODEC.decode_as(m.value(), Rejected) for m in driver.messages(topics.rejected)]
    by_source = {(r.source_topic, r.code) for r in refused}
    assert all(r.code and r.reason for r in refused)
    for topic in (topics.schedules, topics.commands, topics.outcomes, topics.leases):
        assert any(source == topic for source, _code in by_source), (topic, by_source)
    assert (topics.executions, "invalid_record") in by_source
    assert (topics.executions, "garbage_bytes") in by_source
    version = [r for r in refused if r.source_topic == topics.schedules and "version" in r.reason]
    assert version and version[0].code == "invalid_record"
    assert view.skipped >= 2 and view.failed == 0  # history and dead-letter garbage, counted
    assert all(any(loop is x for x in driver.loops) for loop in (scheduler, reaper, worker, view))
    assert stack.outcomes("after") and stack.outcomes("theirs")
    stack.close()
