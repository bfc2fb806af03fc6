"""The record a tenant's Kafka topic receives for one run, and its template.

`delivered` says what the record is: in the target's format, the Avro envelope (with its type
and schema headers), the envelope as JSON, or the payload alone; always with the ids a consumer
needs and the guarantee it went out under. Building it so for every run cost more than the
produce: the headers were assembled one generic pair at a time and then walked again to size
the record against the broker's limit (kadence/sizing.py). `TenantRecords` gives the same key,
value and headers from pieces kept per worker (the type and schema pairs, the header names'
sizes, the guarantee's, the attempt and delivery counts' and due instants' values), with only
the execution's ids encoded per run, and the size added up from the pieces' lengths. A record it
finds over the limit is checked the generic way, which raises naming both sizes.
tests/connectors/test_tenant_record.py compares it with `delivered` and `record_bytes`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from datetime import datetime

from kadence.headers import (
    ATTEMPT,
    DELIVERY,
    DUE_AT,
    EXECUTION_ID,
    GUARANTEE,
    JOB,
    SCHEMA,
    TENANT,
    TYPE,
    Headers,
    headers_for,
    iso_utc,
)
from kadence.models import DeliveryFormat, ExecutionRequested, KafkaTarget
from kadence.sizing import RECORD_LIMIT, check_fits

CONTENT_TYPE = "content-type"
EXACTLY_ONCE = (GUARANTEE, b"exactly-once")
"""The record went out in the worker's transaction with the run's outcome and offsets."""
AT_LEAST_ONCE = (GUARANTEE, b"at-least-once")
"""The record went out on the claimed path: the same execution id may arrive again."""
DUE_CACHED = 8_192
"""Due instants whose header value is kept (the runs of a second share theirs)."""
_COUNTS = tuple(str(n).encode() for n in range(100))
"""The attempt and delivery headers' values a run has (a count beyond is written as it comes)."""
_JSON = (CONTENT_TYPE, b"application/json")

Pair = tuple[str, str | bytes | None]


def delivered(
    ex: ExecutionRequested,
    record: bytes,
    fingerprint: bytes,
    guarantee: tuple[str, bytes],
) -> tuple[bytes, Headers]:
    """The value and headers the tenant's topic receives for `ex`, in its target's format:
    the Avro envelope `record` (with its type and schema headers), the envelope as JSON, or the
    payload alone; always with the ids a consumer needs (the execution id is the idempotency
    key), the `guarantee` it went out under (`EXACTLY_ONCE` or `AT_LEAST_ONCE`, one constant
    pair) and, but for Avro, a `content-type`."""
    target = ex.target
    assert isinstance(target, KafkaTarget)
    headers = headers_for(ex, fingerprint)
    if target.format is DeliveryFormat.avro:
        headers.append(guarantee)
        return record, headers
    ids = [(k, v) for k, v in headers if k not in (TYPE, SCHEMA)]
    if target.format is DeliveryFormat.json:
        return envelope_json(ex), [*ids, guarantee, _JSON]
    return ex.payload, [*ids, guarantee, (CONTENT_TYPE, ex.content_type.encode())]


def envelope_json(ex: ExecutionRequested) -> bytes:
    """The execution as one JSON object; the payload as text when it is UTF-8, else base64
    with `"payload_encoding": "base64"`."""
    doc = ex.model_dump(mode="json", exclude={"payload"})
    try:
        doc["payload"] = ex.payload.decode("utf-8")
    except UnicodeDecodeError:
        doc["payload"] = base64.b64encode(ex.payload).decode()
        doc["payload_encoding"] = "base64"
    return json.dumps(doc, separators=(",", ":")).encode()


def _size(pairs: Sequence[Pair]) -> int:
    """What `pairs` count against the record limit (`record_bytes`' rule for headers)."""
    size = 0
    for name, value in pairs:
        size += len(name.encode())
        if isinstance(value, bytes):
            size += len(value)
        elif value:
            size += len(value.encode())
    return size


class TenantRecords:
    """`delivered`, its key and its size check, from pieces kept per worker.

    `fingerprint` is the current ExecutionRequested schema's (its `kadence-schema` header);
    `limit` what key, value and headers may add up to (kadence/sizing.py)."""

    def __init__(self, fingerprint: bytes, limit: int = RECORD_LIMIT) -> None:
        self.limit = limit
        self._typed: list[Pair] = [
            (TYPE, ExecutionRequested.avro_name.encode()),
            (SCHEMA, fingerprint.hex().encode()),
        ]
        """The pairs `headers_for` puts first on an ExecutionRequested."""
        self._typed_size = _size(self._typed)
        self._names = _size(
            [(k, None) for k in (TENANT, JOB, EXECUTION_ID, ATTEMPT, DELIVERY, DUE_AT)]
        )
        """The names of the id headers."""
        self._due: dict[datetime, bytes] = {}
        self._guarantees: dict[Pair, int] = {}

    def record(
        self, topic: str, ex: ExecutionRequested, record: bytes, guarantee: tuple[str, bytes]
    ) -> tuple[bytes, bytes, Headers]:
        """(key, value, headers) of `ex`'s record on `topic` (`record`: its Avro envelope in
        the current schema), as `delivered` and `ex.key` give them; `RecordTooLargeError` when
        they add up to more than the limit."""
        key, tenant, job = ex.key.encode(), ex.tenant.encode(), ex.job_id.encode()
        eid = ex.execution_id.encode()
        attempt, delivery = ex.attempt, ex.delivery
        attempt_b = _COUNTS[attempt] if 0 <= attempt < 100 else str(attempt).encode()
        delivery_b = _COUNTS[delivery] if 0 <= delivery < 100 else str(delivery).encode()
        due = self._due.get(ex.due_at)
        if due is None:
            if len(self._due) >= DUE_CACHED:
                self._due.clear()
            due = self._due[ex.due_at] = iso_utc(ex.due_at).encode()
        size = self._names + len(key) + len(tenant) + len(job) + len(eid)
        size += len(attempt_b) + len(delivery_b) + len(due)
        size += self._guarantee(guarantee)
        headers: Headers = [
            (TENANT, tenant),
            (JOB, job),
            (EXECUTION_ID, eid),
            (ATTEMPT, attempt_b),
            (DELIVERY, delivery_b),
            (DUE_AT, due),
            guarantee,
        ]
        target = ex.target
        assert isinstance(target, KafkaTarget)
        if target.format is DeliveryFormat.avro:
            value = record
            headers[:0] = self._typed
            size += self._typed_size
        else:
            if target.format is DeliveryFormat.json:
                value, content = envelope_json(ex), _JSON
            else:
                value, content = ex.payload, (CONTENT_TYPE, ex.content_type.encode())
            headers.append(content)
            size += _size((content,))
        if size + len(value) > self.limit:  # the generic check says by how much
            check_fits(topic, key, value, headers, self.limit)
        return key, value, headers

    def _guarantee(self, guarantee: Pair) -> int:
        size = self._guarantees.get(guarantee)
        if size is None:
            if len(self._guarantees) >= 8:  # two constants in practice
                self._guarantees.clear()
            size = self._guarantees[guarantee] = _size((guarantee,))
        return size
