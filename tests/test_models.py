"""Model validation: bad input gets an error that names the field."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from kadence.codec import Codec
from kadence.models import (
    Backfill,
    CronSchedule,
    HttpTarget,
    OnceSchedule,
    RetryPolicy,
    ScheduleDefinition,
    TriggerNow,
    job_key,
    split_job_key,
)


def _definition(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "tenant": "acme",
        "job_id": "daily",
        "version": 1,
        "schedule": {"kind": "cron", "expression": "0 9 * * *", "timezone": "Europe/London"},
        "target": {"kind": "http", "url": "https://hooks.acme.example/run"},
    }
    base.update(overrides)
    return base


def _error_fields(exc: ValidationError) -> set[str]:
    return {".".join(str(p) for p in e["loc"]) for e in exc.errors()}


def test_defaults_are_the_documented_ones() -> None:
    d = ScheduleDefinition.model_validate(_definition())
    assert isinstance(d.schedule, CronSchedule)
    assert d.schedule.dst_gap == "shift"
    assert d.schedule.dst_fold == "auto"
    assert d.overlap == "skip"
    assert d.retry == RetryPolicy(max_attempts=3, initial_backoff_ms=1000, max_backoff_ms=300_000)
    assert d.key == "acme/daily"
    assert d.routing_key == "acme/daily"


def test_concurrency_key_routes_the_job_by_its_group() -> None:
    d = ScheduleDefinition.model_validate(_definition(concurrency_key="ledger"))
    assert d.routing_key == "acme/~ledger"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"tenant": "acme/other"}, "tenant"),
        ({"job_id": ""}, "job_id"),
        ({"job_id": "has space"}, "job_id"),
        ({"version": 0}, "version"),
        ({"timeout_ms": 7 * 3600 * 1000}, "timeout_ms"),
        ({"payload": b"x" * (512 * 1024 + 1)}, "payload"),
        ({"target": {"kind": "http", "url": "file:///etc/passwd"}}, "target.http.url"),
        ({"target": {"kind": "http", "url": "https://u:p@x.example/"}}, "target.http.url"),
        (
            {
                "target": {
                    "kind": "http",
                    "url": "https://x.example",
                    "headers": {"Authorization": "x"},
                }
            },
            "target.http.headers",
        ),
        ({"target": {"kind": "smtp"}}, "target"),
        ({"schedule": {"kind": "once", "run_at": "2026-12-01T09:00:00"}}, "schedule.once.run_at"),
        ({"retry": {"initial_backoff_ms": 10, "max_backoff_ms": 5}}, "retry"),
        ({"unknown_field": 1}, "unknown_field"),
    ],
)
def test_bad_definitions_name_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        ScheduleDefinition.model_validate(_definition(**overrides))
    assert field in _error_fields(err.value)


def test_end_before_start_is_refused() -> None:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ValidationError, match="end_at must be after start_at"):
        CronSchedule(expression="* * * * *", start_at=t, end_at=t)


def test_instants_are_utc_and_rounded_up_to_the_millisecond() -> None:
    paris = timezone(timedelta(hours=1))
    once = OnceSchedule(run_at=datetime(2026, 12, 1, 10, 0, 0, 1, tzinfo=paris))
    assert once.run_at == datetime(2026, 12, 1, 9, 0, 0, 1000, tzinfo=UTC)
    exact = OnceSchedule(run_at=datetime(2026, 12, 1, 9, 0, 0, 5000, tzinfo=UTC))
    assert exact.run_at.microsecond == 5000


def test_backfill_window_must_be_forward() -> None:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ValidationError, match="end must be after start"):
        Backfill(tenant="a", job_id="b", request_id="r", issued_at=t, start=t, end=t)


def test_models_are_frozen() -> None:
    target = HttpTarget(url="https://x.example/")
    with pytest.raises(ValidationError):
        target.url = "https://y.example/"  # type: ignore[misc]


def test_job_keys() -> None:
    assert split_job_key(job_key("acme", "daily")) == ("acme", "daily")
    for bad in ("acme", "acme/", "/daily", "a/b/c"):
        with pytest.raises(ValueError, match="not a job key"):
            split_job_key(bad)


@pytest.mark.parametrize(
    ("payload", "stored"),
    [
        ("hello", b"hello"),
        ({"hi": 1}, b'{"hi":1}'),
        ([1, "a", None], b'[1,"a",null]'),
        (None, b""),
        (b"\xff\x00", b"\xff\x00"),
    ],
)
def test_a_payload_means_the_same_in_the_model_and_on_the_topic(
    payload: Any, stored: bytes
) -> None:
    """Issue 17, item 12: the rule lives in the model, so the API, the SDK and the topic's JSON
    decoding (which alone accepted objects before) store the same bytes."""
    assert ScheduleDefinition.model_validate(_definition(payload=payload)).payload == stored
    if not isinstance(payload, bytes):
        doc = json.dumps({"type": "ScheduleDefinition", **_definition(payload=payload)})
        assert Codec().decode_as(doc.encode(), ScheduleDefinition).payload == stored
    trigger = {"tenant": "a", "job_id": "j", "request_id": "r", "issued_at": datetime.now(UTC)}
    expected = None if payload is None else stored  # no override: the job's payload
    assert TriggerNow.model_validate({**trigger, "payload": payload}).payload == expected


@pytest.mark.parametrize("payload", [5, 1.5, True, {"a"}])
def test_other_payloads_are_refused_saying_what_is_accepted(payload: Any) -> None:
    with pytest.raises(ValidationError, match="a payload is a string, a JSON object or array"):
        ScheduleDefinition.model_validate(_definition(payload=payload))
