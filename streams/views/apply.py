"""How each input record changes the query view: definitions (and their tombstones) from
`schedules`, decisions from `history`, attempts from `outcomes`, dead letters from
`dead-letter`. Pure over the store's get/put, so it is tested without a broker."""

from __future__ import annotations

from datetime import datetime

from kadence.clock import datetime_to_ms
from kadence.models import (
    DeadLetter,
    Decision,
    ExecutionOutcome,
    HistoryRecord,
    ScheduleDefinition,
    split_job_key,
)
from streams.views.store import Doc, ViewStore, dead_key, history_key, job_key


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat().replace("+00:00", "Z")


def apply_definition(
    store: ViewStore, key: str, definition: ScheduleDefinition | None, at: str
) -> None:
    """A new version of a job, or (None) its tombstone."""
    try:
        tenant, job_id = split_job_key(key)
    except ValueError:
        return
    jk = job_key(tenant, job_id)
    if definition is None:
        store.put(jk, None)
        return
    old = store.get(jk) or {}
    store.put(
        jk,
        {
            "definition": definition.model_dump(mode="json"),
            "paused": old.get("paused", False),
            "updated_at": at,
        },
    )


def apply_history(store: ViewStore, r: HistoryRecord, seq: str) -> None:
    at_ms = datetime_to_ms(r.at)
    event: Doc = {
        "kind": "decision",
        "at": _iso(r.at),
        "decision": r.decision.value,
        "execution_id": r.execution_id,
        "nominal_at": _iso(r.nominal_at),
        "due_at": _iso(r.due_at),
        "attempt": r.attempt,
        "delivery": r.delivery,
        "reason": r.reason,
        "error": None if r.error is None else r.error.model_dump(mode="json"),
        "details": r.details,
    }
    store.put(history_key(r.tenant, r.job_id, at_ms, seq), event)
    jk = job_key(r.tenant, r.job_id)
    job = store.get(jk)
    if job is not None and r.decision in (Decision.paused, Decision.resumed):
        job["paused"] = r.decision is Decision.paused
        job["paused_reason"] = r.reason if r.decision is Decision.paused else ""
        store.put(jk, job)
    if r.execution_id and r.decision is Decision.fired:
        _mark_replayed(store, r.tenant, r.execution_id, "replayed", r.at)


def apply_outcome(store: ViewStore, r: ExecutionOutcome, seq: str) -> None:
    lateness_s = (datetime_to_ms(r.started_at) - datetime_to_ms(r.due_at)) / 1000
    event: Doc = {
        "kind": "outcome",
        "at": _iso(r.finished_at),
        "execution_id": r.execution_id,
        "status": r.status.value,
        "attempt": r.attempt,
        "delivery": r.delivery,
        "worker_id": r.worker_id,
        "nominal_at": _iso(r.nominal_at),
        "due_at": _iso(r.due_at),
        "started_at": _iso(r.started_at),
        "finished_at": _iso(r.finished_at),
        "lateness_s": round(lateness_s, 3),
        "error": None if r.error is None else r.error.model_dump(mode="json"),
    }
    store.put(history_key(r.tenant, r.job_id, datetime_to_ms(r.finished_at), seq), event)
    if r.status.value == "succeeded":
        _mark_replayed(store, r.tenant, r.execution_id, "succeeded", r.finished_at)


def apply_dead_letter(store: ViewStore, r: DeadLetter, seq: str) -> None:
    ex = r.execution
    doc: Doc = {
        "kind": "dead_letter",
        "at": _iso(r.dead_lettered_at),
        "execution_id": ex.execution_id,
        "tenant": ex.tenant,
        "job_id": ex.job_id,
        "reason": r.reason.value,
        "attempt": ex.attempt,
        "nominal_at": _iso(ex.nominal_at),
        "due_at": _iso(ex.due_at),
        "error": None if r.last_error is None else r.last_error.model_dump(mode="json"),
    }
    store.put(history_key(ex.tenant, ex.job_id, datetime_to_ms(r.dead_lettered_at), seq), doc)
    dk = dead_key(ex.tenant, ex.execution_id)
    old = store.get(dk) or {}
    store.put(
        dk,
        {
            **doc,
            "state": "dead",
            "replays": old.get("replays", 0),
            "deaths": old.get("deaths", 0) + 1,
        },
    )


def _mark_replayed(
    store: ViewStore, tenant: str, execution_id: str, state: str, at: datetime
) -> None:
    dk = dead_key(tenant, execution_id)
    dead = store.get(dk)
    if dead is None or dead["state"] == "succeeded":
        return
    died = datetime.fromisoformat(dead["at"].replace("Z", "+00:00"))
    if datetime_to_ms(at) <= datetime_to_ms(died):
        return  # an event from before it died
    replays = dead.get("replays", 0) + (1 if state == "replayed" and dead["state"] == "dead" else 0)
    store.put(dk, {**dead, "state": state, "state_at": _iso(at), "replays": replays})
