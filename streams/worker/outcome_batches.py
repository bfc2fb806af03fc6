"""A worker transaction's outcomes as one record per scheduler partition (`outcome_format`
`batches`, the default).

Every outcome a transaction writes goes to its job's partition of the outcomes topic; a
scheduler partition reads them in the order written. Written one record each, the broker, the
worker's producer and the scheduler's consumer paid once per outcome what they can pay once
per transaction. Here each outcome is still encoded as it would be on its own (the codec, or
outcome_bytes.py's template), and its body (the record without the single-object header) goes
into an `ExecutionOutcomes` array for its partition: an Avro array is a count, the items, a
zero, so the batch is those pieces joined (tests/worker/test_outcome_batches.py compares the
bytes with the codec's encoding of the model). A partition's batch is closed and a new one
begun before it would pass `BATCH_BYTES` or `MAX_OUTCOMES_PER_RECORD`; an outcome too big
for a batch of its own, or not of the current schema, is written alone, as before.
"""

from __future__ import annotations

from kadence import avro_fast
from kadence.codec import HEADER_LEN, MAGIC, Codec
from kadence.headers import SCHEMA, TYPE, Headers
from kadence.models import MAX_OUTCOMES_PER_RECORD, ExecutionOutcome, ExecutionOutcomes
from kadence.sizing import RECORD_LIMIT

Record = tuple[str, int, bytes | None, bytes, Headers]
"""(topic, partition, key, value, headers): the session's `produce` arguments."""
BATCH_BYTES = RECORD_LIMIT // 2
"""A batch's bodies stay under this (half the record limit: room for the framing, and a
batch well below what a broker configured for smaller records still takes)."""


class OutcomeBatches:
    """The outcomes of the open transaction, by outcomes partition."""

    def __init__(self, codec: Codec, topic: str, *, max_bytes: int = BATCH_BYTES) -> None:
        self.topic, self.max_bytes = topic, max_bytes
        _, fp = codec.schemas.current[ExecutionOutcomes.avro_fullname()]
        _, self._item_fp = codec.schemas.current[ExecutionOutcome.avro_fullname()]
        self._header = MAGIC + fp
        self._headers: Headers = [
            (TYPE, ExecutionOutcomes.avro_name.encode()),
            (SCHEMA, fp.hex().encode()),
        ]
        self._open: dict[int, tuple[list[bytes], int]] = {}
        self._closed: list[Record] = []

    def add(self, partition: int, value: bytes) -> bool:
        """Add `value` (one outcome, the codec's single-object bytes) to `partition`'s batch;
        False when it must be written on its own (too big, or not of the current schema)."""
        body_len = len(value) - HEADER_LEN
        if body_len > self.max_bytes or value[2:HEADER_LEN] != self._item_fp:
            return False
        bodies, size = self._open.get(partition) or ([], 0)
        if bodies and (size + body_len > self.max_bytes or len(bodies) >= MAX_OUTCOMES_PER_RECORD):
            self._closed.append(self._record(partition, bodies))
            bodies, size = [], 0
        bodies.append(value[HEADER_LEN:])
        self._open[partition] = (bodies, size + body_len)
        return True

    def records(self) -> list[Record]:
        """Every batch of the transaction, closed; the next transaction starts empty."""
        out = self._closed
        out.extend(self._record(p, bodies) for p, (bodies, _) in self._open.items())
        self.clear()
        return out

    def clear(self) -> None:
        """Forget the transaction's outcomes (it was abandoned: they are written again)."""
        self._open, self._closed = {}, []

    def _record(self, partition: int, bodies: list[bytes]) -> Record:
        value = b"".join((self._header, avro_fast.write_long(len(bodies)), *bodies, b"\x00"))
        return self.topic, partition, None, value, self._headers
