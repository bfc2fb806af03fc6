"""What the scheduler keeps per job, and how it is stored (RocksDB value, changelog record).

The definition is kept as its Avro single-object bytes, exactly as read, so writing the state
back never re-encodes it; the decoded definition and compiled schedule are cached beside it
for the lifetime of the object. Everything else is small JSON with a version number.

Stored forms (`STATE_VERSION`), all still read:

- v1: JSON, the definition in it as base64;
- v2: `KS\x02`, the definition's length (4 bytes) and its Avro bytes, then the JSON; every fire
  and outcome rewrote the definition, and `finished` held the last 1 000 applied outcomes;
- v3: `KS\x03` then the JSON only: the definition is stored once per version under its own
  key, `~def/<job key>` (stored.py: its own changelog record, deleted with the job); applied
  outcomes are a watermark plus a few exceptions (settled.py), and the nominal instants of
  `undispatched` and `backfilled` are stored as runs of equal steps;
- v4: `KS\x04`, as v3, but the `running` and `ahead` entries of the job's own scheduled
  executions (id `<key>@<nominal instant>`) are stored as runs of equal steps too, the job key
  once beside them (`key`): a per-second job dispatched 30 s ahead keeps ~60 of them, which
  were 4.9 KB written twice per fire, and are ~0.5 KB now (entries.py).

The JSON of v3 and v4 is written and read by orjson (a twelfth of `json`'s time; storing the
state was a sixth of the scheduler's CPU): compact, and UTF-8 where `json` wrote `\\u` escapes,
which either library reads back.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field, fields
from typing import Any

import orjson

from kadence.codec import Codec
from kadence.envelope import stored_definitions
from kadence.models import ScheduleDefinition
from kadence.notifications import MARKER
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.engine import CompiledSchedule
from streams.scheduler.entries import (
    AHEAD,
    RUNNING,
    Ahead,
    BackfillRun,
    Packed,
    Pending,
    Running,
    compact_from,
    expanded,
    key_of,
)

STATE_VERSION = 4  # the stored forms: see the module docstring
_V2_MAGIC = b"KS\x02"
V3_MAGIC = b"KS\x03"
V4_MAGIC = b"KS\x04"
SPLIT_MAGICS = (V3_MAGIC, V4_MAGIC)
"""Stored forms whose definition is under its own key."""
DEFINITION_PREFIX = b"~def/"
RECENT_LIMIT = 1000
"""Bounds on remembered request ids and undispatched occurrences per job."""
DEAD_LIMIT = 100
GAPS_LIMIT = 100
RUN_JSON_BYTES = 48
"""What one running entry adds to the stored state besides its execution id, at most."""
RUNNING_LIMIT = 1000
"""Runs of one job dispatched and not finished, at most. A trigger, backfill or replay that
would go past it is refused; a scheduled occurrence that finds it reached is skipped (history
says why). Runs count until their outcome arrives or their timeout and lease have passed."""


@dataclass(frozen=True)
class JobState:
    definition_bytes: bytes
    cursor_ms: int
    """Nominal instant of the last occurrence handled; the next is strictly after it."""
    created_cursor_ms: int
    """The first cursor: occurrences before it were never this job's to dispatch."""
    next_nominal_ms: int | None
    next_due_ms: int | None
    tzdb: str
    paused: bool = False
    paused_at_ms: int | None = None
    running: tuple[Running, ...] = ()
    buffered: tuple[Pending, ...] = ()
    retries: tuple[Pending, ...] = ()
    undispatched: tuple[int, ...] = ()
    """Recent nominal instants handled without firing (missed, skipped): backfill may fire them."""
    request_ids: tuple[str, ...] = ()
    backfilled: tuple[int, ...] = ()
    """Recent nominal instants fired by a backfill: a second backfill leaves them out."""
    finished: tuple[str, ...] = ()
    """`<execution id>#<attempt>` whose outcome was applied and that `settled_ms` does not cover:
    a duplicate outcome (a redelivered run that also finished, the reaper giving up on one that
    did) changes nothing (settled.py)."""
    settled_ms: int | None = None
    """Scheduled executions at or before this nominal instant, not live nor `unsettled`, have
    had their outcomes applied (settled.py)."""
    unsettled: tuple[str, ...] = ()
    """Scheduled executions that left `running` without an outcome (settled.py)."""
    dead: tuple[Pending, ...] = ()
    """Recent dead letters (the last DEAD_LIMIT), for ReplayDeadLetter."""
    ahead: tuple[Ahead, ...] = ()
    """Dispatched ahead of their due time, oldest first; dropped once due."""
    gaps: tuple[tuple[int, int], ...] = ()
    """Recent ranges (after, before) of an outage skipped without visiting each occurrence:
    every occurrence strictly inside was missed, so a backfill may fire it (GAPS_LIMIT)."""
    backfills: tuple[BackfillRun, ...] = ()
    """Backfills in progress, oldest first; only the first one steps."""
    payloads: tuple[tuple[str, bytes], ...] = ()
    """(execution id, payload) of runs triggered with a payload override, while they are in
    progress (running, awaiting a retry, or dead-lettered and replayable): their retries, dead
    letters and replays carry the run's payload, not the job's (`room_for_override`,
    `kept_payloads`)."""
    recheck_ms: int | None = None
    """With runs waiting in `buffered`: when to look again even if nothing wakes the job (the
    expiry of the runs they wait for, when those never report an outcome)."""
    early_ms: int = 0
    """The next scheduled occurrence may be dispatched this long before it is due (0: at the
    due time). Set by the logic from the dispatch-ahead setting and what the job is doing."""
    held_ms: int | None = None
    """Its due occurrences wait for the tenant's caps until then (tenant_limits.py): the job
    looks again at this instant, not at their due time. Kept for a minute after it passed
    (catchup.HELD_REMEMBERED_MS): the job waited recently."""
    fired: int = 0
    skipped: int = 0
    missed: int = 0
    runs_done: int = 0
    """Scheduled occurrences dispatched in the job's life (not triggers, backfills, retries or
    replays): what `max_runs` limits. Stored only when not 0."""
    failures_in_row: int = 0
    """Runs in a row that ended dead-lettered: what `pause_after_failures` counts. Stored only
    when not 0 (a scheduler of an earlier release reads every state of a job that uses neither
    limit)."""
    _definition: ScheduleDefinition | None = field(default=None, compare=False, repr=False)
    _compiled: CompiledSchedule | None = field(default=None, compare=False, repr=False)
    _definition_stored: bool = field(default=False, compare=False, repr=False)
    """Its `definition_bytes` are what its definition key holds (no need to write them)."""
    _packed: tuple[Packed | None, Packed | None] = field(
        default=(None, None), compare=False, repr=False
    )
    """`running` and `ahead` as last stored (this state's or an earlier one's): `dump_state`
    compacts from them (entries.compact_from)."""

    def definition(self, codec: Codec) -> ScheduleDefinition:
        if self._definition is None:
            with stored_definitions():  # accepted once: not refused by a later, newer check
                stored = codec.decode_as(self.definition_bytes, ScheduleDefinition)
            object.__setattr__(self, "_definition", stored)
        assert self._definition is not None
        return self._definition

    def runs_left(self, codec: Codec) -> int | None:
        """Scheduled occurrences the job may still dispatch under `max_runs` (None: no limit);
        runs waiting in the buffer count as dispatched."""
        limit = self.definition(codec).max_runs
        if limit is None:
            return None
        waiting = sum(1 for p in self.buffered if p.trigger == "schedule")
        return max(0, limit - self.runs_done - waiting)

    def compiled(self, codec: Codec) -> CompiledSchedule:
        if self._compiled is None:
            d = self.definition(codec)
            object.__setattr__(self, "_compiled", compile_schedule(d.schedule, d.key))
        assert self._compiled is not None
        return self._compiled

    def evolve(self, **changes: Any) -> JobState:
        """A copy with `changes`; keeps the decoded caches unless the definition changed (a
        caller that has the new definition decoded may pass it as `_definition`).
        It copies the instance's `__dict__` in one call (the class has no `__slots__` for this:
        a copy slot by slot took 2.7 µs, about a tenth of the scheduler's in-process time at
        six copies per execution; `dataclasses.replace` inspects the fields on every call)."""
        if "definition_bytes" in changes:
            changes = {
                "_definition": None,
                "_compiled": None,
                "_definition_stored": False,
                **changes,
            }
        if not _FIELD_NAMES.issuperset(changes):
            raise TypeError(f"JobState has no field {sorted(set(changes) - _FIELD_NAMES)}")
        new: JobState = _new(JobState)
        values = new.__dict__  # filled directly: the frozen `__setattr__` is not involved
        values.update(self.__dict__)
        values.update(changes)
        return new

    @property
    def definition_stored(self) -> bool:
        return self._definition_stored

    def payload_of(self, execution_id: str) -> bytes | None:
        """The run's own payload when it was triggered with an override, else None."""
        return next((p for e, p in self.payloads if e == execution_id), None)

    @property
    def wake_ms(self) -> int | None:
        """When the scheduler must next look at this job: the earliest retry due, the next
        backfill step, the next occurrence's due time (less `early_ms` when it may be
        dispatched ahead; a paused job wakes at it too, to record it skipped), or, with runs
        buffered, `recheck_ms`; held for the tenant's caps, `held_ms`."""
        candidates = [r.due_ms for r in self.retries]
        if self.buffered and self.recheck_ms is not None:
            candidates.append(self.recheck_ms)
        if self.backfills:
            candidates.append(self.backfills[0].wake_ms)
        if self.next_due_ms is not None:  # paused, it still wakes to record the skip
            due = self.next_due_ms - (0 if self.paused else self.early_ms)
            candidates.append(due if self.held_ms is None else max(due, self.held_ms))
        return min(candidates) if candidates else None


_FIELD_NAMES = frozenset(f.name for f in fields(JobState))
_new = object.__new__


def room_for_override(state: JobState, exec_id: str, payload: bytes, limit: int) -> bool:
    """Whether the state still fits `limit` bytes with this override kept, after dropping the
    memories that may be dropped, and with room for the job's runs at once to reach
    RUNNING_LIMIT with the longest ids this job can have: overrides are never dropped, so they
    must not be able to push a later write past the broker's limit."""
    more_runs = max(0, RUNNING_LIMIT - len(state.running) - 1)
    longest_id = len(exec_id.partition("@")[0]) + len("@manual:") + 128  # 128: a request id
    reserve = more_runs * (longest_id + RUN_JSON_BYTES)
    candidate = state.evolve(payloads=(*state.payloads, (exec_id, payload)))
    _, data = fit_state(candidate, limit - reserve)
    return len(data) <= limit - reserve


def kept_payloads(state: JobState) -> JobState:
    """Forget the overrides of runs no longer running, waiting (a retry, buffered) or
    dead-lettered. A notification's body (kept for its retries) stays until its notification
    ends (streams/scheduler/notify.py forgets it)."""
    if not state.payloads:
        return state
    live = {r.execution_id for r in state.running}
    live |= {p.execution_id for p in (*state.retries, *state.dead, *state.buffered)}
    kept = tuple(item for item in state.payloads if item[0] in live or MARKER in item[0])
    return state if kept == state.payloads else state.evolve(payloads=kept)


def remember(items: tuple[Any, ...], item: Any) -> tuple[Any, ...]:
    """Append to a bounded recent-items tuple."""
    return (*items, item)[-RECENT_LIMIT:]


_PLAIN = (
    "cursor_ms",
    "created_cursor_ms",
    "next_nominal_ms",
    "next_due_ms",
    "tzdb",
    "paused",
    "paused_at_ms",
    "request_ids",
    "fired",
    "skipped",
    "missed",
    "early_ms",
    "finished",
)


def _pending(p: Pending) -> list[object]:
    return [p.execution_id, p.nominal_ms, p.due_ms, p.attempt, p.trigger]


def active_runs(state: JobState, now_ms: int) -> int:
    """Runs that still count against `RUNNING_LIMIT` at `now_ms`."""
    return sum(1 for r in state.running if r.expires_ms > now_ms)


def at_running_limit(state: JobState, now_ms: int) -> bool:
    """Whether `RUNNING_LIMIT` runs of the job count at `now_ms` (no count while fewer are
    remembered at all: the common case costs nothing)."""
    return len(state.running) >= RUNNING_LIMIT and active_runs(state, now_ms) >= RUNNING_LIMIT


_TRIMMABLE = ("finished", "unsettled", "request_ids", "backfilled", "undispatched", "dead", "gaps")
"""Memories that only guard against repeats: the oldest may go when the state must shrink."""


def _newer_half(items: tuple[Any, ...]) -> tuple[Any, ...]:
    return items[len(items) // 2 :]


def fit_state(state: JobState, limit: int) -> tuple[JobState, bytes]:
    """The state and its stored form, with its oldest memories dropped (halving each in turn)
    until that form is at most `limit` bytes; unchanged when it fits. It may still not fit (a
    huge definition, a thousand runs): then the write is refused by the size check."""
    data = dump_state(state)
    for _ in range(12):
        if len(data) <= limit:
            break
        changes = {name: _newer_half(getattr(state, name)) for name in _TRIMMABLE}
        if all(len(v) == len(getattr(state, k)) for k, v in changes.items()):
            break
        state = state.evolve(**changes)
        data = dump_state(state)
    return state, data


def _steps(values: tuple[int, ...]) -> list[list[int]]:
    """`values` in order as runs `[first, step, count]` of equal steps (a paused per-second job's
    skipped instants are one run)."""
    out: list[list[int]] = []
    for v in values:
        if out:
            last = out[-1]
            if last[2] == 1:
                last[1], last[2] = v - last[0], 2
                continue
            if last[0] + last[1] * last[2] == v:
                last[2] += 1
                continue
        out.append([v, 0, 1])
    return out


def _unsteps(runs: list[list[int]]) -> tuple[int, ...]:
    return tuple(first + step * i for first, step, count in runs for i in range(count))


def dump_state(state: JobState) -> bytes:
    """The run state as stored under the job's key (v3): the definition is not in it."""
    body: dict[str, Any] = {name: getattr(state, name) for name in _PLAIN}
    body["undispatched"] = _steps(state.undispatched)
    body["backfilled"] = _steps(state.backfilled)
    if state.settled_ms is not None:
        body["settled_ms"] = state.settled_ms
    if state.unsettled:
        body["unsettled"] = state.unsettled
    key = key_of(state.running, state.ahead)
    was_running, was_ahead = state._packed
    body["running"] = running = compact_from(state.running, key, was_running)
    body["buffered"] = [_pending(p) for p in state.buffered]
    body["retries"] = [_pending(p) for p in state.retries]
    body["dead"] = [_pending(p) for p in state.dead]
    body["ahead"] = ahead = compact_from(state.ahead, key, was_ahead)
    if key is not None:
        body["key"] = key
        packed = ((key, state.running, running), (key, state.ahead, ahead))
        object.__setattr__(state, "_packed", packed)
    if state.gaps:
        body["gaps"] = [list(g) for g in state.gaps]
    if state.backfills:
        body["backfills"] = [b.dump() for b in state.backfills]
    if state.recheck_ms is not None:
        body["recheck_ms"] = state.recheck_ms
    if state.held_ms is not None:
        body["held_ms"] = state.held_ms
    if state.runs_done:
        body["runs_done"] = state.runs_done
    if state.failures_in_row:
        body["failures_in_row"] = state.failures_in_row
    if state.payloads:
        body["payloads"] = [[e, base64.b64encode(p).decode()] for e, p in state.payloads]
    return V4_MAGIC + orjson.dumps(body)


def load_state(data: bytes, definition: bytes | None = None) -> JobState:
    """Decode a stored run state. A v3 one needs its `definition` (the bytes under
    `definition_key`); without them the state loads with empty definition bytes (enough to
    read its run state, as tools reading the changelog do)."""
    stored = definition is not None
    key: str | None = None
    if data.startswith(SPLIT_MAGICS):
        body = orjson.loads(data[3:])
        body["undispatched"] = _unsteps(body["undispatched"])
        body["backfilled"] = _unsteps(body["backfilled"])
        body["unsettled"] = tuple(body.get("unsettled", ()))
        key = body.pop("key", None)
    elif data.startswith(_V2_MAGIC):
        size = int.from_bytes(data[3:7], "big")
        definition, stored = data[7 : 7 + size], False
        body = json.loads(data[7 + size :])
        body.pop("v")
    else:
        body = json.loads(data)
        version = body.pop("v")
        if version != 1:
            raise ValueError(f"scheduler state version {version} is not readable by this build")
        definition, stored = base64.b64decode(body.pop("definition")), False
    body["definition_bytes"] = definition or b""
    body["_definition_stored"] = stored
    body["running"] = expanded(body["running"], key, RUNNING)
    body["buffered"] = tuple(Pending(*p) for p in body["buffered"])
    body["retries"] = tuple(Pending(*p) for p in body["retries"])
    body["dead"] = tuple(Pending(*p) for p in body.get("dead", ()))
    body["finished"] = tuple(body.get("finished", ()))
    body["ahead"] = expanded(body.get("ahead", ()), key, AHEAD)  # absent before dispatch-ahead
    body["gaps"] = tuple((a, b) for a, b in body.get("gaps", ()))  # absent before backfill v2
    body["backfills"] = tuple(BackfillRun(*b) for b in body.get("backfills", ()))
    body["payloads"] = tuple((e, base64.b64decode(p)) for e, p in body.get("payloads", ()))
    for name in ("undispatched", "request_ids", "backfilled"):
        body[name] = tuple(body[name])
    return JobState(**body)
