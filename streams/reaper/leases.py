"""The reaper's decisions, as pure functions over one execution's lease entry: what a lease
event does to it, and what happens when its lease expires (redeliver, or give up at the cap).

No Kafka, no clock, no storage here: the processor feeds events and timers in and writes what
comes out, inside the runtime's transaction.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from enum import StrEnum

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import (
    REDELIVERY_CAP_ERROR,
    Decision,
    ErrorInfo,
    ExecutionOutcome,
    ExecutionRequested,
    HistoryRecord,
    LeaseEvent,
    LeaseEventKind,
    OutcomeStatus,
    TriggerKind,
)
from kadence.models.base import IDENT_RE

LEASE_GRACE_MS = 2_000
"""Waited past a lease's expiry before acting: room for clock skew between worker and reaper."""
FORGET_AFTER_MS = 86_400_000
"""How long a redelivered or given-up execution is remembered, to ignore its stale events."""
REAPER_ID = "reaper"
"""The worker id on the outcomes the reaper writes."""


@dataclass
class Lease:
    delivery: int
    worker: str
    expires_ms: int
    execution: bytes | None
    """The execution's Avro bytes, from the `acquired` event."""
    active: bool = True
    """False once redelivered or given up: only remembered to ignore stale events."""

    def dump(self) -> bytes:
        body = {
            "d": self.delivery,
            "w": self.worker,
            "x": self.expires_ms,
            "a": self.active,
            "e": base64.b64encode(self.execution).decode() if self.execution else None,
        }
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def load(cls, raw: bytes) -> Lease:
        b = json.loads(raw)
        execution = base64.b64decode(b["e"]) if b["e"] else None
        return cls(b["d"], b["w"], b["x"], execution, b["a"])


@dataclass(frozen=True, slots=True)
class Entry:
    """The lease entry to store (None: delete it) and when its timer fires."""

    lease: Lease | None
    wake_ms: int | None = None


def is_stale(lease: Lease | None, event: LeaseEvent, codec: Codec) -> bool:
    """An event of an older delivery than the current one (a worker paused past its lease), or
    of the delivery already redelivered or given up: it changes nothing. Not so the `acquired`
    of a run dispatched again after this one (a replay of its dead letter: same execution id,
    delivery 1): that is a new run, to be guarded like any (it was ignored for a day, the
    reaper remembering the run it gave up on)."""
    if lease is None or _dispatched_again(lease, event, codec):
        return False
    return event.delivery < lease.delivery or (
        not lease.active and event.delivery == lease.delivery
    )


def _dispatched_again(lease: Lease, event: LeaseEvent, codec: Codec) -> bool:
    if event.event is not LeaseEventKind.acquired or event.execution is None:
        return False
    if lease.execution is None:
        return False
    before = codec.decode_as(lease.execution, ExecutionRequested)
    return event.execution.dispatched_at > before.dispatched_at


def on_event(lease: Lease | None, event: LeaseEvent, codec: Codec) -> Entry:
    """The entry after a (not stale) lease event: released forgets it; renewed extends it;
    acquired starts a delivery. Its timer fires a grace period after the lease expires."""
    if event.event is LeaseEventKind.released:
        return Entry(None)
    expires = int(event.expires_at.timestamp() * 1000)
    if event.event is LeaseEventKind.renewed and lease is not None:
        lease = replace(lease, expires_ms=max(lease.expires_ms, expires), worker=event.worker_id)
    else:
        execution = (
            codec.encode(event.execution)
            if event.execution is not None
            else (lease.execution if lease is not None else None)
        )
        lease = Lease(event.delivery, event.worker_id, expires, execution)
    return Entry(lease, lease.expires_ms + LEASE_GRACE_MS)


class Verdict(StrEnum):
    wait = "wait"
    """Not expired yet (renewed since the timer was set): nothing to do."""
    forget = "forget"
    """An inactive entry remembered long enough: delete it."""
    unknown = "unknown"
    """Expired, but the execution was never seen (no `acquired` event): delete it."""
    redeliver = "redeliver"
    give_up = "give_up"


@dataclass(frozen=True, slots=True)
class Expiry:
    """What an expiry timer decided. On redeliver or give up: the execution, what to write
    (the redelivery and its history record, or the cap's `failed` outcome), and the entry to
    remember until it is forgotten."""

    verdict: Verdict
    execution: ExecutionRequested | None = None
    redelivery: ExecutionRequested | None = None
    history: HistoryRecord | None = None
    outcome: ExecutionOutcome | None = None
    entry: Entry = Entry(None)


def on_timer(lease: Lease, now_ms: int, redelivery_cap: int, codec: Codec) -> Expiry:
    """A lease entry's timer fired: once expired (plus the grace period) the run goes out again
    or is given up (`decide`), and the entry is remembered to ignore stale events."""
    if not lease.active:
        return Expiry(Verdict.forget)
    if lease.expires_ms + LEASE_GRACE_MS > now_ms:
        return Expiry(Verdict.wait)
    if lease.execution is None:
        return Expiry(Verdict.unknown)
    ex = codec.decode_as(lease.execution, ExecutionRequested)
    remembered = Entry(replace(lease, active=False), now_ms + FORGET_AFTER_MS)
    expiry = decide(
        ex,
        delivery=lease.delivery,
        worker=lease.worker,
        expires_ms=lease.expires_ms,
        now_ms=now_ms,
        redelivery_cap=redelivery_cap,
    )
    return replace(expiry, entry=remembered)


def decide(
    ex: ExecutionRequested,
    *,
    delivery: int,
    worker: str,
    expires_ms: int,
    now_ms: int,
    redelivery_cap: int,
) -> Expiry:
    """The lease of `delivery` of `ex` expired: below the cap the run goes out again
    (`delivery + 1`, trigger `redelivery`); at the cap a non-retryable `failed` outcome tells
    the scheduler to dead-letter it (a job that kills every worker that runs it stops there)."""
    if delivery < redelivery_cap:
        again = ex.model_copy(
            update={
                "delivery": delivery + 1,
                "trigger": TriggerKind.redelivery,
                "dispatched_at": ms_to_datetime(now_ms),
            }
        )
        why = (
            f"lease of delivery {delivery} (worker {worker}) expired at "
            f"{ms_to_datetime(expires_ms).isoformat()} without an outcome"
        )
        history = HistoryRecord(
            tenant=ex.tenant,
            job_id=ex.job_id,
            decision=Decision.redelivered,
            at=ms_to_datetime(now_ms),
            execution_id=ex.execution_id,
            nominal_at=ex.nominal_at,
            due_at=ex.due_at,
            attempt=ex.attempt,
            delivery=delivery + 1,
            reason=why,
        )
        return Expiry(Verdict.redeliver, ex, redelivery=again, history=history)
    message = (
        f"the lease expired on {delivery} deliveries in a row (cap "
        f"{redelivery_cap}): the job may be killing or hanging its workers"
    )
    outcome = ExecutionOutcome(
        execution_id=ex.execution_id,
        tenant=ex.tenant,
        job_id=ex.job_id,
        attempt=ex.attempt,
        delivery=delivery,
        worker_id=REAPER_ID,
        status=OutcomeStatus.failed,
        retryable=False,
        error=ErrorInfo(type=REDELIVERY_CAP_ERROR, message=message),
        nominal_at=ex.nominal_at,
        due_at=ex.due_at,
        started_at=ms_to_datetime(now_ms),
        finished_at=ms_to_datetime(now_ms),
    )
    return Expiry(Verdict.give_up, ex, outcome=outcome)


def quarantined(key: bytes, exc: Exception, now_ms: int) -> HistoryRecord | None:
    """The history record saying an expired lease could not be handled and needs an operator;
    None when the execution id names no job."""
    job_key = key.decode(errors="replace").partition("@")[0]
    tenant, _, job_id = job_key.partition("/")
    if not (IDENT_RE.fullmatch(tenant) and IDENT_RE.fullmatch(job_id)):
        return None
    return HistoryRecord(
        tenant=tenant,
        job_id=job_id,
        decision=Decision.quarantined,
        at=ms_to_datetime(now_ms),
        execution_id=key.decode(errors="replace")[:400],
        reason=f"the reaper could not handle this expired lease: {type(exc).__name__}: {exc}"[
            :2048
        ],
    )
