"""ScheduleDefinition: what to run, when, where, and the policies that govern it.

One record per job version on the compacted `schedules` topic, keyed `tenant/job_id`.
Validation here is structural (types, ranges, identifiers); the time engine validates the cron
expression and the zone itself.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal
from urllib.parse import SplitResult, urlsplit

from pydantic import Field, field_validator, model_validator

from kadence.labels import check_labels
from kadence.models.base import (
    MAX_TIMEOUT_MS,
    Identifier,
    Payload,
    Positive,
    UtcDatetime,
    WireModel,
    job_key,
)
from kadence.target_topics import reserved, too_long


class DstGapPolicy(StrEnum):
    """What a cron job does when its local time does not exist (clocks spring forward)."""

    shift = "shift"
    """Fire at the first valid instant after the gap (default)."""
    skip = "skip"
    """Do not fire that occurrence; history records it as skipped for DST."""


class DstFoldPolicy(StrEnum):
    """What a cron job does when its local time happens twice (clocks fall back)."""

    auto = "auto"
    """Fixed-hour jobs fire once (first instant); wildcard/step-hour jobs fire in both (default)."""
    first = "first"
    last = "last"
    both = "both"


class OverlapPolicy(StrEnum):
    """What happens when an occurrence is due while the previous run is still running."""

    skip = "skip"
    """Do not start it; history records the skip (default, like Temporal's)."""
    allow = "allow"
    buffer_one = "buffer_one"
    buffer_all = "buffer_all"
    cancel_other = "cancel_other"
    """Cancel the running execution, then start the new one."""


class MissedRunMode(StrEnum):
    """What to do with occurrences noticed after their misfire grace: no scheduler ran the job in
    time (down, or its partition unowned). A paused job's occurrences are skipped, not missed
    (docs/decisions/0008); resuming does not bring them back."""

    latest_once = "latest_once"
    """Fire the most recent missed occurrence once, if inside the catch-up window (default)."""
    all = "all"
    """Fire every missed occurrence inside the window, up to `max_catch_up`."""
    none = "none"
    """Fire nothing; each missed occurrence gets a history record."""


class JitterMode(StrEnum):
    full = "full"
    """AWS-style full jitter: uniform in [0, backoff] (default)."""
    none = "none"


class CronSchedule(WireModel):
    """A cron expression evaluated in local time in an IANA zone."""

    kind: Literal["cron"] = "cron"
    expression: Annotated[str, Field(min_length=1, max_length=256)]
    """5 fields (minute first), or 6 with seconds first; macros like @hourly; L, LW, L-n, W, #,
    H (docs/scheduling.md)."""
    timezone: Annotated[str, Field(min_length=1, max_length=64)] = "UTC"
    """IANA zone name (e.g. Europe/London). The name is stored, never an offset."""
    start_at: UtcDatetime | None = None
    """No occurrence before this instant."""
    end_at: UtcDatetime | None = None
    """No occurrence after this instant."""
    dst_gap: DstGapPolicy = DstGapPolicy.shift
    dst_fold: DstFoldPolicy = DstFoldPolicy.auto
    spread_s: Annotated[int, Field(ge=0, le=3600)] | None = None
    """Deterministic forward-only offset window: due = nominal + hash(job key) % spread_s.
    None (the default): spread within the minute the expression names (60 s) when it has no
    seconds field, exactly on time when it has one. 0: exactly on time (opt out)."""

    @model_validator(mode="after")
    def _bounds_ordered(self) -> CronSchedule:
        if self.start_at and self.end_at and self.end_at <= self.start_at:
            raise ValueError("end_at must be after start_at")
        return self


MAX_INTERVAL_S = 366 * 86_400


class IntervalSchedule(WireModel):
    """Every `every_s` seconds of elapsed time: the instants `offset_s + k * every_s` seconds
    after 1970-01-01T00:00:00Z, as Temporal's IntervalSpec. Elapsed time, not wall-clock time:
    clock changes never move them, so "every 90 minutes" stays 90 minutes apart across DST, and
    `every_s` 86400 keeps the UTC time of day (the local time moves an hour with the clocks;
    a cron expression keeps the local one). The zone names how the instants are shown."""

    kind: Literal["interval"] = "interval"
    every_s: Annotated[int, Field(ge=1, le=MAX_INTERVAL_S)]
    """The interval, 1 s to 366 days."""
    offset_s: Annotated[int, Field(ge=0, le=MAX_INTERVAL_S)] = 0
    """The phase: `every_s` 3600 with `offset_s` 900 runs at a quarter past each UTC hour. Below
    `every_s`."""
    timezone: Annotated[str, Field(min_length=1, max_length=64)] = "UTC"
    """IANA zone the run times are shown in; it never changes when they are."""
    start_at: UtcDatetime | None = None
    """No occurrence before this instant."""
    end_at: UtcDatetime | None = None
    """No occurrence after this instant."""
    spread_s: Annotated[int, Field(ge=0, le=3600)] = 0
    """Deterministic forward-only offset within this window, per job (as for cron); below
    `every_s`. 0 (the default): exactly on the instants."""

    @model_validator(mode="after")
    def _consistent(self) -> IntervalSchedule:
        if self.offset_s >= self.every_s:
            raise ValueError("offset_s must be below every_s")
        if self.spread_s and self.spread_s >= self.every_s:
            raise ValueError("spread_s must be below every_s")
        if self.start_at and self.end_at and self.end_at <= self.start_at:
            raise ValueError("end_at must be after start_at")
        return self


class OnceSchedule(WireModel):
    """A one-off job: run once at an instant."""

    kind: Literal["once"] = "once"
    run_at: UtcDatetime


Schedule = Annotated[CronSchedule | OnceSchedule | IntervalSchedule, Field(discriminator="kind")]


MAX_TARGET_HEADERS = 64
MAX_TARGET_HEADER_BYTES = 16 * 1024
"""Target headers are copied into every execution, lease and scheduler state record: bounded,
so that with the largest payload those records still fit the broker's limit."""
_SECRET_HEADERS = {"authorization", "proxy-authorization", "cookie", "x-api-key"}
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}")
"""An HTTP header name: a token (RFC 9110, 5.1), so no spaces, colons or control characters."""
_BAD_HEADER_VALUE = re.compile(r"[\x00\r\n]")
"""What no header value may hold (a newline would start a header of its own)."""


def http_url_parts(url: str, credentials_field: str) -> SplitResult:
    """An absolute http(s) URL's parts; credentials in it are refused (they belong to the
    workers' secrets, named by `credentials_field`)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an absolute http:// or https:// URL")
    if parts.username or parts.password:
        raise ValueError(f"must not carry credentials; use {credentials_field}")
    return parts


class HttpTarget(WireModel):
    """POST the payload to a webhook. Secrets are referenced by name, never carried inline."""

    kind: Literal["http"] = "http"
    url: Annotated[str, Field(min_length=1, max_length=2048)]
    method: Literal["POST", "PUT"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    """Non-secret headers. Credentials go in the worker's secret store, named by secret_ref."""
    secret_ref: Identifier | None = None
    """Name of the signing/auth secret held by the workers (never the secret itself)."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        http_url_parts(url, "secret_ref")
        return url

    @field_validator("headers")
    @classmethod
    def _no_secrets(cls, headers: dict[str, str]) -> dict[str, str]:
        if len(headers) > MAX_TARGET_HEADERS:
            raise ValueError(f"at most {MAX_TARGET_HEADERS} headers")
        size = sum(len(k.encode()) + len(v.encode()) for k, v in headers.items())
        if size > MAX_TARGET_HEADER_BYTES:
            raise ValueError(
                f"headers take {size} bytes; at most {MAX_TARGET_HEADER_BYTES} (names and values)"
            )
        for name, value in headers.items():
            if name.strip().lower() in _SECRET_HEADERS:  # "Authorization " is one too
                raise ValueError(
                    f"header {name!r} carries credentials; put the secret in the worker's secret "
                    "store and name it with secret_ref"
                )
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(
                    f"header name {name!r} is not an HTTP token: letters, digits and "
                    "!#$%&'*+-.^_`|~ only (no spaces, colons or control characters)"
                )
            if _BAD_HEADER_VALUE.search(value):
                raise ValueError(f"header {name!r}: the value holds a newline or NUL character")
        return headers


class DeliveryFormat(StrEnum):
    """What a Kafka-target topic receives for each run (docs/execution.md, "Kafka topic
    target"): always with the Kadence headers (`kadence-execution-id`, the idempotency key,
    `kadence-tenant`, `kadence-job`, `kadence-due-at`, `kadence-attempt`, `kadence-delivery`)."""

    avro = "avro"
    """Kadence's `ExecutionRequested`, Avro single-object encoded (what connectors/consumer.py
    reads)."""
    json = "json"
    """The same envelope as one JSON object (`content-type: application/json`)."""
    payload = "payload"
    """The job's payload alone, as its bytes, with `content-type` from the job: "send this
    message at that time"."""


class KafkaTarget(WireModel):
    """Produce the execution to a tenant topic; success on the broker's acknowledgement.

    The Kafka topic is `<namespace>.to.<tenant>.<topic>` (kadence/target_topics.py: one name
    per tenant and topic); the definition is refused when that name could exceed Kafka's 249
    characters."""

    kind: Literal["kafka"] = "kafka"
    topic: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")]
    format: DeliveryFormat = DeliveryFormat.avro
    """What the topic receives (see `DeliveryFormat`)."""


class QueueFormat(StrEnum):
    """What a queue target's message body is (docs/execution.md, "SQS queue target")."""

    payload = "payload"
    """The job's payload as the body: as text when it is text SQS accepts, else base64 with
    the message attribute `kadence-body-encoding: base64`."""
    json = "json"
    """Kadence's envelope as one JSON object (the Kafka target's `json` format)."""


_SQS_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,75}(\.fifo)?|[A-Za-z0-9_-]{1,80}")
_AWS_SQS_HOST = re.compile(r"sqs\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?")


class SqsTarget(WireModel):
    """Send the run to an Amazon SQS queue, or a server speaking SQS's JSON protocol (ElasticMQ,
    LocalStack); success when the queue accepts the message. A FIFO queue (`.fifo`) gets the
    idempotency key as its deduplication id; every message carries it as an attribute."""

    kind: Literal["sqs"] = "sqs"
    queue_url: Annotated[str, Field(min_length=1, max_length=2048)]
    """`https://sqs.<region>.amazonaws.com/<account>/<queue>`, or the local server's."""
    region: Annotated[str, Field(pattern=r"^[a-z0-9-]{1,32}$")] | None = None
    """The region requests are signed for; by default the one in an AWS queue URL's host, else
    us-east-1."""
    credentials_ref: Identifier | None = None
    """Names the AWS key the workers hold for the job's tenant (KADENCE_SQS_CREDENTIALS), never
    the key itself. None: requests are sent unsigned (a local server without authentication)."""
    message_group_id: Annotated[str, Field(pattern=r"^[!-~]{1,128}$")] | None = None
    """A FIFO queue's message group (by default the job id: a job's runs in order)."""
    format: QueueFormat = QueueFormat.payload

    @field_validator("queue_url")
    @classmethod
    def _queue_url(cls, url: str) -> str:
        parts = http_url_parts(url, "credentials_ref")
        if parts.query or parts.fragment:
            raise ValueError("must not have a query or a fragment")
        segments = parts.path.split("/")
        if len(segments) != 3 or not segments[1] or not _SQS_QUEUE_NAME.fullmatch(segments[2]):
            raise ValueError(
                "must end in /<account>/<queue>: a queue name of 1-80 letters, digits, - or _ "
                "(a FIFO queue's ending in .fifo)"
            )
        return url

    @property
    def fifo(self) -> bool:
        return self.queue_url.endswith(".fifo")

    @property
    def signing_region(self) -> str:
        if self.region is not None:
            return self.region
        aws = _AWS_SQS_HOST.fullmatch(urlsplit(self.queue_url).hostname or "")
        return aws.group(1) if aws else "us-east-1"


class HandlerTarget(WireModel):
    """Call a Python handler registered by name in the worker process."""

    kind: Literal["handler"] = "handler"
    name: Identifier


Target = Annotated[
    HttpTarget | KafkaTarget | HandlerTarget | SqsTarget, Field(discriminator="kind")
]


class RetryPolicy(WireModel):
    """Exponential backoff: delay(n) = min(max_backoff, initial * multiplier**(n-1)), jittered."""

    max_attempts: Annotated[int, Field(ge=1, le=100)] = 3
    """Total attempts including the first; 1 means no retry."""
    initial_backoff_ms: Annotated[int, Field(ge=0, le=86_400_000)] = 1_000
    max_backoff_ms: Annotated[int, Field(ge=0, le=86_400_000)] = 300_000
    multiplier: Annotated[float, Field(ge=1.0, le=10.0)] = 2.0
    jitter: JitterMode = JitterMode.full

    @model_validator(mode="after")
    def _ordered(self) -> RetryPolicy:
        if self.max_backoff_ms < self.initial_backoff_ms:
            raise ValueError("max_backoff_ms must be >= initial_backoff_ms")
        return self


class MissedRunPolicy(WireModel):
    mode: MissedRunMode = MissedRunMode.latest_once
    catch_up_window_ms: Annotated[int, Field(ge=0, le=30 * 86_400_000)] = 3_600_000
    """Occurrences older than this when noticed are missed, whatever the mode."""
    max_catch_up: Annotated[int, Field(ge=1, le=10_000)] = 100
    """Upper bound on occurrences fired by `all` after one outage."""


class ScheduleDefinition(WireModel):
    """One version of a job. The latest version per `tenant/job_id` is the job."""

    avro_name = "ScheduleDefinition"

    tenant: Identifier
    job_id: Identifier
    version: Positive
    """Monotonic per job; a record with a version not above the current one is rejected."""
    schedule: Schedule
    target: Target
    payload: Payload = b""
    content_type: Annotated[str, Field(max_length=128)] = "application/json"
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    timeout_ms: Annotated[int, Field(ge=1_000, le=MAX_TIMEOUT_MS)] = 300_000
    """Per-attempt time limit (up to 6 h)."""
    lease_ttl_ms: Annotated[int, Field(ge=3_000, le=600_000)] = 30_000
    overlap: OverlapPolicy = OverlapPolicy.skip
    max_buffered: Annotated[int, Field(ge=1, le=1_000)] = 10
    """Bound for overlap=buffer_all."""
    concurrency_key: Identifier | None = None
    """Jobs sharing a key never run at the same time (and share a partition)."""
    missed: MissedRunPolicy = Field(default_factory=MissedRunPolicy)
    paused: bool = False
    description: Annotated[str, Field(max_length=1024)] = ""
    labels: dict[str, str] = Field(default_factory=dict)
    """Up to 16 `key: value` pairs to find the job by (`GET /v1/jobs?label=team=data`): keys
    1-63 lowercase letters, digits, `.`, `_`, `-`; values up to 63 of those (kadence/labels.py)."""

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return check_labels(labels)

    @model_validator(mode="after")
    def _target_topic_fits(self) -> ScheduleDefinition:
        if isinstance(self.target, KafkaTarget):
            reason = reserved(self.target.topic) or too_long(self.tenant, self.target.topic)
            if reason is not None:
                raise ValueError(f"target.topic: {reason}")
        return self

    @property
    def key(self) -> str:
        return job_key(self.tenant, self.job_id)

    @property
    def routing_key(self) -> str:
        """What decides the partition: the mutual-exclusion group if any, else the job key."""
        return f"{self.tenant}/~{self.concurrency_key}" if self.concurrency_key else self.key
