"""Notifications: the webhook a job names to be told, in a person's channels, when it fails
for good (docs/execution.md, "Notifications")."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator

from kadence.models.base import Identifier, WireModel
from kadence.models.targets import RateLimit, http_url_parts


class NotifyEvent(StrEnum):
    dead_lettered = "dead_lettered"
    """A run of the job failed for good (after its retries) and was dead-lettered."""
    paused = "paused"
    """The job paused itself: `pause_after_failures` runs in a row failed."""
    circuit_opened = "circuit_opened"
    """A run of the job failed, and its failure opened the tenant's retry circuit."""


class NotifyFormat(StrEnum):
    json = "json"
    """Kadence's document: kind, tenant, job_id, event, execution_id, reason, error, at."""
    slack = "slack"
    """A Slack-compatible incoming-webhook body, `{"text": "..."}` (Mattermost, Teams'
    Slack-compatible connectors and most chat bridges take it too)."""


NOTIFY_RATE = RateLimit(per_second=1.0, burst=10)
"""The rate limit of a job's notifications when it names none: per destination, per tenant,
per worker (a storm of failures makes at most one call a second after a burst of 10)."""


class NotifyPolicy(WireModel):
    """POST a notification to `url` when one of the `on` failures happens to the job."""

    url: Annotated[str, Field(min_length=1, max_length=2048)]
    """An absolute http(s) URL without credentials. Called by the workers through the same
    address policy as HTTP targets (no private, loopback or metadata address unless the
    deployment allows it); the API refuses a URL whose host is such an address outright."""
    format: NotifyFormat = NotifyFormat.json
    """The body's shape."""
    secret_ref: Identifier | None = None
    """A signing secret of the tenant held by the workers: the body is signed as HTTP targets'
    (Standard Webhooks headers, connectors/http.py). None: unsigned."""
    on: Annotated[list[NotifyEvent], Field(min_length=1, max_length=3)] = Field(
        default_factory=lambda: list(NotifyEvent)
    )
    """Which failures notify (each at most once in the list). Default: all three."""
    rate_limit: RateLimit | None = None
    """Notifications of this tenant to the URL's scheme, host and port start at most this
    often, per worker; None: 1 a second, bursts of 10 (`NOTIFY_RATE`)."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        http_url_parts(url, "secret_ref")
        return url

    @field_validator("on")
    @classmethod
    def _once_each(cls, on: list[NotifyEvent]) -> list[NotifyEvent]:
        if len(set(on)) != len(on):
            raise ValueError("each event at most once")
        return on
