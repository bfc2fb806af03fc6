"""One oversized record on any input topic stops nothing (issue 14, item 2).

The attacker writes, with kcat or any producer, a 600 KB value with two 150 KB headers of 0xff
bytes (just under the broker's limit) onto every topic Kadence reads. Every process must write
a bounded `rejected` record for it, stay up, and keep another tenant's jobs on time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kadence.client import KadenceClient
from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.headers import headers_for
from kadence.models import (
    Backfill,
    ExecutionOutcome,
    HttpTarget,
    Rejected,
    ScheduleDefinition,
    entries_of,
)
from kadence.rejects import EVIDENCE_BYTES, KEY_BYTES, rejected, rejected_key
from kadence.settings import KadenceSettings
from kadence.sizing import RECORD_LIMIT, record_bytes
from kadence.topics import Topics
from testkit.stack import Stack, execution_settings, records, until
from testkit.target_server import TargetServer
from testkit.topic_reader import read_topic

CODEC = Codec()
HUGE_VALUE = b"\xff" * 600_000
HUGE_HEADERS: list[tuple[str, str | bytes | None]] = [
    ("evil-1", b"\xff" * 150_000),
    ("evil-2", b"\xff" * 150_000),
]


def test_a_rejected_record_keeps_bounded_evidence_and_says_it_was_cut() -> None:
    r = rejected(
        topic="kadence.commands",
        partition=0,
        offset=7,
        value=HUGE_VALUE,
        headers=HUGE_HEADERS,
        code="garbage_bytes",
        reason="neither Avro nor JSON",
        processor="scheduler",
        now_ms=0,
    )
    value = CODEC.encode(r)
    size = record_bytes(rejected_key(b"k" * 900_000), value, headers_for(r, b"\x00" * 8))
    assert size < EVIDENCE_BYTES + KEY_BYTES + 16_384  # the evidence budget plus the record's own
    assert r.truncated
    assert "value 600000 bytes, 2 headers" in r.reason
    # 0xff kept as the four characters \xff: never three-byte U+FFFD replacement characters
    assert set(r.original_headers.get("evil-1", "\\xff")[:8]) <= set("\\xf")
    assert "\ufffd" not in "".join(r.original_headers.values())


def test_small_bad_input_is_kept_whole() -> None:
    r = rejected(
        topic="t",
        partition=0,
        offset=0,
        value=b"\x00\x01junk",
        headers=[("h", b"\xc3\x28")],
        code="garbage_bytes",
        reason="bad",
        processor="p",
        now_ms=0,
    )
    assert (r.original_value, r.original_headers, r.truncated) == (
        b"\x00\x01junk",
        {"h": "\\xc3("},
        False,
    )


@pytest.mark.kafka
@pytest.mark.slow
def test_oversized_records_a_backfill_flood_and_a_binary_payload_stop_no_process(
    settings: KadenceSettings, tmp_path: Path
) -> None:
    xsettings = execution_settings(settings)
    topics = Topics(xsettings)
    server = TargetServer().start()
    # another tenant's receiver is its own: the flood's thousand hanging requests fill the first
    # one's accept queue and threads (a late arrival there is that receiver's, not Kadence's)
    own = TargetServer().start()
    stack = Stack.start(xsettings, tmp_path)
    try:
        attacked = [
            topics.schedules,
            topics.commands,
            topics.outcomes,
            topics.leases,
            topics.executions,
        ]
        producer = Producer(
            {"bootstrap.servers": xsettings.bootstrap_servers, "message.max.bytes": 1_048_000}
        )
        for topic in attacked:
            producer.produce(
                topic, key=b"mallory/evil", value=HUGE_VALUE, headers=HUGE_HEADERS, partition=0
            )
        assert producer.flush(30) == 0
        # two forced backfills of 10 000 runs of a per-second job with six-hour runs, and a job
        # whose payload is not text, through the SDK as any producer may
        now = datetime.now(UTC).replace(microsecond=0)
        flood = ScheduleDefinition(
            tenant="mallory",
            job_id="flood",
            version=1,
            schedule={"kind": "cron", "expression": "* * * * * *", "spread_s": 0},
            target=HttpTarget(url=f"{server.url}/hang"),
            timeout_ms=6 * 3600 * 1000,
            overlap="allow",
            paused=True,
        )
        binary = ScheduleDefinition(
            tenant="mallory",
            job_id="binary",
            version=1,
            schedule={"kind": "once", "run_at": now + timedelta(days=9)},
            target=HttpTarget(url=f"{server.url}/ok"),
            payload=b"\xff\xfe\x00\x80 not text",
        )
        with KadenceClient(xsettings) as client:
            client.put_many([flood, binary])
            for attempt in ("flood-1", "flood-2"):
                client.send(
                    Backfill(
                        tenant="mallory",
                        job_id="flood",
                        request_id=attempt,
                        issued_at=now,
                        start=now - timedelta(hours=3),
                        end=now,
                        force=True,
                        max_occurrences=10_000,
                    )
                )
        got = until(
            lambda: _rejected(xsettings, len(attacked)),
            60,
            "a rejected record for each attacked topic",
        )
        assert sorted(r.source_topic for r in got) == sorted(attacked)
        for r in got:
            assert r.truncated, r.source_topic
        # the floods are not refused: the scheduler paces them (200 runs a step, 500 a second
        # for the tenant, never past the job's 1 000 runs at once) while everyone else goes on
        # another tenant's fresh job still starts and reaches its receiver on time (within the
        # mission's second), and every process is still up
        due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
        job = ScheduleDefinition(
            tenant="acme",
            job_id="fresh",
            version=1,
            schedule={"kind": "once", "run_at": due},
            target=HttpTarget(url=f"{own.url}/ok", secret_ref="test"),
        )
        with KadenceClient(xsettings) as client:
            client.put(job)
        [hit] = own.wait(1, "/ok", timeout_s=60)
        run = until(lambda: _outcome(xsettings, job.key), 30, "the fresh job's outcome")
        assert due <= run.started_at <= due + timedelta(seconds=1), run.started_at
        assert due.timestamp() <= hit.at <= due.timestamp() + 1, hit.at - due.timestamp()
        for proc in [stack.scheduler, stack.reaper, *stack.workers]:
            assert proc.running, proc.output()[-2000:]
    finally:
        stack.stop()
        server.stop()
        own.stop()


def _outcome(settings: KadenceSettings, key: str) -> ExecutionOutcome | None:
    """The outcome of the job `key`, alone or in a worker's batch (the attack left an
    undecodable record on the topic)."""
    for m in read_topic(settings.bootstrap_servers, Topics(settings).outcomes, 10**6, 2):
        try:
            found = entries_of(CODEC.decode(m.value()))
        except DecodeError:
            continue
        for o in found:
            if isinstance(o, ExecutionOutcome) and o.key == key:
                return o
    return None


def _rejected(settings: KadenceSettings, expect: int) -> list[Rejected]:
    got: list[Rejected] = records(settings, Topics(settings).rejected, Rejected, expect, 2)
    sizes = [len(CODEC.encode(r)) for r in got]
    assert all(size < RECORD_LIMIT for size in sizes)
    return got if len(got) >= expect else []
