"""Readable record headers, so `kcat -C -f '%k %h\n'` shows what flows without decoding Avro."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from kadence.models import (
    DeadLetter,
    ExecutionOutcome,
    ExecutionRequested,
    ExecutionRevoked,
    LeaseEvent,
    WireModel,
)

Headers = list[tuple[str, str | bytes | None]]

TYPE = "kadence-type"
SCHEMA = "kadence-schema"
TENANT = "kadence-tenant"
JOB = "kadence-job"
EXECUTION_ID = "kadence-execution-id"
DUE_AT = "kadence-due-at"
ATTEMPT = "kadence-attempt"
DELIVERY = "kadence-delivery"


def iso_utc(instant: datetime) -> str:
    """2026-12-01T09:00:00.000Z: UTC, milliseconds, the form headers and logs use."""
    return instant.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def headers_for(record: WireModel, fingerprint: bytes) -> Headers:
    """Record type, schema fingerprint, and the identifiers a human greps for."""
    out: Headers = [(TYPE, type(record).avro_name.encode()), (SCHEMA, fingerprint.hex().encode())]
    tenant = getattr(record, "tenant", None)
    job_id = getattr(record, "job_id", None)
    inner = record.execution if isinstance(record, DeadLetter) else record
    if tenant is None and isinstance(inner, ExecutionRequested):
        tenant, job_id = inner.tenant, inner.job_id
    if tenant is not None:
        out.append((TENANT, str(tenant).encode()))
    if job_id is not None:
        out.append((JOB, str(job_id).encode()))
    if isinstance(inner, ExecutionRequested | ExecutionOutcome | LeaseEvent):
        out.append((EXECUTION_ID, inner.execution_id.encode()))
        out.append((ATTEMPT, str(inner.attempt).encode()))
        out.append((DELIVERY, str(inner.delivery).encode()))
    if isinstance(inner, ExecutionRevoked):
        out.append((EXECUTION_ID, inner.execution_id.encode()))
    if isinstance(inner, ExecutionRequested | ExecutionOutcome | ExecutionRevoked):
        out.append((DUE_AT, iso_utc(inner.due_at).encode()))
    return out


def header_value(
    headers: Mapping[str, str | bytes | None] | Sequence[tuple[str, str | bytes | None]] | None,
    name: str,
) -> str | None:
    """The first header `name` as text, from either form confluent-kafka hands out."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    for key, value in pairs:
        if key == name and value is not None:
            return value.decode(errors="replace") if isinstance(value, bytes) else value
    return None
