"""A delivered run's outcome written from its template (streams/worker/outcome_bytes.py) is the
record the generic path writes: the same topic, partition, key, bytes and headers, for any
execution the models accept."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kadence import avro_fast
from kadence.clock import datetime_to_ms
from kadence.codec import Codec
from kadence.errors import EncodeError
from kadence.headers import headers_for
from kadence.models import ExecutionOutcome, ExecutionRequested
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.targets import Stop
from kadence.topics import Topics
from streams.worker import outcome_bytes
from streams.worker.active import ActiveRun
from streams.worker.inbox import Item
from streams.worker.outcome_bytes import DeliveredOutcomes, Record, pieces
from streams.worker.records import delivered_outcome
from tests.test_codec_fast import executions, instants, workers

CODEC = Codec()
SETTINGS = KadenceSettings(namespace="tpl", partitions=7)


def delivered(ex: ExecutionRequested, started: datetime, throttled_ms: int = 0) -> ActiveRun:
    item = Item(0, 0, ex, datetime_to_ms(ex.due_at), throttled_ms=throttled_ms)
    at = datetime_to_ms(started)
    return ActiveRun(item, Stop(), started_ms=at, lease_expires_ms=at, next_renew_ms=at)


def generic(run: ActiveRun, worker_id: str) -> Record:
    """What the worker wrote before the template: the model, encoded and headed generically."""
    ex = run.execution
    outcome = delivered_outcome(run, worker_id)
    return (
        Topics(SETTINGS).outcomes,
        partition_for(ex.routing_key, SETTINGS.partitions),
        ex.key.encode(),
        CODEC.encode(outcome),
        headers_for(outcome, CODEC.schema_fingerprint(ExecutionOutcome)),
    )


@settings(max_examples=300, deadline=None)
@given(ex=executions, worker_id=workers, started=instants, throttled_ms=st.integers(0, 10**6))
def test_the_template_writes_what_the_generic_path_writes(
    ex: ExecutionRequested, worker_id: str, started: datetime, throttled_ms: int
) -> None:
    run = delivered(ex, started, throttled_ms)
    written = DeliveredOutcomes(CODEC, worker_id, SETTINGS).record(run)
    assert written == generic(run, worker_id)
    assert CODEC.decode(written[3]) == delivered_outcome(run, worker_id)


@given(ex=executions, started=instants)
def test_what_the_pieces_do_not_take_goes_the_generic_way(
    ex: ExecutionRequested, started: datetime
) -> None:
    """An attempt beyond an Avro long (a model built without validation) cannot be written by
    the compiled head: the generic path answers, as it did for the model."""
    wide = ex.model_copy(update={"attempt": 1 << 64})
    run = delivered(wide, started)
    outcomes = DeliveredOutcomes(CODEC, "w", SETTINGS)
    with pytest.raises(OverflowError):
        avro_fast.write_long(wide.attempt)
    with pytest.raises(EncodeError):
        generic(run, "w")
    with pytest.raises(EncodeError):
        outcomes.record(run)


@pytest.mark.parametrize("change", ["drop finished_at", "an instant as a long", "a new field"])
def test_a_schema_not_cut_so_has_no_template(change: str) -> None:
    parsed, _ = CODEC.schemas.current[ExecutionOutcome.avro_fullname()]
    fields = list(parsed["fields"])
    at = [f["name"] for f in fields].index("started_at")
    if change == "drop finished_at":
        del fields[at + 1]
    elif change == "an instant as a long":
        fields[at] = {**fields[at], "type": "long"}
    else:
        fields.append({"name": "queue", "type": "string", "default": ""})
    assert pieces({**parsed, "fields": fields}, b"", "w") is None
    assert pieces(parsed, b"", "w") is not None


@given(ex=executions, started=instants)
def test_without_a_template_the_generic_path_writes_it(
    ex: ExecutionRequested, started: datetime
) -> None:
    run = delivered(ex, started)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(outcome_bytes, "pieces", lambda *_: None)
        outcomes = DeliveredOutcomes(CODEC, "w", SETTINGS)
    assert outcomes.record(run) == generic(run, "w")


@settings(max_examples=300, deadline=None)
@given(ex=executions, worker_id=workers, started=instants)
def test_an_outcome_made_ahead_is_the_one_its_due_turn_would_write(
    ex: ExecutionRequested, worker_id: str, started: datetime
) -> None:
    """`prepare` (while the execution waits) and a join at its start give the record the
    template writes at the due turn, and the generic path's."""
    outcomes = DeliveredOutcomes(CODEC, worker_id, SETTINGS)
    run = delivered(ex, started)
    at_due = outcomes.record(run), outcomes.value(run)
    run.item.outcome = outcomes.prepare(ex)
    assert run.item.outcome is not None
    assert outcomes.record(run) == at_due[0] == generic(run, worker_id)
    assert outcomes.value(run) == at_due[1]


@given(ex=executions, started=instants)
def test_a_run_made_ahead_writes_nothing_of_its_execution_at_its_due_turn(
    ex: ExecutionRequested, started: datetime
) -> None:
    """The due turn only joins: neither the execution's fields nor its partition are written
    or hashed again (a burst's 100 000 one-off jobs each miss the partition cache)."""
    outcomes = DeliveredOutcomes(CODEC, "w", SETTINGS)
    run = delivered(ex, started)
    want = outcomes.value(run)
    run.item.outcome = outcomes.prepare(ex)

    def written_again(*_: object) -> bytes:
        raise AssertionError("written at the due turn")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(outcomes, "_join", written_again)
        patch.setattr(outcome_bytes, "partition_for", written_again)
        outcomes._partitions.clear()
        assert outcomes.value(run) == want
        assert outcomes.record(run) == generic(run, "w")


@given(ex=executions)
def test_what_the_template_does_not_take_is_not_made_ahead(ex: ExecutionRequested) -> None:
    wide = ex.model_copy(update={"attempt": 1 << 64})
    assert DeliveredOutcomes(CODEC, "w", SETTINGS).prepare(wide) is None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(outcome_bytes, "pieces", lambda *_: None)
        assert DeliveredOutcomes(CODEC, "w", SETTINGS).prepare(ex) is None
