"""A delivered run's `succeeded` outcome written from pieces built once, not from a model.

A Kafka-topic run delivered in the worker's transaction (streams/worker/delivering.py) ends
with an ExecutionOutcome whose fields are all known when it is read but its start (its end is
the same instant). Building a model per run and encoding it generically cost more than the
bytes: here the outcome's Avro schema is cut, once per worker, into runs of fields taken from the
execution (each run compiled by kadence/avro_fast.py, the codec's own compiler, to a writer
that reads the execution itself), runs of fields the same for every delivered outcome of the
worker (their bytes) and the two instants (written as longs), so a record is those pieces
joined. The headers are the ones `headers_for` gives the model, built directly. The bytes are
the codec's (tests/worker/test_outcome_bytes.py compares them with `Codec.encode` of the
model); anything the compiled pieces do not take (a value out of range) goes the generic way.
"""

from __future__ import annotations

from collections.abc import Callable
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
from streams.worker.item import Prepared
from streams.worker.records import delivered_outcome

Record = tuple[str, int, bytes, bytes, Headers]
"""(topic, partition, key, value, headers): the session's `produce` arguments."""
Piece = bytes | avro_fast.Writer | None
"""Bytes every delivered outcome has there, the writer of fields taken from the execution, or
None: an instant (the run's start)."""
FROM_EXECUTION = frozenset(
    {"execution_id", "tenant", "job_id", "attempt", "delivery", "nominal_at", "due_at"}
)
"""The outcome's fields `delivered_outcome` copies from the execution."""
INSTANTS = ("started_at", "finished_at")
"""The fields the run's start fills (a delivered run ends as it starts)."""
PARTITIONS_CACHED = 100_000
"""Routing keys whose outcomes partition is remembered (a job fires again and again)."""


class _Worker:
    """The other fields of every delivered outcome of one worker: `succeeded`, not retryable,
    no error, no result, `throttled_ms` 0 (as `delivered_outcome` writes them)."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id, self.status = worker_id, OutcomeStatus.succeeded
        self.retryable, self.error, self.result, self.throttled_ms = False, None, None, 0


def pieces(schema: dict[str, Any], header: bytes, worker_id: str) -> list[Piece] | None:
    """The outcome record as `header` and its fields in runs: of fields from the execution (a
    writer compiled by the codec's own compiler), of the worker's constant fields (their
    bytes), and the two instants (None each, written as the long they are). None (the generic
    path) unless every field is one of those, the instants are timestamp-millis longs, and each
    run compiles."""
    constants = _Worker(worker_id)
    instant = {"type": "long", "logicalType": "timestamp-millis"}
    runs: list[tuple[str, list[dict[str, Any]]]] = []
    for field in schema["fields"]:
        name = field["name"]
        if name in INSTANTS:
            if field["type"] != instant:
                return None
            runs.append(("instant", [field]))
            continue
        if name in FROM_EXECUTION:
            kind = "execution"
        elif hasattr(constants, name):
            kind = "worker"
        else:
            return None
        if runs and runs[-1][0] == kind:
            runs[-1][1].append(field)
        else:
            runs.append((kind, [field]))
    if sum(kind == "instant" for kind, _ in runs) != len(INSTANTS):
        return None
    out: list[Piece] = [header]
    try:
        for kind, run in runs:
            if kind == "instant":
                out.append(None)
                continue
            write = avro_fast.compile_writer({**schema, "fields": run}, b"")
            out.append(write if kind == "execution" else write(constants))
    except avro_fast.UnsupportedSchemaError:
        return None
    return out


def joiner(parts: list[Piece]) -> Callable[[ExecutionRequested, bytes], bytes]:
    """`(execution, instant) -> record`: `parts` joined, written out as one expression (no loop
    over them per record)."""
    env: dict[str, Any] = {}
    terms = []
    for i, part in enumerate(parts):
        name = f"p{i}"
        env[name] = part
        terms.append("at" if part is None else name if isinstance(part, bytes) else f"{name}(ex)")
    source = f"def join(ex, at):\n    return b''.join(({', '.join(terms)},))\n"
    exec(compile(source, "<outcome_bytes join>", "exec"), env)  # noqa: S102 - our source
    return env["join"]  # type: ignore[no-any-return]


def splitter(parts: list[Piece]) -> Callable[[ExecutionRequested], tuple[bytes, ...]]:
    """`execution -> chunks`: what `joiner(parts)` writes but the instants, as the bytes
    between them, so that `instant.join(chunks)` is the record (both instants are the run's
    start). Made while the execution waits for its due time; its due turn only joins."""
    env: dict[str, Any] = {}
    chunks: list[list[str]] = [[]]
    for i, part in enumerate(parts):
        if part is None:
            chunks.append([])
            continue
        env[name := f"p{i}"] = part
        chunks[-1].append(name if isinstance(part, bytes) else f"{name}(ex)")
    joined = ", ".join(f"b''.join(({', '.join(terms)},))" if terms else "b''" for terms in chunks)
    source = f"def split(ex):\n    return ({joined},)\n"
    exec(compile(source, "<outcome_bytes split>", "exec"), env)  # noqa: S102 - our source
    return env["split"]  # type: ignore[no-any-return]


class DeliveredOutcomes:
    """The outcome records of delivered runs for one worker (`worker_id`) and one codec."""

    def __init__(self, codec: Codec, worker_id: str, settings: KadenceSettings) -> None:
        self.codec, self.worker_id = codec, worker_id
        self.topic, self.partitions = Topics(settings).outcomes, settings.partitions
        parsed, fp = codec.schemas.current[ExecutionOutcome.avro_fullname()]
        found = pieces(parsed, MAGIC + fp, worker_id)
        self._join = joiner(found) if found is not None else None
        self._split = splitter(found) if found is not None else None
        self._partitions: dict[str, int] = {}
        self._type_schema = [
            (TYPE, ExecutionOutcome.avro_name.encode()),
            (SCHEMA, fp.hex().encode()),
        ]

    def prepare(self, ex: ExecutionRequested) -> Prepared | None:
        """What `value` needs of `ex` but its start, made while `ex` waits for its due time
        (the due turn, which a burst makes the busiest, then only joins it with the start's
        bytes); None when the template does not take it (its due turn writes it)."""
        if self._split is None:
            return None
        try:
            return self._partition(ex), self._split(ex)
        except Exception:  # `record` says what does not fit
            return None

    def record(self, run: ActiveRun) -> Record:
        """The `succeeded` outcome of delivered `run`, started (and ended) at `started_ms`."""
        ex = run.execution
        key = ex.key.encode()
        prepared = run.item.outcome
        if prepared is not None:
            value = avro_fast.write_long(run.started_ms).join(prepared[1])
            return self.topic, prepared[0], key, value, self._headers(ex)
        try:
            value = self._value(ex, run.started_ms)
        except Exception:  # the generic path encodes it or says what does not fit
            outcome = delivered_outcome(run, self.worker_id)
            value, headers = self.codec.encode(outcome), self.headers(outcome)
            return self.topic, self._partition(ex), key, value, headers
        return self.topic, self._partition(ex), key, value, self._headers(ex)

    def value(self, run: ActiveRun) -> tuple[int, bytes] | None:
        """The partition and value of `record(run)`, without its key and headers (an entry
        of a batch needs neither); None when the template does not take it."""
        prepared = run.item.outcome
        if prepared is not None:
            return prepared[0], avro_fast.write_long(run.started_ms).join(prepared[1])
        ex = run.execution
        try:
            return self._partition(ex), self._value(ex, run.started_ms)
        except Exception:  # `record` says what does not fit
            return None

    def _value(self, ex: ExecutionRequested, at_ms: int) -> bytes:
        if self._join is None:
            raise avro_fast.UnsupportedSchemaError("no template: the generic path")
        return self._join(ex, avro_fast.write_long(at_ms))

    def _partition(self, ex: ExecutionRequested) -> int:
        """The outcome's partition: its job's (`partition_for` its routing key), remembered."""
        route = ex.routing_key
        partition = self._partitions.get(route)
        if partition is None:
            if len(self._partitions) >= PARTITIONS_CACHED:
                self._partitions.clear()
            partition = self._partitions[route] = partition_for(route, self.partitions)
        return partition

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
