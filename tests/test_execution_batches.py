"""An ExecutionBatch, as every reader of an executions topic takes it apart (kadence/batches.py):
its entries are the executions, each as its own record would be; an entry of another tenant or
due instant, or not an Avro execution, is refused by name; `kadence tail executions` prints a
line per execution at `[partition]@offset.entry`."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from pydantic import ValidationError

from apps.cli_tail import _render
from kadence import batches
from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.examples import examples
from kadence.headers import COUNT, DUE_AT, TENANT, TYPE, headers_for, iso_utc
from kadence.models import (
    MAX_EXECUTIONS_PER_BATCH,
    ExecutionBatch,
    ExecutionRequested,
)
from kadence.topics import EXECUTIONS
from testkit.outcomes import revocation_of

CODEC = Codec()


def entries(batch: ExecutionBatch) -> list[ExecutionRequested]:
    """Every entry decoded, the first that is not one of the batch's executions raising."""
    return [batches.entry(CODEC, batch, i) for i in range(len(batch.executions))]


def _batch() -> ExecutionBatch:
    batch = examples()["ExecutionBatch"]
    assert isinstance(batch, ExecutionBatch)
    return batch


def test_a_batch_read_from_the_topic_gives_its_executions_in_order() -> None:
    batch = _batch()
    read = EXECUTIONS.decode(CODEC, CODEC.encode(batch))
    assert isinstance(read, ExecutionBatch)
    got = entries(read)
    assert [e.execution_id for e in got] == [
        CODEC.decode_as(raw, ExecutionRequested).execution_id for raw in batch.executions
    ]
    assert len({e.execution_id for e in got}) == 2
    assert all(e.tenant == batch.tenant and e.due_at == batch.due_at for e in got)
    assert batches.executions_in(CODEC, read) == got
    assert batches.executions_in(CODEC, got[0]) == [got[0]]


def test_an_entry_of_another_tenant_or_instant_or_not_avro_is_refused_by_name() -> None:
    batch = _batch()
    ex = CODEC.decode_as(batch.executions[0], ExecutionRequested)
    later = CODEC.encode(ex.model_copy(update={"due_at": ex.due_at + timedelta(seconds=1)}))
    other = CODEC.encode(ex.model_copy(update={"tenant": "globex"}))
    as_json = json.dumps({"type": "ExecutionRequested"}).encode()
    for bad, said in ((later, "due at"), (other, "'globex'"), (as_json, "not an Avro record")):
        mixed = batch.model_copy(update={"executions": [batch.executions[0], bad]})
        with pytest.raises(DecodeError, match=said) as err:
            entries(mixed)
        assert err.value.code == "invalid_batch_entry"
        assert "entry 1" in str(err.value)
        assert batches.executions_in(CODEC, mixed) == [ex]  # the readable one still counts


def test_a_revocation_carries_no_execution() -> None:
    ex = CODEC.decode_as(_batch().executions[0], ExecutionRequested)
    assert batches.executions_in(CODEC, revocation_of(ex)) == []


def test_the_model_bounds_a_batch() -> None:
    batch = _batch()
    one = batch.executions[:1]
    many = batch.executions[:1] * (MAX_EXECUTIONS_PER_BATCH + 1)
    for executions in (one, many, [b"", b"x"]):
        with pytest.raises(ValidationError):
            ExecutionBatch(tenant=batch.tenant, due_at=batch.due_at, executions=executions)
    for executions in (one, many):  # the fast reader refuses what the model refuses
        raw = CODEC.encode(batch.model_copy(update={"executions": executions}))
        with pytest.raises(DecodeError):
            EXECUTIONS.decode(CODEC, raw)


def test_its_headers_say_its_tenant_count_and_due_instant() -> None:
    batch = _batch()
    headers = dict(headers_for(batch, CODEC.schema_fingerprint(ExecutionBatch)))
    assert headers[TYPE] == b"ExecutionBatch"
    assert headers[TENANT] == batch.tenant.encode()
    assert headers[COUNT] == b"2"
    assert headers[DUE_AT] == iso_utc(batch.due_at).encode()


def test_tail_prints_a_line_per_execution_at_its_entry() -> None:
    batch = _batch()
    value = CODEC.encode(batch)
    key = batch.tenant.encode()
    docs = [json.loads(line) for line in _render(CODEC, key, value, 4, 9, True).splitlines()]
    runs = entries(batch)
    assert [(d["key"], d["partition"], d["offset"], d["entry"]) for d in docs] == [
        (batch.tenant, 4, 9, i) for i in range(len(runs))
    ]
    assert [d["execution_id"] for d in docs] == [e.execution_id for e in runs]
    assert {d["type"] for d in docs} == {"ExecutionRequested"}
    text = _render(CODEC, key, value, 4, 9, False).splitlines()
    assert [line.split(" ", 2)[:2] for line in text] == [["[4]@9.0", "acme"], ["[4]@9.1", "acme"]]
    bad = batch.model_copy(update={"executions": [batch.executions[0], b"\xc3\x01garbage"]})
    shown = _render(CODEC, key, CODEC.encode(bad), 4, 10, False).splitlines()
    assert shown[0].startswith("[4]@10.0 acme ExecutionRequested ")
    assert shown[1].startswith("[4]@10.1 acme undecodable ")
