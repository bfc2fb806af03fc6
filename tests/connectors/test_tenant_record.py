"""The tenant's record from its template (connectors/tenant_record.py) is `delivered`'s: the same
key, value and headers in every format, and refused over the limit exactly where `record_bytes`
says it does not fit. No broker."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.tenant_record import AT_LEAST_ONCE, EXACTLY_ONCE, TenantRecords, delivered
from kadence.codec import Codec
from kadence.errors import RecordTooLargeError
from kadence.examples import examples
from kadence.models import MAX_PAYLOAD_BYTES, DeliveryFormat, ExecutionRequested, KafkaTarget
from kadence.sizing import RECORD_LIMIT, record_bytes
from tests.test_codec_fast import executions

CODEC = Codec()
FP = CODEC.schema_fingerprint(ExecutionRequested)
kafka_executions = st.builds(
    lambda ex, topic, fmt: ex.model_copy(update={"target": KafkaTarget(topic=topic, format=fmt)}),
    executions,
    st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True),
    st.sampled_from(DeliveryFormat),
)
guarantees = st.sampled_from([EXACTLY_ONCE, AT_LEAST_ONCE])


def json_execution(payload: bytes) -> ExecutionRequested:
    """The example execution to a JSON-format topic (a control byte is six in its envelope)."""
    ex = examples()["ExecutionRequested"]
    assert isinstance(ex, ExecutionRequested)
    target = KafkaTarget(topic="orders", format=DeliveryFormat.json)
    return ex.model_copy(update={"payload": payload, "target": target})


def generic(
    ex: ExecutionRequested, guarantee: tuple[str, bytes]
) -> tuple[bytes, bytes, list[object]]:
    value, headers = delivered(ex, CODEC.encode(ex), FP, guarantee)
    return ex.key.encode(), value, list(headers)


@settings(max_examples=400, deadline=None)
@given(runs=st.lists(st.tuples(kafka_executions, guarantees), min_size=1, max_size=6))
def test_the_template_writes_what_delivered_writes(
    runs: list[tuple[ExecutionRequested, tuple[str, bytes]]],
) -> None:
    records = TenantRecords(FP)  # one template for several runs: what it keeps must not leak
    for ex, guarantee in runs:
        key, value, headers = records.record("t", ex, CODEC.encode(ex), guarantee)
        assert (key, value, headers) == generic(ex, guarantee)


@settings(max_examples=200, deadline=None)
@given(ex=kafka_executions, guarantee=guarantees, over=st.integers(-3, 3))
def test_the_size_check_is_record_bytes_exactly(
    ex: ExecutionRequested, guarantee: tuple[str, bytes], over: int
) -> None:
    key, value, headers = generic(ex, guarantee)
    size = record_bytes(key, value, headers)  # type: ignore[arg-type]
    records = TenantRecords(FP, limit=size - over)
    if over > 0:
        with pytest.raises(RecordTooLargeError, match=f"would be {size} bytes"):
            records.record("t", ex, CODEC.encode(ex), guarantee)
    else:
        assert records.record("t", ex, CODEC.encode(ex), guarantee)[1] == value


def test_a_json_envelope_over_the_broker_limit_is_refused_naming_the_topic() -> None:
    ex = json_execution(b"\x01" * MAX_PAYLOAD_BYTES)
    with pytest.raises(RecordTooLargeError, match=r"orders-topic would be \d+ bytes, over the"):
        TenantRecords(FP).record("orders-topic", ex, CODEC.encode(ex), EXACTLY_ONCE)
    key, value, headers = generic(ex, EXACTLY_ONCE)
    assert record_bytes(key, value, headers) > RECORD_LIMIT  # type: ignore[arg-type]


def test_counts_and_due_instants_beyond_what_is_kept_are_written_as_they_come() -> None:
    records = TenantRecords(FP)
    for attempt, delivery, second in ((1, 1, 0), (150, 7, 1), (99, 100, 2), (1_000, 10**6, 3)):
        ex = json_execution(b"p").model_copy(
            update={
                "attempt": attempt,
                "delivery": delivery,
                "due_at": datetime(2026, 12, 5, 9, 0, second, tzinfo=UTC),
                "target": KafkaTarget(topic="orders"),
            }
        )
        assert records.record("t", ex, CODEC.encode(ex), AT_LEAST_ONCE) == generic(
            ex, AT_LEAST_ONCE
        )
