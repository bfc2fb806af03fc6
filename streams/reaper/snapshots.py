"""The reaper's decisions about lease snapshots, as pure functions over one worker
incarnation's entry: what a snapshot does to it, and which held executions have expired.

A worker writes one `LeaseSnapshot` per transaction that claims, finishes or renews, listing
every run it holds by (executions partition, offset). The latest snapshot renews each listed
lease until its `at` plus the range's TTL; a run no longer listed was released (its outcome
went out in the same transaction). Expired refs are read back from `executions` and
redelivered (`leases.decide`); they are remembered while the worker still lists them, so a
stalled worker's late snapshot does not re-arm a lease that was already handed on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from kadence.clock import datetime_to_ms, ms_to_datetime
from kadence.models import Decision, ExecutionRevoked, HistoryRecord, LeaseSnapshot
from kadence.models.base import DEFAULT_POOL
from streams.reaper.leases import FORGET_AFTER_MS, LEASE_GRACE_MS

UNREAD_RETRY_MS = 1_000
"""An expired ref the reader could not tell about (its partition's leader down or moving) is
read again this much later."""
UNREAD_GIVE_UP_MS = 600_000
"""...until this long after its lease expired; then it is quarantined like one that is gone."""

PREFIX = b"~held/"
"""Store keys of snapshot entries: execution ids (the keys of lease events) never start so."""

Ref = tuple[int, int]
"""(executions partition, offset) of one held execution."""


def store_key(snapshot_key: str) -> bytes:
    return PREFIX + snapshot_key.encode()


def is_snapshot_key(key: bytes) -> bool:
    return key.startswith(PREFIX)


@dataclass
class Held:
    """One worker incarnation's latest held ranges and the refs already handed on."""

    worker: str
    at_ms: int
    ranges: list[tuple[int, int, int, int]] = field(default_factory=list)
    """(partition, first offset, count, expires_ms), as the latest snapshot listed them (minus
    ranges whose expiry was handled)."""
    done: dict[Ref, int] = field(default_factory=dict)
    """Refs redelivered, given up or quarantined -> when: never acted on again while listed."""
    pool: str = DEFAULT_POOL
    """The worker's pool: the refs are offsets of its executions topic."""

    def dump(self) -> bytes:
        body = {
            "w": self.worker,
            "t": self.at_ms,
            "h": self.ranges,
            "d": [[p, o, ms] for (p, o), ms in self.done.items()],
        }
        if self.pool != DEFAULT_POOL:  # entries stored before pools have none
            body["p"] = self.pool
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def load(cls, raw: bytes) -> Held:
        b = json.loads(raw)
        ranges = [(p, s, c, x) for p, s, c, x in b["h"]]
        done = {(p, o): ms for p, o, ms in b["d"]}
        return cls(b["w"], b["t"], ranges, done, b.get("p", DEFAULT_POOL))

    def lists(self, ref: Ref) -> bool:
        p, o = ref
        return any(rp == p and s <= o < s + c for rp, s, c, _ in self.ranges)


@dataclass(frozen=True, slots=True)
class SnapEntry:
    """The entry to store (None: delete it) and when its timer fires."""

    held: Held | None
    wake_ms: int | None = None


def is_stale(held: Held | None, snap: LeaseSnapshot) -> bool:
    """An older snapshot than the one stored (one incarnation writes in order; this guards
    against a replayed or reordered record)."""
    return held is not None and datetime_to_ms(snap.at) < held.at_ms


def on_snapshot(held: Held | None, snap: LeaseSnapshot, now_ms: int) -> SnapEntry:
    """The entry after a (not stale) snapshot: its ranges replace the previous ones, except
    those whose lease had already run out when it was written (leaving out an expired lease
    does not release it: its worker gave the run up, `lease_lost`, and it is redelivered);
    refs already handed on stay remembered only while the worker still lists them."""
    at = datetime_to_ms(snap.at)
    ranges = [(r.partition, r.start, r.count, at + r.ttl_ms) for r in snap.held]
    if held is not None:
        ranges += [r for r in held.ranges if r[3] <= at]
    after = Held(snap.worker_id, at, ranges, pool=snap.pool)
    if held is not None:
        after.done = {
            ref: ms
            for ref, ms in held.done.items()
            if after.lists(ref) and ms + FORGET_AFTER_MS > now_ms
        }
    return entry(after)


def entry(held: Held) -> SnapEntry:
    """Store `held` with its timer at the earliest expiry (plus grace), or when its oldest
    remembered ref may be forgotten; nothing held nor remembered deletes it."""
    if held.ranges:
        return SnapEntry(held, min(r[3] for r in held.ranges) + LEASE_GRACE_MS)
    if held.done:
        return SnapEntry(held, min(held.done.values()) + FORGET_AFTER_MS)
    return SnapEntry(None)


def expired(held: Held, now_ms: int) -> list[tuple[Ref, int]]:
    """(ref, expires_ms) of every held ref whose lease ran out a grace period ago and was not
    handed on already, in offset order."""
    out: list[tuple[Ref, int]] = []
    for p, start, count, expires in held.ranges:
        if expires + LEASE_GRACE_MS <= now_ms:
            out += [((p, o), expires) for o in range(start, start + count)]
    return [(ref, x) for ref, x in sorted(out) if ref not in held.done]


def settle(held: Held, handled: list[Ref], now_ms: int, unread: Sequence[Ref] = ()) -> SnapEntry:
    """After the timer: expired ranges are gone (every ref in them was handled now or
    before) except those with a ref still `unread` (read again UNREAD_RETRY_MS later),
    `handled` is remembered, and remembered refs past FORGET_AFTER_MS are dropped."""

    waiting = set(unread)

    def pending(r: tuple[int, int, int, int]) -> bool:
        return any((r[0], o) in waiting for o in range(r[1], r[1] + r[2]))

    held.ranges = [r for r in held.ranges if r[3] + LEASE_GRACE_MS > now_ms or pending(r)]
    held.done.update((ref, now_ms) for ref in handled)
    held.done = {ref: ms for ref, ms in held.done.items() if ms + FORGET_AFTER_MS > now_ms}
    after = entry(held)
    if unread and after.wake_ms is not None:  # an unread range is expired: its wake is past
        return SnapEntry(after.held, max(after.wake_ms, now_ms + UNREAD_RETRY_MS))
    return after


def unusable(
    ref: Ref, worker: str, why: str, record: object, now_ms: int
) -> tuple[str, HistoryRecord | None]:
    """Why an expired ref cannot be redelivered (for the log), and the quarantine history
    record when the record names a job."""
    p, o = ref
    reason = f"executions[{p}]@{o}, held by {worker}, expired and {why}: not redelivered"
    if not isinstance(record, ExecutionRevoked):
        return reason, None
    return reason, HistoryRecord(
        tenant=record.tenant,
        job_id=record.job_id,
        decision=Decision.quarantined,
        at=ms_to_datetime(now_ms),
        execution_id=record.execution_id,
        reason=reason[:2048],
    )
