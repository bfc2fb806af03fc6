"""One step of the scheduler's domain: what it knows (`Facts`), what it decides (`Effects`),
and `settle`, which ends every step.

A step is a pure function (job state, input, facts) -> effects. No Kafka, no clock, no storage:
the processor feeds inputs in and writes what comes out, all inside one transaction. That is
what makes fire-and-advance atomic and these rules testable on a fake clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from itertools import compress
from operator import attrgetter
from typing import Any

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import Decision, HistoryRecord, OverlapPolicy, TriggerKind, WireModel
from kadence.models.base import IDENT_RE
from kadence.quick_frozen import quick_init
from streams.scheduler.breaker import DEFAULTS, Breaker, BreakerConfig, Gate
from streams.scheduler.entries import Ahead
from streams.scheduler.state import JobState
from streams.scheduler.tenant_limits import TenantLoad

HISTORY_REASON_CHARS = 2048
"""A history record's reason is cut to this many characters (the wire limit)."""


class Sink(StrEnum):
    executions = "executions"
    history = "history"
    dead_letter = "dead_letter"
    schedules = "schedules"
    """Only `Delete`: a job deleting itself (delete_after_completion)."""
    control = "control"
    """Only `Routed`: a chain link's trigger, on `scheduler-control` (chaining.py)."""


@dataclass(frozen=True, slots=True)
class Delete:
    """The tombstone of a job's definition, on the job's own partition of `schedules`: read
    back by this scheduler as any delete, and by the query view (and compaction drops the
    definition)."""

    key: str


@dataclass(frozen=True, slots=True)
class Routed:
    """A command for a job that may live on another partition: `route` (the job's routing key)
    picks the partition, the command's own key is the record's key."""

    record: WireModel
    route: str


@dataclass(frozen=True, slots=True)
class Emit:
    sink: Sink
    record: WireModel | Delete | Routed
    pool: str | None = None
    """An ExecutionRevoked's worker pool (its job's target's), whose executions topic it goes
    on; an ExecutionRequested names its own (`target.pool`)."""


class Refused(Exception):  # noqa: N818 - a decision, not a failure
    """The input is not applied; the processor writes `out` (history saying why, when the job
    should know), then a `rejected` record with this reason."""

    def __init__(self, code: str, reason: str, out: list[Emit] | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.out = out or []


@dataclass(frozen=True, slots=True)
class Facts:
    """What a step knows besides the job's state and its input."""

    now_ms: int
    codec: Codec
    tzdb: str
    misfire_grace_ms: int = 30_000
    """An occurrence noticed later than this after its due time is late: the missed policy
    decides whether it still fires."""
    group_busy: bool = False
    """Another job of this job's concurrency group is running."""
    group_until_ms: int = 0
    """When the other jobs' runs in the group have all expired, at the latest (0: none)."""
    group_turn: bool = True
    """No other job of the group waits before this one (the group's waiting line)."""
    breaker: Breaker = field(default_factory=Breaker)
    """The tenant's retry circuit breaker as stored (for an outcome: the outcome's tenant)."""
    breaker_cfg: BreakerConfig = DEFAULTS
    state_limit: int = 999_000
    """Bytes a job's stored state may take (the broker's record limit less key and framing)."""
    backfill_budget: int = 1_000_000
    """Backfill runs the job's tenant may still start in this second (the scheduler's pace)."""
    ahead_ms: int = 0
    """Dispatch scheduled occurrences up to this long before they are due, when the decision
    to fire cannot depend on what happens until then (see `may_go_early`)."""
    tenant: TenantLoad = field(default_factory=TenantLoad)
    """The job's tenant's caps on this partition and what it used of them (tenant_limits)."""

    @property
    def gate(self) -> Gate:
        """What the tenant's breaker lets through now: whether retries may fire."""
        return self.breaker.gate(self.now_ms, self.breaker_cfg)


@quick_init
@dataclass(frozen=True, slots=True)
class Shot:
    """One execution to dispatch now."""

    execution_id: str
    nominal_ms: int
    due_ms: int
    trigger: TriggerKind
    attempt: int = 1
    payload: bytes | None = None
    caused_by: str | None = None
    """The run whose end triggered this one through a chain link (chaining.py)."""


URGENT_WITHIN_MS = 1_000
"""A run due sooner than this is made visible at once; one sent further ahead (the dispatch
look-ahead) may wait for the runtime's commit interval."""
REFILL_WHEN_LEFT = 4
"""A job with runs dispatched ahead wakes to refill its look-ahead once the last of them is
this part of the look-ahead from due (a quarter: 7.5 s of the default 30 s), so a per-second
job sends 22 runs per wake. A wake costs a state read, a fold of the successes that waited
and a state write whatever it sends: at half the window (15 runs a wake, until 0.21.0) the
scheduler's firing took 24-29 µs an execution in `bench.scheduler_profile --shape cron
--target kafka`, at a quarter 20-21. The runs left cover a scheduler's take-over (6-7 s with
the default 6 s session timeout, docs/benchmarks.md k7) with no run late."""


@dataclass
class Effects:
    """What one step decided: the job's new state (None: delete it) and the records to write."""

    state: JobState | None
    out: list[Emit] = field(default_factory=list)
    missed_listed: int = 0
    missed_unlisted: int = 0
    probe: str | None = None
    """A retry fired as the tenant breaker's half-open probe."""
    dead_delta: int = 0
    """Dead letters added (written) minus removed (replayed) by this step."""
    breaker: Breaker | None = None
    """The tenant's breaker after this step, when the step changed it: to be written."""
    breaker_change: str | None = None
    """What the change did to the circuit ("opened", "closed"), for the log."""
    backfill_used: int = 0
    """Backfill runs this step fired (taken from the tenant's budget)."""
    scheduled: dict[int, int] = field(default_factory=dict)
    """Scheduled runs this step fired, per second of due time (taken from the tenant's cap)."""
    started: int = 0
    """Runs this step fired (of any trigger): in progress until their outcome."""

    urgent: bool = False
    """A run went out due within `URGENT_WITHIN_MS`: commit at the end of the turn, not at the
    runtime's commit interval, or it starts late."""

    def history(self, state: JobState, facts: Facts, decision: Decision, **kw: object) -> None:
        """A history record of the job; a `reason` longer than a record holds is cut (it
        quotes a target's error, which may be twice that long)."""
        d = state.definition(facts.codec)
        reason = kw.get("reason")
        if isinstance(reason, str) and len(reason) > HISTORY_REASON_CHARS:
            kw["reason"] = reason[:HISTORY_REASON_CHARS]
        self.out.append(
            Emit(
                Sink.history,
                HistoryRecord(
                    tenant=d.tenant,
                    job_id=d.job_id,
                    decision=decision,
                    at=ms_to_datetime(facts.now_ms),
                    **kw,
                ),
            )
        )


def keyed_history(key: bytes | None, decision: Decision, reason: str, now_ms: int) -> Emit | None:
    """A history record for the job a record key names, None when the key names no job (then
    the `rejected` record is all there is)."""
    tenant, _, job_id = (key or b"").decode(errors="replace").partition("/")
    if not (IDENT_RE.fullmatch(tenant) and IDENT_RE.fullmatch(job_id)):
        return None
    record = HistoryRecord(
        tenant=tenant,
        job_id=job_id,
        decision=decision,
        at=ms_to_datetime(now_ms),
        reason=reason[:HISTORY_REASON_CHARS],
    )
    return Emit(Sink.history, record)


def settle(effects: Effects, facts: Facts) -> Effects:
    """Every public step ends here: drop look-ahead entries that are now due, and decide
    whether the job's next occurrence may go out early (that sets its wake time): a look-ahead
    before it is due, or, while runs dispatched ahead are still waiting, once the last of them
    is a quarter of a look-ahead from due (`REFILL_WHEN_LEFT`), whichever is later. Then it
    dispatches all it may (`firing._dispatch_ahead`): a per-second job with 30 s of look-ahead
    fires 22 runs per wake, with one state write, not one per run; a job whose runs are further
    apart than three quarters of a look-ahead still has each go out a whole look-ahead before
    it is due."""
    state = effects.state
    if state is not None:
        ahead = state.ahead
        due = sum(map(facts.now_ms.__ge__, map(_DUE, ahead)))  # in C: ~30 at every step
        if due:
            ahead = tuple(compress(ahead, map(facts.now_ms.__lt__, map(_DUE, ahead))))
        early = early_after(state, ahead, facts)
        if due or early != state.early_ms:
            effects.state = state.evolve(ahead=ahead, early_ms=early)
    return effects


def early_after(state: JobState, ahead: tuple[Ahead, ...], facts: Facts) -> int:
    """The `early_ms` `settle` gives `state` once its look-ahead entries are `ahead`."""
    early = facts.ahead_ms if may_go_early(state, facts) else 0
    if early and ahead and state.next_due_ms is not None:  # refill once a quarter is left
        left = facts.ahead_ms // REFILL_WHEN_LEFT
        early = min(early, state.next_due_ms - (ahead[-1].due_ms - left))
    return early


_DUE = attrgetter("due_ms")


def may_go_early(state: JobState, facts: Facts) -> bool:
    """Whether the next scheduled occurrence may be dispatched before it is due.

    Only when nothing between now and its due time can change the decision to fire it: not
    paused, no concurrency group, nothing buffered, room in the tenant's caps, and either
    overlap=allow or no run active.
    (Manual triggers and retries ignore the overlap policy anyway.) Otherwise it waits for the
    due time and the normal checks.
    """
    if facts.ahead_ms <= 0 or state.paused or state.next_due_ms is None or state.buffered:
        return False
    if state.held_ms is not None or facts.tenant.why_not(state.next_due_ms, {}, 0, mine=False):
        return False  # the tenant's caps decide at the due time
    d = state.definition(facts.codec)
    if d.concurrency_key:
        return False
    return d.overlap is OverlapPolicy.allow or not busy(state, facts)


def busy(state: JobState, facts: Facts) -> bool:
    """A run of this job, or of another job of its concurrency group, is active."""
    return facts.group_busy or any(r.expires_ms > facts.now_ms for r in state.running)


def grouped(state: JobState, facts: Facts) -> bool:
    """The job belongs to a concurrency group: one run of the group at a time."""
    return state.definition(facts.codec).concurrency_key is not None


def group_blocked(state: JobState, facts: Facts) -> bool:
    """A run of this grouped job may not start now: the group runs one (this job's or
    another's), or another job of the group waits first."""
    return grouped(state, facts) and (busy(state, facts) or not facts.group_turn)


def free_at(state: JobState, facts: Facts) -> int:
    """When the runs this job waits for have all expired at the latest (a run that never
    reports frees its slot then); never earlier than a second from now."""
    own = [r.expires_ms for r in state.running if r.expires_ms > facts.now_ms]
    return max([facts.now_ms + 1_000, facts.group_until_ms, *own])


def advance_to(state: JobState, cursor_ms: int, facts: Facts, **changes: Any) -> JobState:
    """Move the cursor to `cursor_ms`; the next occurrence is the first one after it (none
    once the job has dispatched its `max_runs`). `changes`: other fields changed in the same
    copy (none that the next occurrence depends on)."""
    occ = state.compiled(facts.codec).next_after(cursor_ms)
    if occ is not None and state.runs_left(facts.codec) == 0:
        occ = None
    return state.evolve(
        cursor_ms=cursor_ms,
        next_nominal_ms=occ.nominal_ms if occ else None,
        next_due_ms=occ.due_ms if occ else None,
        tzdb=facts.tzdb,
        **changes,
    )
