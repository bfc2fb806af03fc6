"""A delivered run's `succeeded` outcome written from pieces built once, not from a model.

A Kafka-topic run delivered in the worker's transaction (streams/worker/delivering.py) ends
with an ExecutionOutcome whose fields are all known when it is read but its start (its end is
the same instant). Building a model per run and encoding it generically cost more than the
bytes: here the outcome's Avro schema is cut around `started_at` and `finished_at` and each
side compiled once (kadence/avro_fast.py, the codec's own compiler), so a record is its head
(the run's ids, the worker, `succeeded`, its due times), the two instants as longs, and a tail
the same for every run (no result, `throttled_ms` 0). The headers
are the ones `headers_for` gives the model, built directly. The bytes are the codec's
(tests/worker/test_outcome_bytes.py compares them with `Codec.encode` of the model); anything
the compiled pieces do not take (a value out of range) goes the generic way.
"""

from __future__ import annotations

from typing import Any

from kadence import avro_fast
from kadence.codec import MAGIC, Codec
from kadence.headers import (
    ATTEMPT,
    DELIVERY,
    DUE_AT,
    EXECUTION_ID,
    JOB,
    SCHEMA,
    TENANT,
    TYPE,
    Headers,
    headers_for,
    iso_utc,
)
from kadence.models import ExecutionOutcome, ExecutionRequested, OutcomeStatus
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.worker.active import ActiveRun
from streams.worker.records import delivered_outcome

Record = tuple[str, int, bytes, bytes, Headers]
"""(topic, partition, key, value, headers): the session's `produce` arguments."""


class _Head:
    """The attributes the compiled head writer reads, for a delivered run."""

    __slots__ = (
        "attempt", "delivery", "due_at", "error", "execution_id", "job_id", "nominal_at",
        "retryable", "status", "tenant", "worker_id",
    )  # fmt: skip

    def __init__(self, ex: ExecutionRequested, worker_id: str) -> None:
        self.execution_id, self.tenant, self.job_id = ex.execution_id, ex.tenant, ex.job_id
        self.attempt, self.delivery = ex.attempt, ex.delivery
        self.nominal_at, self.due_at = ex.nominal_at, ex.due_at
        self.worker_id = worker_id
        self.status, self.retryable, self.error = OutcomeStatus.succeeded, False, None


class _Tail:
    """What follows the two instants: no result; `throttled_ms` 0, as `delivered_outcome`
    writes it."""

    __slots__ = ("result", "throttled_ms")

    def __init__(self) -> None:
        self.result, self.throttled_ms = None, 0


def pieces(schema: dict[str, Any], header: bytes) -> tuple[avro_fast.Writer, bytes] | None:
    """The writer of the fields before `started_at` (after `header`) and the bytes of the
    fields after `finished_at`; None (the generic path) unless the two instants follow each
    other as longs, or a piece does not compile."""
    fields = schema["fields"]
    names = [f["name"] for f in fields]
    if "started_at" not in names:
        return None
    at = names.index("started_at")
    kinds = [f["type"] for f in fields[at : at + 2]]
    instant = {"type": "long", "logicalType": "timestamp-millis"}
    if names[at + 1 : at + 2] != ["finished_at"] or kinds != [instant, instant]:
        return None
    try:
        head = avro_fast.compile_writer({**schema, "fields": fields[:at]}, header)
        tail = avro_fast.compile_writer({**schema, "fields": fields[at + 2 :]}, b"")(_Tail())
    except avro_fast.UnsupportedSchemaError:
        return None
    return head, tail


def _none(_head: _Head) -> bytes:
    raise avro_fast.UnsupportedSchemaError("no template: the generic path")


_NONE = (_none, b"")


class DeliveredOutcomes:
    """The outcome records of delivered runs for one worker (`worker_id`) and one codec."""

    def __init__(self, codec: Codec, worker_id: str, settings: KadenceSettings) -> None:
        self.codec, self.worker_id = codec, worker_id
        self.topic, self.partitions = Topics(settings).outcomes, settings.partitions
        parsed, fp = codec.schemas.current[ExecutionOutcome.avro_fullname()]
        self._pieces = pieces(parsed, MAGIC + fp)
        self._type_schema = [
            (TYPE, ExecutionOutcome.avro_name.encode()),
            (SCHEMA, fp.hex().encode()),
        ]

    def record(self, run: ActiveRun) -> Record:
        """The `succeeded` outcome of delivered `run`, started (and ended) at `started_ms`."""
        ex = run.execution
        partition = partition_for(ex.routing_key, self.partitions)
        try:
            head, tail = self._pieces or _NONE
            at = avro_fast.write_long(run.started_ms)
            value = b"".join((head(_Head(ex, self.worker_id)), at, at, tail))
        except Exception:  # the generic path encodes it or says what does not fit
            outcome = delivered_outcome(run, self.worker_id)
            value, headers = self.codec.encode(outcome), self.headers(outcome)
            return self.topic, partition, ex.key.encode(), value, headers
        return self.topic, partition, ex.key.encode(), value, self._headers(ex)

    def _headers(self, ex: ExecutionRequested) -> Headers:
        """`headers_for` the outcome: its type and schema, then the execution's ids."""
        return [
            *self._type_schema,
            (TENANT, ex.tenant.encode()),
            (JOB, ex.job_id.encode()),
            (EXECUTION_ID, ex.execution_id.encode()),
            (ATTEMPT, str(ex.attempt).encode()),
            (DELIVERY, str(ex.delivery).encode()),
            (DUE_AT, iso_utc(ex.due_at).encode()),
        ]

    def headers(self, outcome: ExecutionOutcome) -> Headers:
        return headers_for(outcome, self.codec.schema_fingerprint(ExecutionOutcome))
