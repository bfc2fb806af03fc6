"""The bodies the HTTP API takes for a job's commands (pause, resume, trigger, cancel, backfill,
dead-letter replay), defined once: the API validates requests with them and `ApiClient` checks
its arguments with them before sending, so both refuse the same input the same way."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class RequestIn(BaseModel):
    request_id: str | None = Field(default=None, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
    """Idempotency: the same request id changes nothing the second time (default: new)."""
    reason: str = Field(
        default="",
        max_length=512,
        description="a note kept in the job's history: why it was paused, resumed or cancelled",
    )


class TriggerIn(RequestIn):
    payload: str | dict[str, Any] | list[Any] | None = Field(
        default=None,
        description="replaces the payload for this run: a string, or a JSON object or array "
        "(sent as its compact JSON), as a definition's payload",
    )


class BackfillIn(RequestIn):
    start: datetime
    end: datetime
    dry_run: bool = True
    force: bool = False
    max_occurrences: int = Field(default=1_000, ge=1, le=100_000)


def window_problems(start: datetime, end: datetime) -> list[dict[str, Any]]:
    """A backfill window's problems in the API's 422 shape (`loc`, `msg`); empty: none."""
    if start.tzinfo is None or end.tzinfo is None:
        return [{"loc": ["body", "start"], "msg": "start and end need a UTC offset"}]
    if end <= start:
        return [{"loc": ["body", "end"], "msg": "end must be after start"}]
    return []
