"""The scheduler's executions in batches (streams/scheduler/batching.py): a batch's bytes and
headers are the codec's and `headers_for`'s of the model; only Kafka-topic executions are
grouped, by their due instant; and the processor forwards them so only when
`execution_batches` is on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.examples import examples
from kadence.headers import TYPE, headers_for
from kadence.models import (
    ExecutionBatch,
    ExecutionRequested,
    HttpTarget,
    KafkaTarget,
    ScheduleDefinition,
)
from kadence.settings import KadenceSettings
from kadence.sizing import RECORD_LIMIT
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.store import MemoryStore
from streams.runtime.task import Task
from streams.scheduler.batching import ExecutionBatches, group_of
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor
from testkit.outcomes import revocation_of

CODEC = Codec()
BATCHES = ExecutionBatches(CODEC)
NOW = int(datetime(2026, 12, 1, 9, 0, 30, tzinfo=UTC).timestamp() * 1000)


def _execution() -> ExecutionRequested:
    batch = examples()["ExecutionBatch"]
    assert isinstance(batch, ExecutionBatch)
    return CODEC.decode_as(batch.executions[0], ExecutionRequested)


@given(
    st.lists(st.binary(min_size=1, max_size=300), min_size=2, max_size=40),
    st.integers(min_value=0, max_value=10**9),
)
def test_a_batch_is_the_codecs_encoding_of_the_model(values: list[bytes], ms: int) -> None:
    ex = _execution()
    due = ex.due_at + timedelta(milliseconds=ms)
    value, headers = BATCHES.combine(ex.tenant.encode(), due, values)
    model = ExecutionBatch(tenant=ex.tenant, due_at=due, executions=values)
    assert value == CODEC.encode(model)
    assert headers == headers_for(model, CODEC.schema_fingerprint(ExecutionBatch))
    assert CODEC.decode(value) == model


def test_only_kafka_topic_executions_are_grouped_by_their_due_instant() -> None:
    ex = _execution().model_copy(update={"target": KafkaTarget(topic="t")})
    assert group_of(ex) == ex.due_at
    http = ex.model_copy(update={"target": HttpTarget(url="https://example.com/hook")})
    assert group_of(http) is None
    assert group_of(revocation_of(ex)) is None


def test_a_tasks_batches_stay_within_half_its_record_limit() -> None:
    assert BATCHES.coalescer(RECORD_LIMIT).max_bytes <= RECORD_LIMIT // 2
    assert BATCHES.coalescer(100_000).max_bytes == 50_000


def test_an_executions_headers_are_made_only_when_it_is_written_alone(monkeypatch: Any) -> None:
    """A tenant's runs of one instant go out as one batch, with the batch's headers: theirs
    are never made. A run alone at its instant is written as it was, with its own."""
    made: list[str] = []

    def counted(record: Any, fingerprint: bytes) -> Any:
        if isinstance(record, ExecutionRequested):  # (a one-off's `fired` history has its own)
            made.append(record.execution_id)
        return headers_for(record, fingerprint)

    monkeypatch.setattr("streams.scheduler.output.headers_for", counted)
    topics = Topics(KadenceSettings(partitions=1))
    cfg = SchedulerConfig(topics, 1, 1, "2025b", execution_batches=True)
    proc = SchedulerProcessor(cfg, CODEC)
    task = Task(0, MemoryStore(), NOW, 60_000)
    task.coalescer = proc.coalescer(task.record_limit)
    out: list[tuple[Any, ...]] = []
    task._emit = lambda *a: out.append(a)
    task.changelog = topics.scheduler_changelog
    jobs = [("acme", "a"), ("acme", "b"), ("globex", "c")]
    for offset, (tenant, job_id) in enumerate(jobs):
        d = ScheduleDefinition(
            tenant=tenant,
            job_id=job_id,
            version=1,
            schedule={"kind": "once", "run_at": ms_to_datetime(NOW + 1_000)},
            target=KafkaTarget(topic="o"),
        )
        record = InputRecord(topics.schedules, 0, offset, d.key.encode(), CODEC.encode(d), [], NOW)
        assert task.attempt(partial(proc.process, task, record, NOW), print)
    for tenant, job_id in jobs:
        key = f"{tenant}/{job_id}".encode()
        assert task.attempt(partial(proc.fire, task, key, NOW + 1_000), print)
    task.changelog_records()
    written = [(v, h) for t, _p, _k, v, h in out if t == topics.executions]
    assert len(written) == 2
    by_type = {dict(h)[TYPE]: (v, h) for v, h in written}
    batch = CODEC.decode(by_type[b"ExecutionBatch"][0])
    assert isinstance(batch, ExecutionBatch) and len(batch.executions) == 2
    value, headers = by_type[b"ExecutionRequested"]
    alone = CODEC.decode(value)
    assert isinstance(alone, ExecutionRequested) and alone.tenant == "globex"
    assert headers == headers_for(alone, CODEC.schema_fingerprint(ExecutionRequested))
    assert made == [alone.execution_id]
