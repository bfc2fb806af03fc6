"""How each input record changes the query view: definitions (and their tombstones) from
`schedules`, decisions from `history`, attempts from `outcomes`, dead letters from
`dead-letter`. Pure over the store's get/put, so it is tested without a broker."""

from __future__ import annotations

import base64
from datetime import datetime

from kadence.acceptance import Refusal, refusal
from kadence.clock import datetime_to_ms
from kadence.envelope import stored_definitions
from kadence.fired_series import runs_of
from kadence.models import (
    DeadLetter,
    Decision,
    ExecutionOutcome,
    HistoryRecord,
    ScheduleDefinition,
    split_job_key,
)
from kadence.models.records import ACTOR, KAFKA_ACTOR
from streams.views.store import Doc, ViewStore, backfill_key, dead_key, history_key, job_key


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat().replace("+00:00", "Z")


def definition_doc(definition: ScheduleDefinition) -> Doc:
    """The definition as JSON. A payload that is UTF-8 text stays text; any other bytes (the
    SDK sends bytes) are base64 with `"payload_encoding": "base64"` beside them."""
    doc: Doc = definition.model_dump(mode="json", exclude={"payload"})
    try:
        doc["payload"] = definition.payload.decode("utf-8")
    except UnicodeDecodeError:
        doc["payload"] = base64.b64encode(definition.payload).decode()
        doc["payload_encoding"] = "base64"
    return doc


def definition_of(shown: Doc) -> Doc:
    """A definition as `definition_doc` shows it, in the form `model_validate` takes."""
    doc = dict(shown)
    if doc.pop("payload_encoding", None) == "base64":
        doc["payload"] = base64.b64decode(doc["payload"])
    return doc


def shown_definition(shown: Doc) -> ScheduleDefinition:
    """The model of a definition the view shows: one the scheduler accepted, so read as stored
    (kadence.envelope.stored_definitions: a check added since cannot make it unreadable)."""
    with stored_definitions():
        return ScheduleDefinition.model_validate(definition_of(shown))


def apply_definition(
    store: ViewStore,
    key: bytes,
    definition: ScheduleDefinition | None,
    at: str,
    *,
    partition: int = 0,
    partitions: int = 1,
    source: str = "",
) -> Refusal | None:
    """A new version of a job, or (None) its tombstone, accepted by the scheduler's own rule
    (kadence/acceptance.py): a record the scheduler refuses is not shown. A refused one is
    remembered on the job (`refused`, with its `source` partition:offset), so the API can tell
    the writer that its write lost. Returns the refusal, if any."""
    try:
        tenant, job_id = split_job_key(key.decode())
    except (ValueError, UnicodeDecodeError):
        return Refusal("key_mismatch", f"record key {key!r} names no job")
    jk = job_key(tenant, job_id)
    old = store.get(jk)
    if definition is None:
        # the tombstone of the partition the job lives on (a delete reaches every partition,
        # docs/decisions/0003); one elsewhere must not delete a job (re)created on another
        where = str((old or {}).get("source") or "").partition(":")[0]
        if old is None or not where or not source or where == source.partition(":")[0]:
            store.put(jk, None)
        return None
    current = int(old["definition"]["version"]) if old is not None else None
    refused = refusal(key, partition, partitions, definition, current)
    if refused is not None:
        if old is not None and refused.code == "stale_version":
            note = {"source": source, "version": definition.version, "reason": refused.reason}
            store.put(jk, _homed({**old, "refused": note}, old, partition))
        return refused
    by = definition.actor or KAFKA_ACTOR
    doc = {
        "definition": definition_doc(definition),
        "paused": (old or {}).get("paused", False),
        "updated_at": at,
        "updated_by": by,
        "created_by": by if old is None else old.get("created_by"),
        "source": source,
        **{k: v for k, v in (old or {}).items() if k in ("completed", "runs_done", "paused_by")},
    }
    store.put(jk, _homed(doc, old, partition))
    return None


def _homed(doc: Doc, old: Doc | None, partition: int) -> Doc:
    """`doc` with `home`: the one partition every definition of the job came from, while that
    is so. A job the view sees a definition of on a second partition (its concurrency key
    changed, or an older copy is read late) has none from then on, and neither has a job
    the view stored before it kept `home`: a delete then needs a tombstone on every partition,
    since the schedulers of both may hold a copy (docs/decisions/0003). With `home`, one
    tombstone there deletes it (kadence/client.py `delete`)."""
    if old is None:
        return {**doc, "home": partition}
    out = {k: v for k, v in doc.items() if k != "home"}
    if old.get("home") == partition:
        out["home"] = partition
    return out


def apply_history(store: ViewStore, record: HistoryRecord, seq: str) -> None:
    """A decision; a `fired` record of a series of runs is shown as one decision per run."""
    runs = runs_of(record)
    for i, r in enumerate(runs):
        _apply_decision(store, r, seq if i == 0 else f"{seq}/{i:04d}")


def _apply_decision(store: ViewStore, r: HistoryRecord, seq: str) -> None:
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
    if ACTOR in r.details:
        event["actor"] = r.details[ACTOR]
    store.put(history_key(r.tenant, r.job_id, at_ms, seq), event)
    jk = job_key(r.tenant, r.job_id)
    job = store.get(jk)
    if job is not None and r.decision in (Decision.paused, Decision.resumed):
        job["paused"] = r.decision is Decision.paused
        job["paused_reason"] = r.reason if r.decision is Decision.paused else ""
        job["paused_by"] = r.details.get(ACTOR) if r.decision is Decision.paused else None
        store.put(jk, job)
    if job is not None and r.decision is Decision.fired and "runs_done" in (r.details or {}):
        # a job with max_runs: how many of its scheduled runs went out, up to which occurrence
        job["runs_done"] = [int(r.details["runs_done"]), datetime_to_ms(r.nominal_at or r.at)]
        store.put(jk, job)
    if job is not None and r.decision is Decision.completed:
        # which version ran out: the definition may be applied before or after this record
        job["completed"] = {"version": int((r.details or {}).get("version", 0)), "reason": r.reason}
        store.put(jk, job)
    rid = r.details.get("request_id") if r.details else None
    if rid and r.decision in (Decision.backfill_planned, Decision.backfill_progress):
        doc = {k: event[k] for k in ("at", "decision", "reason", "details")}
        store.put(backfill_key(r.tenant, r.job_id, rid), {**doc, "at_ms": at_ms})
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
        "throttled_s": r.throttled_ms / 1000,
        "error": None if r.error is None else r.error.model_dump(mode="json"),
    }
    if r.result is not None:  # what the attempt returned, as the API shows it
        event["result"] = r.result.shown()
    store.put(history_key(r.tenant, r.job_id, datetime_to_ms(r.finished_at), seq), event)
    if r.status.value == "succeeded":
        _mark_replayed(store, r.tenant, r.execution_id, "succeeded", r.finished_at)
    elif store.get(job_key(r.tenant, r.job_id)) is None:
        # a deleted job's replayed letter ran once and is not retried: the replay has ended,
        # and the letter may be replayed again
        _mark_replayed(store, r.tenant, r.execution_id, "dead", r.finished_at)


def apply_dead_letter(store: ViewStore, r: DeadLetter, seq: str, source: str = "") -> None:
    """A dead letter: in the job's history, and as the tenant's dead letter with `source`,
    where the dead-letter topic holds it (partition:offset), so a replay can read it back."""
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
            "source": source,
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
