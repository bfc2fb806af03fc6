"""Readable record headers, so `kcat -C -f '%k %h\n'` shows what flows without decoding Avro."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache

from kadence.models import (
    DeadLetter,
    ExecutionBatch,
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
COUNT = "kadence-count"
"""On an ExecutionBatch: how many executions it carries."""
GUARANTEE = "kadence-guarantee"
"""On a tenant's Kafka-target record: `exactly-once` (written in the worker's transaction) or
`at-least-once` (the claimed path: a duplicate with the same execution id may follow)."""


RESERVED_PREFIXES = ("kadence-", "webhook-")
"""Header names Kadence owns on every record and request it sends."""
FRAMING = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "user-agent",
        "idempotency-key",
        "proxy-connection",
    }
)
"""HTTP headers Kadence sets or must control (framing, identity, idempotency), whatever the
target's own headers say."""


def is_reserved(name: str) -> bool:
    """Whether `name`, in any case and with stray spaces, is a header Kadence owns: a target
    header of that name would spoof Kadence's (a second `Idempotency-Key`, a forged
    `Webhook-Signature`) or change the request's framing."""
    lowered = name.strip().lower()
    return lowered in FRAMING or lowered.startswith(RESERVED_PREFIXES)


def with_own(tenant_headers: Mapping[str, str], own: Mapping[str, str]) -> dict[str, str]:
    """`own` (Kadence's headers) plus the tenant's headers Kadence does not own: Kadence's
    always win, compared without regard to case."""
    own_names = {k.strip().lower() for k in own}
    kept = {
        k: v
        for k, v in tenant_headers.items()
        if not is_reserved(k) and k.strip().lower() not in own_names
    }
    return {**kept, **own}


@lru_cache(maxsize=8192)
def iso_utc(instant: datetime) -> str:
    """2026-12-01T09:00:00.000Z: UTC, milliseconds, the form headers and logs use. Cached:
    the runs of a second share their due instant, and every execution's headers carry it."""
    return instant.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@lru_cache(maxsize=256)
def _hex(fingerprint: bytes) -> bytes:
    return fingerprint.hex().encode()


def headers_for(record: WireModel, fingerprint: bytes) -> Headers:
    """Record type, schema fingerprint, and the identifiers a human greps for."""
    if type(record) is ExecutionRequested:  # one per execution: the checks below spelled out
        return [
            (TYPE, b"ExecutionRequested"),
            (SCHEMA, _hex(fingerprint)),
            (TENANT, record.tenant.encode()),
            (JOB, record.job_id.encode()),
            (EXECUTION_ID, record.execution_id.encode()),
            (ATTEMPT, str(record.attempt).encode()),
            (DELIVERY, str(record.delivery).encode()),
            (DUE_AT, iso_utc(record.due_at).encode()),
        ]
    return generic_headers(record, fingerprint)


def generic_headers(record: WireModel, fingerprint: bytes) -> Headers:
    """`headers_for` of any record."""
    out: Headers = [(TYPE, type(record).avro_name.encode()), (SCHEMA, _hex(fingerprint))]
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
    if isinstance(inner, ExecutionBatch):
        out.append((COUNT, str(len(inner.executions)).encode()))
    if isinstance(inner, ExecutionRequested | ExecutionOutcome | ExecutionRevoked | ExecutionBatch):
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
