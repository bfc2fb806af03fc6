"""Notifications' identities and bodies (docs/execution.md, "Notifications").

A notification runs as an execution of its job with trigger `notification` and an execution id
`<job key>@notify:<event>-<32 hex digits>`, derived from the failing run's outcome (its
execution id, attempt and end) and the event: an outcome applied again (a scheduler that
crashed before its commit) sends the same notification, which the receiver can drop by its
`webhook-id`. The marker keeps it apart from the job's runs: its outcome is never retried as a
run, dead-lettered, counted in the tenant's circuit, chained, or notified about."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from kadence.headers import iso_utc
from kadence.models import ErrorInfo, NotifyEvent, NotifyFormat

MARKER = "@notify:"
NOTIFY_ATTEMPTS = 3
"""Calls of one notification at most (a retryable failure is tried again after a backoff)."""
NOTIFY_TIMEOUT_MS = 10_000
NOTIFY_LEASE_MS = 30_000
NOTIFY_BACKOFF_MS = 2_000
"""The wait before the second call; each further call waits four times longer."""
REASON_CHARS = 1024
"""A reason or error message in a body is cut to this many characters: a body stays small
(well under 8 KiB) whatever the failure said."""


def notification_id(
    job_key: str, failing: str, attempt: int, ended_ms: int, event: NotifyEvent
) -> str:
    """The execution id of the notification of `event` caused by the outcome of attempt
    `attempt` of run `failing`, which ended at `ended_ms`."""
    seed = f"{failing}\n{attempt}\n{ended_ms}\n{event.value}".encode()
    return f"{job_key}{MARKER}{event.value}-{hashlib.blake2b(seed, digest_size=16).hexdigest()}"


def is_notification(execution_id: str) -> bool:
    return MARKER in execution_id


def notification_body(
    fmt: NotifyFormat,
    *,
    tenant: str,
    job_id: str,
    event: NotifyEvent,
    execution_id: str,
    reason: str,
    error: ErrorInfo | None,
    at: datetime,
) -> bytes:
    """The JSON body POSTed: Kadence's document, or Slack's `{"text": ...}`."""
    reason = _cut(reason)
    if fmt is NotifyFormat.slack:
        text = f"Kadence: job {tenant}/{job_id} {_WHAT[event]} (run {execution_id}): {reason}"
        return _dumps({"text": text})
    doc: dict[str, Any] = {
        "kind": "kadence.notification",
        "tenant": tenant,
        "job_id": job_id,
        "event": event.value,
        "execution_id": execution_id,
        "reason": reason,
        "error": None
        if error is None
        else {"type": error.type[:256], "message": _cut(error.message), "code": error.code},
        "at": iso_utc(at),
    }
    return _dumps(doc)


_WHAT = {
    NotifyEvent.dead_lettered: "had a run dead-lettered",
    NotifyEvent.paused: "paused itself after failures",
    NotifyEvent.circuit_opened: "opened its tenant's retry circuit",
}


def _cut(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def _dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
