"""The base every wire model shares: frozen, strict about unknown fields, Avro-named."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
)

AVRO_NAMESPACE = "kadence"

# Tenants and job ids appear in keys ("tenant/job_id"), headers and URLs: no slashes, no spaces.
_IDENT = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
Identifier = Annotated[str, StringConstraints(pattern=rf"^{_IDENT}$")]
"""pydantic matches patterns with Rust's regex, where `$` is the end of the text."""
IDENT_RE = re.compile(rf"{_IDENT}\Z")
"""Python's `$` also matches before a final newline ("job\\n"): `\\Z` does not. Use fullmatch."""
Positive = Annotated[int, Field(ge=1)]
"""Versions, attempts and delivery counts: they start at 1."""
WorkerId = Annotated[str, Field(min_length=1, max_length=128)]
ExecutionId = Annotated[str, Field(min_length=1, max_length=400)]
"""`tenant/job_id@<nominal instant>`: see kadence/timeengine/identity.py."""

MAX_PAYLOAD_BYTES = 512 * 1024
"""Hard cap on a job payload, well below the broker's 1 MiB message limit (settings may lower
it)."""


def _payload_bytes(value: object) -> object:
    """The one rule for a payload at every door (API, SDK, CLI, topics): bytes as they are, a
    string as its UTF-8, a JSON object or array as its compact JSON text, null as none."""
    if value is None:
        return b""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":")).encode()
    raise ValueError(
        f"a payload is a string, a JSON object or array, or bytes, not {type(value).__name__} "
        '(write a number or true/false as a string: "5")'
    )


Payload = Annotated[bytes, BeforeValidator(_payload_bytes), Field(max_length=MAX_PAYLOAD_BYTES)]
"""A job's or a run's payload: see `_payload_bytes` for what each door accepts."""

MAX_TIMEOUT_MS = 6 * 3600 * 1000
"""Jobs may run for up to six hours per attempt."""


def _utc_ms(value: datetime) -> datetime:
    """Aware instants only, normalised to UTC and rounded *up* to the millisecond.

    Kadence stores milliseconds. Rounding up (never down) keeps "never early" true for a
    one-off requested with microsecond precision.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must include a time zone offset, e.g. 2026-12-01T09:00:00Z")
    value = value.astimezone(UTC)
    extra = value.microsecond % 1000
    if extra:
        value = value + timedelta(microseconds=1000 - extra)
    return value


UtcDatetime = Annotated[datetime, AfterValidator(_utc_ms)]
"""A timezone-aware instant, stored in UTC with millisecond precision (Avro timestamp-millis)."""


class WireModel(BaseModel):
    """A record Kadence writes to or reads from a topic; each has an Avro schema in schemas/."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)

    avro_name: ClassVar[str] = ""
    """The record's Avro name (namespace `kadence`); set by every concrete top-level record."""

    @classmethod
    def avro_fullname(cls) -> str:
        return f"{AVRO_NAMESPACE}.{cls.avro_name or cls.__name__}"


def job_key(tenant: str, job_id: str) -> str:
    """The job key used as the record key on job-keyed topics: `tenant/job_id`."""
    return f"{tenant}/{job_id}"


def split_job_key(key: str) -> tuple[str, str]:
    """Inverse of `job_key`; raises ValueError on anything that is not `tenant/job_id`."""
    tenant, sep, job_id = key.partition("/")
    if not sep or not IDENT_RE.fullmatch(tenant) or not IDENT_RE.fullmatch(job_id):
        raise ValueError(f"not a job key (expected tenant/job_id): {key!r}")
    return tenant, job_id
