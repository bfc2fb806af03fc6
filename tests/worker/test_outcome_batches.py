"""A worker transaction's outcomes, one record per partition (streams/worker/outcome_batches.py):
the bytes are the codec's encoding of the batch, batches stay within their bounds, and what does
not fit a batch is written alone."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from kadence.codec import HEADER_LEN, Codec
from kadence.headers import SCHEMA, TYPE, headers_for
from kadence.models import (
    MAX_OUTCOMES_PER_RECORD,
    ExecutionOutcome,
    ExecutionOutcomes,
    OutcomeStatus,
    entries_of,
)
from kadence.sizing import RECORD_LIMIT, record_bytes
from streams.worker.outcome_batches import BATCH_BYTES, OutcomeBatches
from tests.test_codec_fast import outcomes

CODEC = Codec()
TOPIC = "ns.outcomes"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), outcomes), min_size=1, max_size=12))
def test_a_batch_is_the_codecs_encoding_of_its_outcomes_in_order(
    written: list[tuple[int, ExecutionOutcome]],
) -> None:
    batches = OutcomeBatches(CODEC, TOPIC)
    for partition, outcome in written:
        assert batches.add(partition, CODEC.encode(outcome))
    records = batches.records()
    assert sorted(p for _t, p, _k, _v, _h in records) == sorted({p for p, _ in written})
    for topic, partition, key, value, headers in records:
        mine = [o for p, o in written if p == partition]
        assert (topic, key) == (TOPIC, None)
        assert value == CODEC.encode(ExecutionOutcomes(outcomes=mine))
        assert headers == headers_for(
            ExecutionOutcomes(outcomes=mine), CODEC.schema_fingerprint(ExecutionOutcomes)
        )
        assert entries_of(CODEC.decode(value)) == mine
    assert batches.records() == []  # the next transaction starts empty


def test_batches_close_at_their_byte_and_count_bounds_and_each_fits_the_broker() -> None:
    one = CODEC.encode(next_outcome(0))
    per_batch = 3
    batches = OutcomeBatches(CODEC, TOPIC, max_bytes=per_batch * (len(one) - HEADER_LEN))
    for i in range(10):
        assert batches.add(0, CODEC.encode(next_outcome(i)))
    records = batches.records()
    counts = [len(entries_of(CODEC.decode(v))) for _t, _p, _k, v, _h in records]
    assert counts == [3, 3, 3, 1]
    ids = [o.execution_id for *_, v, _h in records for o in batch(v)]
    assert ids == [next_outcome(i).execution_id for i in range(10)]  # nothing lost or reordered

    batches = OutcomeBatches(CODEC, TOPIC)  # the default bounds
    for _ in range(MAX_OUTCOMES_PER_RECORD + 1):
        assert batches.add(1, one)
    records = batches.records()
    assert [len(entries_of(CODEC.decode(v))) for *_, v, _h in records] == [
        MAX_OUTCOMES_PER_RECORD,
        1,
    ]
    assert all(record_bytes(k, v, h) <= RECORD_LIMIT for _t, _p, k, v, h in records)


def test_an_outcome_too_big_for_a_batch_or_of_another_schema_is_written_alone() -> None:
    batches = OutcomeBatches(CODEC, TOPIC, max_bytes=50)
    big = CODEC.encode(next_outcome(1))
    assert len(big) - HEADER_LEN > 50
    assert not batches.add(0, big)
    batches = OutcomeBatches(CODEC, TOPIC)
    older = big[:2] + bytes(8) + big[HEADER_LEN:]  # another fingerprint: not this schema's body
    assert not batches.add(0, older)
    assert batches.records() == []
    assert BATCH_BYTES < RECORD_LIMIT


def test_clear_forgets_an_abandoned_transactions_outcomes() -> None:
    batches = OutcomeBatches(CODEC, TOPIC, max_bytes=1)  # every outcome closes the last batch
    batches.max_bytes = BATCH_BYTES
    for i in range(3):
        batches.add(i % 2, CODEC.encode(next_outcome(i)))
    batches.clear()
    batches.add(0, CODEC.encode(next_outcome(9)))
    (only,) = batches.records()
    assert [o.execution_id for o in batch(only[3])] == [next_outcome(9).execution_id]
    assert (TYPE, b"ExecutionOutcomes") in only[4] and any(n == SCHEMA for n, _ in only[4])


def batch(value: bytes) -> list[ExecutionOutcome]:
    return CODEC.decode_as(value, ExecutionOutcomes).outcomes


def next_outcome(i: int) -> ExecutionOutcome:
    at = datetime(2026, 12, 5, 12, 0, i % 60, tzinfo=UTC)
    return ExecutionOutcome(
        execution_id=f"acme/job-{i}@2026-12-05T12:00:00.000Z",
        tenant="acme",
        job_id=f"job-{i}",
        attempt=1,
        delivery=1,
        worker_id="w1",
        status=OutcomeStatus.succeeded,
        nominal_at=at,
        due_at=at,
        started_at=at,
        finished_at=at,
    )
