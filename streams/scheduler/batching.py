"""Kafka-topic executions of one tenant due at one instant, as one ExecutionBatch record
(`KADENCE_EXECUTION_BATCHES`; docs/execution.md, "Executions in batches").

The scheduler forwards each such execution with its due instant as its group; the runtime keeps
the groups of a transaction, over every job partition the process owns, and writes each as one
record when it commits (streams/runtime/coalescing.py): one record on the executions partition
for what was a record each. A worker delivers a batch's executions together, in one
transaction, which is why only executions due at the same instant share one, and only those
with a Kafka-topic target (each is delivered in the worker's own transaction, and takes no
destination's rate limit).

A batch's bytes are written here rather than by the codec: the entries are the executions'
single-object bytes as the scheduler encoded them, and an Avro array of bytes is a count, each
entry's length and bytes, a zero (tests/scheduler/test_batching.py compares them with the
codec's encoding of the model).
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import datetime

from kadence import avro_fast
from kadence.codec import MAGIC, Codec
from kadence.headers import COUNT, DUE_AT, SCHEMA, TENANT, TYPE, Headers, iso_utc
from kadence.models import (
    MAX_BATCH_BYTES,
    MAX_EXECUTIONS_PER_BATCH,
    ExecutionBatch,
    ExecutionRequested,
    KafkaTarget,
)
from streams.runtime.coalescing import Coalescer


def group_of(record: object) -> Hashable | None:
    """The group an execution is written in (its due instant), None for a record written alone:
    an execution of another target, a revocation."""
    if type(record) is ExecutionRequested and isinstance(record.target, KafkaTarget):
        return record.due_at
    return None


class ExecutionBatches:
    """Writes a group of executions as an ExecutionBatch."""

    def __init__(self, codec: Codec) -> None:
        fp = codec.schema_fingerprint(ExecutionBatch)
        self._header = MAGIC + fp
        self._type = (TYPE, ExecutionBatch.avro_name.encode())
        self._schema = (SCHEMA, fp.hex().encode())

    def coalescer(self, record_limit: int) -> Coalescer:
        """The runner's coalescer: batches of MAX_EXECUTIONS_PER_BATCH and MAX_BATCH_BYTES at
        most (half `record_limit` at most, for a broker configured for smaller records)."""
        limit = min(MAX_BATCH_BYTES, record_limit // 2)
        return Coalescer(self.combine, MAX_EXECUTIONS_PER_BATCH, limit)

    def combine(
        self, key: bytes | None, group: Hashable, values: list[bytes]
    ) -> tuple[bytes, Headers]:
        """The value and headers of the batch of `values` (executions of the tenant `key`, due
        at `group`)."""
        assert isinstance(group, datetime)
        assert key is not None
        tenant = key
        parts = [
            self._header,
            avro_fast.write_long(len(tenant)),
            tenant,
            avro_fast.write_long(avro_fast.millis(group)),
            avro_fast.write_long(len(values)),
        ]
        for value in values:
            parts.append(avro_fast.write_long(len(value)))
            parts.append(value)
        parts.append(b"\x00")
        headers: Headers = [
            self._type,
            self._schema,
            (TENANT, tenant),
            (COUNT, str(len(values)).encode()),
            (DUE_AT, iso_utc(group).encode()),
        ]
        return b"".join(parts), headers
