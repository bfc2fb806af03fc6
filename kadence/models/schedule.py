"""ScheduleDefinition: what to run, when, where, and the policies that govern it.

One record per job version on the compacted `schedules` topic, keyed `tenant/job_id`.
Validation here is structural (types, ranges, identifiers); the time engine validates the cron
expression and the zone itself.
"""

from __future__ import annotations

from datetime import date
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from kadence.envelope import checked_at_the_door, payload_refusal
from kadence.labels import KEY as LABEL_KEY
from kadence.labels import MAX_LABELS, check_labels
from kadence.labels import VALUE as LABEL_VALUE
from kadence.models.base import (
    MAX_ATTEMPTS,
    MAX_TIMEOUT_MS,
    Actor,
    Identifier,
    MediaType,
    Payload,
    UtcDatetime,
    Version,
    WireModel,
    job_key,
)
from kadence.models.chain import MAX_CHAIN_LINKS, ChainLink
from kadence.models.notify import NotifyPolicy
from kadence.models.targets import (
    DeliveryFormat,
    KafkaTarget,
    Target,
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
    """Fire in the first copy only (summer time)."""
    last = "last"
    """Fire in the second copy only (standard time)."""
    both = "both"
    """Fire in both copies."""


class OverlapPolicy(StrEnum):
    """What happens when an occurrence is due while the previous run is still running."""

    skip = "skip"
    """Do not start it; history records the skip (default, like Temporal's)."""
    allow = "allow"
    """Start it anyway: runs of the job overlap (in a concurrency group, which allows one run at
    a time, it waits as `buffer_all`)."""
    buffer_one = "buffer_one"
    """Keep one waiting (`buffered`) and start it when the running one ends (or expires)."""
    buffer_all = "buffer_all"
    """Keep up to `max_buffered` waiting, started one after another."""
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
    """Exactly the computed backoff."""


_DATE = r"^\d{4}-\d{2}-\d{2}$"
MAX_EXCLUSIONS = 64


class ExcludeDates(WireModel):
    """Local dates in the job's zone, `start` to `end` both included (holidays, a freeze):
    no occurrence whose local time falls on them runs."""

    kind: Literal["dates"] = "dates"
    start: Annotated[str, Field(pattern=_DATE)]
    """YYYY-MM-DD."""
    end: Annotated[str, Field(pattern=_DATE)] | None = None
    """YYYY-MM-DD, not before `start`; None: `start` alone."""

    @model_validator(mode="after")
    def _real_dates(self) -> ExcludeDates:
        first = _real_date(self.start, "start")
        if self.end is not None and _real_date(self.end, "end") < first:
            raise ValueError("end must not be before start")
        return self


def _real_date(text: str, name: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{name}: {text!r} is not a date") from None


class ExcludeCron(WireModel):
    """A 5-field cron expression matched against each occurrence's local time, to the minute:
    an occurrence in a minute it names does not run (`* * * * 0,6`: weekends; `* 12 * * *`:
    the noon hour)."""

    kind: Literal["cron"] = "cron"
    expression: Annotated[str, Field(min_length=1, max_length=256)]
    """5 fields, minute first (no seconds field): the minutes whose occurrences do not run."""


Exclusion = Annotated[ExcludeDates | ExcludeCron, Field(discriminator="kind")]


class CronSchedule(WireModel):
    """A cron expression evaluated in local time in an IANA zone."""

    kind: Literal["cron"] = "cron"
    expression: Annotated[str, Field(min_length=1, max_length=256)]
    """5 fields (minute first), or 6 with seconds first; macros like @hourly; L, LW, L-n, W, #,
    H (docs/scheduling.md)."""
    also: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=256)]], Field(max_length=15)
    ] = Field(default_factory=list)
    """More expressions in the same zone, with the same DST policies: the job runs at every
    instant any of them names, once where two name the same (`0 9 * * 1-5` also `0 11 * * 6`)."""
    timezone: Annotated[str, Field(min_length=1, max_length=64)] = "UTC"
    """IANA zone name (e.g. Europe/London). The name is stored, never an offset."""
    start_at: UtcDatetime | None = None
    """No occurrence before this instant."""
    end_at: UtcDatetime | None = None
    """No occurrence after this instant."""
    dst_gap: DstGapPolicy = DstGapPolicy.shift
    """When the local time does not exist (clocks spring forward)."""
    dst_fold: DstFoldPolicy = DstFoldPolicy.auto
    """When the local time happens twice (clocks fall back)."""
    spread_s: Annotated[int, Field(ge=0, le=3600)] | None = None
    """Deterministic forward-only offset window: due = nominal + hash(job key) % spread_s.
    None (the default): spread within the minute the expression names (60 s) when it has no
    seconds field, exactly on time when it has one. 0: exactly on time (opt out)."""
    exclude: Annotated[list[Exclusion], Field(max_length=MAX_EXCLUSIONS)] = Field(
        default_factory=list
    )
    """Occurrences that do not run: local dates and cron-named minutes (docs/scheduling.md)."""

    @model_validator(mode="after")
    def _bounds_ordered(self) -> CronSchedule:
        if self.start_at and self.end_at and self.end_at <= self.start_at:
            raise ValueError("end_at must be after start_at")
        return self


MAX_INTERVAL_S = 366 * 86_400
MAX_EVENT_AGE_MS = 30 * 86_400_000
"""A job's `max_event_age_ms` at most (as `catch_up_window_ms`)."""


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
    exclude: Annotated[list[Exclusion], Field(max_length=MAX_EXCLUSIONS)] = Field(
        default_factory=list
    )
    """Occurrences that do not run, by their local time in `timezone` (as a cron job's)."""

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
    """The instant to run, with a zone offset (`2026-12-24T18:00:00+01:00`); stored in UTC to
    the millisecond, rounded up (never early)."""


Schedule = Annotated[CronSchedule | OnceSchedule | IntervalSchedule, Field(discriminator="kind")]


class RetryPolicy(WireModel):
    """Exponential backoff: delay(n) = min(max_backoff, initial * multiplier**(n-1)), jittered."""

    max_attempts: Annotated[int, Field(ge=1, le=MAX_ATTEMPTS)] = 3
    """Total attempts including the first; 1 means no retry."""
    initial_backoff_ms: Annotated[int, Field(ge=0, le=86_400_000)] = 1_000
    """The backoff before the first retry, before jitter."""
    max_backoff_ms: Annotated[int, Field(ge=0, le=86_400_000)] = 300_000
    """No backoff is longer (before jitter); not below `initial_backoff_ms`."""
    multiplier: Annotated[float, Field(ge=1.0, le=10.0)] = 2.0
    """Each retry's backoff is the previous one's times this."""
    jitter: JitterMode = JitterMode.full
    """How the backoff is randomised, so retries of many runs do not arrive together."""

    @model_validator(mode="after")
    def _ordered(self) -> RetryPolicy:
        if self.max_backoff_ms < self.initial_backoff_ms:
            raise ValueError("max_backoff_ms must be >= initial_backoff_ms")
        return self


class MissedRunPolicy(WireModel):
    # No class docstring: it would become the Avro record's `doc` and change the schema.
    mode: MissedRunMode = MissedRunMode.latest_once
    """Which late occurrences fire."""
    catch_up_window_ms: Annotated[int, Field(ge=0, le=30 * 86_400_000)] = 3_600_000
    """Occurrences older than this when noticed are missed, whatever the mode."""
    max_catch_up: Annotated[int, Field(ge=1, le=10_000)] = 100
    """Upper bound on occurrences fired by `all` after one outage."""


class ScheduleDefinition(WireModel):
    """One version of a job. The latest version per `tenant/job_id` is the job."""

    avro_name = "ScheduleDefinition"

    tenant: Identifier
    """The tenant that owns the job (through the API: the token's tenant)."""
    job_id: Identifier
    """The job's id, unique in its tenant (through the API: the path)."""
    version: Version
    """Monotonic per job; a record with a version not above the current one is rejected. At
    most 2^53 - 1 (JSON readers keep it exact)."""
    schedule: Schedule
    """When it runs: a cron expression, an interval or one instant (`kind`)."""
    target: Target
    """Where each run goes: a webhook, a Kafka topic, an SQS queue or a handler (`kind`)."""
    payload: Payload = b""
    """The body each run sends: text, or a JSON object or array (sent as its compact JSON);
    null or empty for none. Up to 512 KiB (KADENCE_MAX_PAYLOAD_BYTES may lower it)."""
    content_type: MediaType = "application/json"
    """The payload's media type (RFC 9110: `type/subtype`, parameters after `;`), sent with
    each run: no control characters, no line breaks."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    """How a failed attempt is retried."""
    timeout_ms: Annotated[int, Field(ge=1_000, le=MAX_TIMEOUT_MS)] = 300_000
    """Per-attempt time limit (up to 6 h)."""
    lease_ttl_ms: Annotated[int, Field(ge=3_000, le=600_000)] = 30_000
    """How long a worker's claim on a run holds without renewal (renewed at least every third
    of it): the run of a worker that stopped renewing is given to another after this."""
    max_event_age_ms: Annotated[int, Field(ge=1_000, le=MAX_EVENT_AGE_MS)] | None = None
    """A run not started within this long of its scheduled time (nominal + spread; for a
    manual trigger, a backfill or a replay, when it was asked for) is not started: it is
    dead-lettered with error `MaxEventAge`, its target never called (EventBridge's
    MaximumEventAgeInSeconds). Retries count from the same instant, so they stop once it has
    passed (docs/execution.md). 1 s to 30 days; None: no limit."""
    overlap: OverlapPolicy = OverlapPolicy.skip
    """What an occurrence due while a run of the job is still running does."""
    max_buffered: Annotated[int, Field(ge=1, le=1_000)] = 10
    """Bound for overlap=buffer_all."""
    concurrency_key: Identifier | None = None
    """Jobs sharing a key never run at the same time (and share a partition)."""
    missed: MissedRunPolicy = Field(default_factory=MissedRunPolicy)
    """What fires of the occurrences no scheduler ran in time."""
    paused: bool = False
    """A paused job fires nothing: its occurrences are `skipped_paused`, not caught up on
    resume."""
    max_runs: Annotated[int, Field(ge=1, le=100_000_000)] | None = None
    """Run at most this many scheduled occurrences in the job's life (every version; triggers,
    backfills, retries and replays not counted), then stop: the job shows `completed` and lists
    no next runs. A new version with a higher limit runs on. None: no limit."""
    pause_after_failures: Annotated[int, Field(ge=1, le=1_000)] | None = None
    """Pause the job after this many runs in a row ended failed (dead-lettered), with a history
    record saying so; a success resets the count, and so does resuming. None: never."""
    delete_after_completion: bool = False
    """Delete the job once it has no occurrence left (a one-off after its run, a job past its
    `end_at` or its `max_runs`) and its last run has ended (succeeded, cancelled or
    dead-lettered): as EventBridge's ActionAfterCompletion DELETE. Its history and dead letters
    stay."""
    description: Annotated[str, Field(max_length=1024)] = ""
    """Free text for people."""
    labels: Annotated[
        dict[
            Annotated[str, Field(pattern=rf"^{LABEL_KEY.pattern}$")],
            Annotated[str, Field(pattern=rf"^{LABEL_VALUE.pattern}$")],
        ],
        Field(max_length=MAX_LABELS),
    ] = Field(default_factory=dict)
    """Up to 16 `key: value` pairs to find the job by (`GET /v1/jobs?label=team=data`): keys
    1-63 lowercase letters, digits, `.`, `_`, `-`; values up to 63 of those (kadence/labels.py)."""
    on_success: Annotated[list[ChainLink], Field(max_length=MAX_CHAIN_LINKS)] = Field(
        default_factory=list
    )
    """Jobs of the same tenant to trigger once each when a run of this job succeeds (up to 8;
    docs/execution.md, "Chaining")."""
    on_failure: Annotated[list[ChainLink], Field(max_length=MAX_CHAIN_LINKS)] = Field(
        default_factory=list
    )
    """Jobs of the same tenant to trigger once each when a run of this job has failed for good:
    dead-lettered, after its retries (not after each failed attempt); up to 8."""
    notify: NotifyPolicy | None = None
    """A webhook to tell when a run is dead-lettered, the job pauses itself after failures, or
    a failure of the job opens its tenant's circuit (docs/execution.md, "Notifications").
    None: nobody is told (history, the events topic and metrics still say it)."""
    actor: Actor | None = None
    """Who wrote this version through the API (`token:<name>`, `jwt:<sub>`); None: written
    to Kafka directly (the SDK, `kadence put`, an ingress topic, which clears it)."""

    @field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, labels: object) -> object:
        """kadence/labels.py's own words, before the patterns above say it less clearly."""
        if isinstance(labels, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            check_labels(labels)
        return labels

    @model_validator(mode="after")
    def _target_topic_fits(self) -> ScheduleDefinition:
        if isinstance(self.target, KafkaTarget):
            reason = reserved(self.target.topic) or too_long(self.tenant, self.target.topic)
            if reason is not None:
                raise ValueError(f"target.topic: {reason}")
        return self

    @field_validator("payload")
    @classmethod
    def _payload_fits_target(cls, payload: bytes, info: ValidationInfo) -> bytes:
        """A JSON target's envelope holds the payload as a JSON string (kadence/envelope.py)."""
        target = info.data.get("target")
        json_target = isinstance(target, KafkaTarget) and target.format is DeliveryFormat.json
        if json_target and checked_at_the_door() and (why := payload_refusal(payload)):
            raise ValueError(why)
        return payload

    @model_validator(mode="after")
    def _links(self) -> ScheduleDefinition:
        for name, links in (("on_success", self.on_success), ("on_failure", self.on_failure)):
            ids = [link.job_id for link in links]
            if self.job_id in ids:
                raise ValueError(
                    f"{name}: a job cannot trigger itself (use retry for another attempt)"
                )
            if len(set(ids)) < len(ids):
                raise ValueError(f"{name}: a job is named twice")
        return self

    @property
    def key(self) -> str:
        return job_key(self.tenant, self.job_id)

    @property
    def routing_key(self) -> str:
        """What decides the partition: the mutual-exclusion group if any, else the job key."""
        return f"{self.tenant}/~{self.concurrency_key}" if self.concurrency_key else self.key
