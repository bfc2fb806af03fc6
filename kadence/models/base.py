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

MAX_LONG = 2**63 - 1
"""What an Avro `long` holds (every integer field of every schema is one): no field may allow
more, or a value the model accepts would fail to encode (a crash where a rejection was due)."""
MAX_VERSION = 2**53 - 1
"""A job's version at most: the largest integer every JSON reader keeps exact (RFC 7493; the API
and the dashboard show versions as JSON numbers). Epoch milliseconds or microseconds fit."""
MAX_ATTEMPTS = 100
"""Attempts of one run at most (`RetryPolicy.max_attempts`): an attempt number is never more."""
MAX_DELIVERIES = 100
"""Deliveries of one attempt at most (the reaper's redelivery cap, KADENCE_REDELIVERY_CAP)."""
MAX_PARTITION = 2**31 - 1
"""Kafka names a partition with an int32."""
MAX_OFFSET = MAX_LONG
"""Kafka's offsets are int64."""
# Every string field has a length or a pattern. Besides its bound, that makes pydantic read it
# as Unicode: a lone surrogate (JSON's "\ud800"), which UTF-8 and so Avro and Kafka headers
# cannot carry, is refused ("unable to parse raw data as a unicode string"), where a plain
# `str` would take it (tests/test_model_bounds.py checks both).


Version = Annotated[int, Field(ge=1, le=MAX_VERSION)]
"""A job's definition version: from 1, monotonic per job."""
Attempt = Annotated[int, Field(ge=1, le=MAX_ATTEMPTS)]
Delivery = Annotated[int, Field(ge=1, le=MAX_DELIVERIES)]
Partition = Annotated[int, Field(ge=0, le=MAX_PARTITION)]
WorkerId = Annotated[str, Field(min_length=1, max_length=128)]
ExecutionId = Annotated[str, Field(min_length=1, max_length=400)]
Actor = Annotated[str, Field(pattern=r"^(token|jwt):[^\x00-\x1f\x7f]{1,256}$")]
"""Who wrote a command or a definition through the API: `token:<name>` (a named API token) or
`jwt:<sub>` (a JWT's subject). Absent: written to Kafka directly (the SDK, kcat, an ingress
topic), where Kadence cannot tell who."""
"""`tenant/job_id@<nominal instant>`: see kadence/timeengine/identity.py."""
DEFAULT_POOL = "default"
"""The worker pool every deployment has: a target that names no pool runs there."""
_POOL = r"[a-z0-9][a-z0-9-]{0,31}"
PoolName = Annotated[str, StringConstraints(pattern=rf"^{_POOL}$")]
"""A worker pool (KADENCE_POOLS): short, lower case, safe in a topic name and a metric label."""
POOL_RE = re.compile(rf"{_POOL}\Z")

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
        try:
            return json.dumps(value, separators=(",", ":")).encode()
        except RecursionError:  # not a ValueError: it would escape validation (an API 500)
            raise ValueError("a JSON payload nested too deep to write back as text") from None
    raise ValueError(
        f"a payload is a string, a JSON object or array, or bytes, not {type(value).__name__} "
        '(write a number or true/false as a string: "5")'
    )


Payload = Annotated[bytes, BeforeValidator(_payload_bytes), Field(max_length=MAX_PAYLOAD_BYTES)]
"""A job's or a run's payload: see `_payload_bytes` for what each door accepts."""

MAX_TIMEOUT_MS = 6 * 3600 * 1000
"""Jobs may run for up to six hours per attempt."""


EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
"""Every instant on the wire is from EARLIEST and before LATEST: timestamp-millis holds far
more, but Python's calendar ends in year 9999 and the time engine, a lease, a retry's backoff
or a catch-up window add days to an instant; a thousand years' margin keeps every sum a date."""


def _utc_ms(value: datetime) -> datetime:
    """Aware instants only, normalised to UTC and rounded *up* to the millisecond.

    Kadence stores milliseconds. Rounding up (never down) keeps "never early" true for a
    one-off requested with microsecond precision.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must include a time zone offset, e.g. 2026-12-01T09:00:00Z")
    try:
        value = value.astimezone(UTC)
        extra = value.microsecond % 1000
        if extra:
            value = value + timedelta(microseconds=1000 - extra)
    except OverflowError:  # year 1 with an offset east of UTC, 9999-12-31 rounded up
        raise ValueError(_OUT_OF_RANGE) from None
    if not EARLIEST <= value < LATEST:
        raise ValueError(_OUT_OF_RANGE)
    return value


_OUT_OF_RANGE = "must be from 1900-01-01T00:00:00Z and before 9000-01-01T00:00:00Z"


UtcDatetime = Annotated[datetime, AfterValidator(_utc_ms)]
"""A timezone-aware instant, stored in UTC with millisecond precision (Avro timestamp-millis)."""


_TCHARS = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = r'"(?:[\t !#-\[\]-~]|\\[\t -~])*"'
MEDIA_TYPE_RE = re.compile(
    rf"{_TCHARS}/{_TCHARS}(?:[ \t]*;[ \t]*(?:{_TCHARS}=(?:{_TCHARS}|{_QUOTED}))?)*"
)
"""RFC 9110 8.3.1's media-type (`type/subtype; name=value`, a value a token or a quoted string),
in ASCII: it goes into an HTTP header, a Kafka header and an SQS attribute as it is."""


def _media_type(value: str) -> str:
    if not MEDIA_TYPE_RE.fullmatch(value):
        bad = next((c for c in value if not " " <= c <= "~" and c != "\t"), None)
        why = f"holds {bad!r}, a control or non-ASCII character" if bad else "is not one"
        raise ValueError(
            f"must be a media type such as application/json or text/plain; charset=utf-8 "
            f"(RFC 9110 8.3.1): {value[:40]!r} {why}"
        )
    return value


MediaType = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_media_type)]
"""A run's content type: sent as the HTTP `content-type`, and as a Kafka or SQS header."""


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
