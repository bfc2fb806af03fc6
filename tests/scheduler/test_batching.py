"""The scheduler's executions in batches (streams/scheduler/batching.py): a batch's bytes and
headers are the codec's and `headers_for`'s of the model; only Kafka-topic executions are
grouped, by their due instant; and the processor forwards them so only when
`execution_batches` is on."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from kadence.codec import Codec
from kadence.examples import examples
from kadence.headers import headers_for
from kadence.models import (
    ExecutionBatch,
    ExecutionRequested,
    HttpTarget,
    KafkaTarget,
)
from kadence.sizing import RECORD_LIMIT
from streams.scheduler.batching import ExecutionBatches, group_of
from testkit.outcomes import revocation_of

CODEC = Codec()
BATCHES = ExecutionBatches(CODEC)


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
