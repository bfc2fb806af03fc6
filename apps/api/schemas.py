"""The API's request and response bodies, as models: what `/openapi.json` and `/docs` show.

A job's body (`JobSpec`) is the wire model's (`ScheduleDefinition`) fields without the three the
API fills in (tenant from the token, job_id from the path, version from the current one); it is
validated as a whole definition, as every door does (one contract: the SDK, the CLI and a topic
refuse the same input with the same errors), so the route reads it as JSON and this model is its
documentation. Responses are validated against these models on the way out and keep exactly the
fields the query view gave (`exclude_unset`); the nested definition and schedule are documented
by the wire models' schemas and passed through as the view stores them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, create_model

from kadence.models import ScheduleDefinition

FILLED_IN = {"tenant", "job_id", "version", "actor"}
COMPONENTS = "#/components/schemas/{model}"

EXAMPLE_JOB: dict[str, Any] = {
    "schedule": {"kind": "cron", "expression": "0 9 * * 1-5", "timezone": "Europe/Berlin"},
    "target": {
        "kind": "http",
        "url": "https://hooks.example.com/report",
        "method": "POST",
        "headers": {"X-Team": "finance"},
        "secret_ref": "reports",
    },
    "payload": {"report": "daily"},
    "retry": {"max_attempts": 5, "initial_backoff_ms": 2000, "multiplier": 2.0},
    "timeout_ms": 60000,
    "overlap": "skip",
    "description": "weekday report at 09:00 Berlin time",
}
EXAMPLE_INTERVAL_JOB: dict[str, Any] = {
    "schedule": {
        "kind": "interval",
        "every_s": 5400,
        "offset_s": 900,
        "timezone": "Europe/London",
        "exclude": [
            {"kind": "dates", "start": "2026-12-24", "end": "2026-12-26"},
            {"kind": "cron", "expression": "* 0-5 * * *"},
        ],
    },
    "target": {"kind": "kafka", "topic": "sync", "format": "json"},
    "labels": {"team": "data", "env": "prod"},
    "pause_after_failures": 3,
    "description": "every 90 minutes at :15 past, not at night nor over Christmas",
}
EXAMPLE_ONE_OFF: dict[str, Any] = {
    "schedule": {"kind": "once", "run_at": "2026-12-24T18:00:00+01:00"},
    "target": {"kind": "kafka", "topic": "reminders", "format": "payload"},
    "payload": {"order": 1042},
    "delete_after_completion": True,
}

_SPEC_FIELDS: dict[str, Any] = {
    name: (field.annotation, field)
    for name, field in ScheduleDefinition.model_fields.items()
    if name not in FILLED_IN
}
JobSpec: type[BaseModel] = create_model(
    "JobSpec",
    __config__=ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [EXAMPLE_JOB, EXAMPLE_INTERVAL_JOB, EXAMPLE_ONE_OFF]},
    ),
    __doc__=(
        "A job's definition without tenant, job_id and version (the token, the path and the "
        "current version give them). `payload` is a string, a JSON object or array (stored as "
        "its compact JSON) or null."
    ),
    **_SPEC_FIELDS,
)

PAYLOAD_SCHEMA = {
    "description": "the body each run sends: text, or a JSON object or array (sent as its "
    "compact JSON); null for none",
    "anyOf": [{"type": "string"}, {"type": "object"}, {"type": "array"}, {"type": "null"}],
}


def spec_schemas() -> dict[str, Any]:
    """JobSpec and the models it uses, as OpenAPI components (added by apps/api/openapi.py)."""
    schema = JobSpec.model_json_schema(ref_template=COMPONENTS)
    defs = schema.pop("$defs", {})
    schema["properties"]["payload"] = PAYLOAD_SCHEMA
    return {**defs, "JobSpec": schema}


def _as(ref: str, description: str) -> Any:
    """A field documented as component `ref`, passed through as the view stores it."""
    return WithJsonSchema({"$ref": COMPONENTS.format(model=ref), "description": description})


Definition = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {
            "description": "the definition as written: JobSpec's fields with tenant, job_id "
            "and version; a payload that is not UTF-8 text is base64 with "
            '`"payload_encoding": "base64"` beside it',
            "allOf": [{"$ref": COMPONENTS.format(model="JobSpec")}],
            "type": "object",
        }
    ),
]
ScheduleShown = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {
            "description": "the job's schedule as defined",
            "oneOf": [
                {"$ref": COMPONENTS.format(model="CronSchedule")},
                {"$ref": COMPONENTS.format(model="OnceSchedule")},
                {"$ref": COMPONENTS.format(model="IntervalSchedule")},
            ],
        }
    ),
]


class Shown(BaseModel):
    """A response: the fields the view gave, in order, none added."""

    model_config = ConfigDict(extra="allow")


class ErrorShown(Shown):
    type: str = Field(description="the error's kind (an exception name, an HTTP status)")
    message: str = ""
    code: str | None = None


class ResultShown(Shown):
    """What an attempt returned (docs/execution.md, "Results"): an HTTP answer's status code,
    the start of its body and the headers the target named in `result_headers`, or a
    handler's return value. Parts it does not have are left out."""

    status_code: int | None = None
    headers: dict[str, str] | None = Field(
        default=None, description="the answer's headers named in result_headers, lower-cased"
    )
    body: str | None = Field(
        default=None,
        description="the body's first 1 024 bytes: text when UTF-8, else base64 "
        "(body_encoding says which)",
    )
    body_encoding: Literal["base64"] | None = None
    body_truncated: bool | None = Field(default=None, description="the body was longer")
    value: Any = Field(default=None, description="a handler's return value (JSON)")
    note: str | None = Field(
        default=None, description="what was left out or cut, and why (a value too large...)"
    )


class HistoryEvent(Shown):
    """One recorded event of a job, newest first. `kind` says which fields it has: a
    scheduler's `decision` (fired, skipped, paused, retry_scheduled, ... with its reason), a
    worker's `outcome` of an attempt (status, when it started and how late), a `dead_letter`."""

    kind: Literal["decision", "outcome", "dead_letter"]
    at: str = Field(description="when, UTC (ISO 8601)")
    execution_id: str | None = None
    decision: str | None = None
    status: str | None = Field(default=None, description="an outcome's: succeeded, failed, ...")
    nominal_at: str | None = None
    due_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    lateness_s: float | None = Field(default=None, description="started_at - due_at")
    throttled_s: float | None = Field(
        default=None,
        description="an outcome's: of its lateness, how long it waited for its destination's "
        "rate limit (the target's rate_limit), s",
    )
    attempt: int | None = None
    delivery: int | None = None
    worker_id: str | None = None
    reason: str | None = None
    error: ErrorShown | None = None
    result: ResultShown | None = Field(default=None, description="an outcome's: what it returned")
    details: dict[str, str] | None = None
    actor: str | None = Field(
        default=None,
        description="who caused this decision by a command: `token:<name>`, `jwt:<sub>`, or "
        "`kafka` (a command written to Kafka directly: no name to give); absent on what the "
        "scheduler decided by itself",
    )


class RunShown(Shown):
    """One occurrence of a job (execution id), folded from its events."""

    execution_id: str
    nominal_at: str | None
    due_at: str | None
    status: str = Field(
        description="pending, scheduled, retrying, succeeded, failed, timed_out, cancelled, "
        "not_run (skipped: see reason) or dead_lettered"
    )
    started_at: str | None
    finished_at: str | None
    lateness_s: float | None = Field(description="how late its first attempt started, s")
    attempts: int
    deliveries: int
    last_error: ErrorShown | None
    result: ResultShown | None = Field(
        default=None, description="what its latest attempt returned (each is in the history)"
    )
    reason: str
    events: int
    actor: str | None = Field(
        default=None, description="who triggered, cancelled or replayed it (as HistoryEvent's)"
    )


class RollupShown(Shown):
    """One day of a job's history past its hot period (KADENCE_HISTORY_RETENTION_DAYS), in
    counts: attempts by status, the scheduler's decisions, dead letters, start lateness."""

    tenant: str
    job_id: str
    day: str = Field(description="UTC date, YYYY-MM-DD")
    events: int
    attempts: dict[str, int] = Field(description="attempts by final status (succeeded, ...)")
    decisions: dict[str, int] = Field(description="decisions by kind (fired, skipped_overlap, ...)")
    dead_letters: int
    started: int = Field(description="attempts with a start lateness")
    lateness_p50_s: float | None = Field(description="at most (a bucket's upper bound)")
    lateness_p99_s: float | None = Field(description="at most (a bucket's upper bound)")
    lateness_max_s: float | None


class RefusedShown(Shown):
    reason: str | None = None
    source: str | None = None


class JobShown(Shown):
    """A job: its current definition, state and next due times."""

    tenant: str
    job_id: str
    version: int
    state: Literal["active", "paused", "completed"] = Field(
        description="completed: the job ran its max_runs scheduled runs"
    )
    paused_reason: str = ""
    paused_by: str | None = Field(
        default=None, description="who paused it (as HistoryEvent's actor), while it is paused"
    )
    created_by: str | None = Field(
        default=None,
        description="who wrote its first version: `token:<name>`, `jwt:<sub>`, `kafka` "
        "(written to Kafka directly); null when the view does not know",
    )
    updated_by: str | None = Field(default=None, description="who wrote its current version")
    schedule: ScheduleShown
    next_runs: list[str] = Field(description="the next due times, UTC (ISO 8601)")
    last_run: HistoryEvent | None = Field(description="the last attempt's outcome, if any")
    definition: Definition
    source: str | None = Field(
        default=None, description="where the accepted definition is on the schedules topic"
    )
    refused: RefusedShown | None = Field(
        default=None, description="the last write of this job the scheduler refused, and why"
    )


class Accepted(Shown):
    """A command is on its topic (202): the scheduler applies it next."""

    request_id: str = Field(description="the same id again changes nothing")
    accepted: bool
    offset: int = Field(description="its offset on the topic")


class Triggered(Accepted):
    execution_id: str = Field(description="the run this trigger starts (derived from request_id)")


class Occurrence(Shown):
    execution_id: str
    nominal_at: str


class BackfillShown(Shown):
    """A backfill's plan (dry run) or, for a real run, the plan it sent."""

    dry_run: bool
    occurrences: list[Occurrence]
    already_dispatched: list[Occurrence]
    already_dispatched_count: int
    left_out: int = Field(description="occurrences past max_occurrences, not in this plan")
    truncated: bool = Field(description="the plan stopped before the window's end")
    resume_at: str | None = Field(description="where a next window should start")
    not_reached_from: str | None = Field(description="the job had not got this far yet")
    definition_version: int
    request_id: str | None = None
    accepted: bool | None = None
    offset: int | None = None


class BackfillProgress(Shown):
    request_id: str
    fired: int
    already_dispatched: int
    done: bool
    left_out: int
    left_out_counted_all: bool
    resume_at: str | None
    not_reached_from: str | None
    reason: str
    at: str


class DeadLetterShown(Shown):
    """An execution that gave up, and what happened to it since: dead, replayed, succeeded."""

    kind: Literal["dead_letter"]
    at: str
    execution_id: str
    tenant: str
    job_id: str
    reason: str = Field(description="why it was dead-lettered")
    attempt: int
    nominal_at: str | None
    due_at: str | None
    error: ErrorShown | None
    state: Literal["dead", "replayed", "succeeded"]
    state_at: str | None = None
    replays: int
    deaths: int
    source: str = Field(description="partition:offset on the dead-letter topic")


class Health(Shown):
    status: Literal["ok"]


class Readiness(Shown):
    ready: bool
    problems: list[str]
