"""Backfill: run again the occurrences of a past range that were never dispatched.

One function decides what a backfill runs, `plan`, on one set of facts, `DispatchFacts`: the
scheduler calls it on the job's state when it applies a Backfill, and the API's dry run calls it
on the same facts, which the scheduler publishes for the window in a `backfill_planned` history
record when asked for a dry run. A real backfill is paced: each step fires at most `STEP_RUNS`
runs (and what the tenant's per-second budget allows), remembers where it stopped, and wakes the
job again until the window is done; progress goes to history as runs fired, not commands sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from kadence.base36 import base36
from kadence.clock import ms_to_datetime
from kadence.models import Backfill, Decision, TriggerKind
from kadence.timeengine.engine import CompiledSchedule, Occurrence
from kadence.timeengine.identity import execution_id
from streams.scheduler.dispatch import fire
from streams.scheduler.entries import BackfillRun
from streams.scheduler.state import RUNNING_LIMIT, JobState, active_runs, remember
from streams.scheduler.step import Effects, Facts, Refused, Shot, free_at, group_blocked, grouped

STEP_RUNS = 200
"""Runs one backfill step fires at most (one step is part of one transaction)."""
STEP_SCAN = 2_000
"""Occurrences one step looks at at most (already dispatched ones included): a window of a
per-second job is walked over several steps, never in one."""
QUEUED_LIMIT = 8
"""Backfills of one job waiting or in progress at once; more are refused with the reason."""
FACTS_LISTED = 1_000
"""A dry run publishes at most this many remembered instants of each kind for the window."""


@dataclass(frozen=True, slots=True)
class DispatchFacts:
    """What the scheduler knows about which occurrences of a job were dispatched.

    An occurrence with nominal instant n was dispatched when a backfill fired it, or when the
    job's cursor passed it (created_cursor < n <= cursor) and it was not handled without firing
    (missed, skipped, or inside a gap: a range of an outage skipped without visiting each).
    """

    cursor_ms: int
    created_cursor_ms: int
    undispatched: frozenset[int] = frozenset()
    backfilled: frozenset[int] = frozenset()
    gaps: tuple[tuple[int, int], ...] = ()
    """(after, before): every occurrence strictly between them was missed."""

    @classmethod
    def of(cls, state: JobState) -> DispatchFacts:
        return cls(
            state.cursor_ms,
            state.created_cursor_ms,
            frozenset(state.undispatched),
            frozenset(state.backfilled),
            state.gaps,
        )

    def dispatched(self, nominal_ms: int) -> bool:
        if nominal_ms in self.backfilled:
            return True
        if not self.created_cursor_ms < nominal_ms <= self.cursor_ms:
            return False
        if nominal_ms in self.undispatched:
            return False
        return not any(a < nominal_ms < b for a, b in self.gaps)

    def within(self, start_ms: int, end_ms: int) -> DispatchFacts:
        """The same facts, keeping only what concerns [start, end) (what a dry run publishes)."""

        def inside(items: frozenset[int]) -> frozenset[int]:
            return frozenset(sorted(n for n in items if start_ms <= n < end_ms)[:FACTS_LISTED])

        gaps = tuple(g for g in self.gaps if g[0] < end_ms and g[1] > start_ms)
        return DispatchFacts(
            self.cursor_ms,
            self.created_cursor_ms,
            inside(self.undispatched),
            inside(self.backfilled),
            gaps,
        )

    def details(self) -> dict[str, str]:
        """The facts as history record details (instants in base 36, comma-separated)."""
        return {
            "cursor_ms": str(self.cursor_ms),
            "created_cursor_ms": str(self.created_cursor_ms),
            "undispatched": ",".join(base36(n) for n in sorted(self.undispatched)),
            "backfilled": ",".join(base36(n) for n in sorted(self.backfilled)),
            "gaps": ",".join(f"{base36(a)}-{base36(b)}" for a, b in self.gaps),
        }

    @classmethod
    def from_details(cls, details: dict[str, str]) -> DispatchFacts:
        def instants(text: str) -> frozenset[int]:
            return frozenset(int(n, 36) for n in text.split(",") if n)

        gaps = tuple(
            (int(a, 36), int(b, 36))
            for a, _, b in (g.partition("-") for g in details.get("gaps", "").split(",") if g)
        )
        return cls(
            int(details["cursor_ms"]),
            int(details["created_cursor_ms"]),
            instants(details.get("undispatched", "")),
            instants(details.get("backfilled", "")),
            gaps,
        )


@dataclass(frozen=True, slots=True)
class Plan:
    """What a backfill of [start, end) does, as far as `plan` looked."""

    runs: tuple[Occurrence, ...]
    """Fire these, in order."""
    dispatched: tuple[int, ...]
    """Nominal instants left out because they were dispatched already (force runs them)."""
    until_ms: int
    """The window as backfilled ends here (exclusive): occurrences the job has not reached yet
    are never backfilled, they run on schedule (firing them now would be early)."""
    left_out: int
    """Occurrences that would run but did not fit `limit`."""
    looked_at_all: bool
    """The whole window was looked at (the scan bound was not reached)."""
    resume_after_ms: int | None
    """Where a plan stopped before the end of the window (the limit or the scan bound): a new
    plan starting after this instant continues it. None: the window is done."""
    resume_at_ms: int | None = None
    """The first occurrence not fired or not looked at (what to backfill again from)."""


def plan(
    compiled: CompiledSchedule,
    facts: DispatchFacts,
    start_ms: int,
    end_ms: int,
    *,
    force: bool,
    limit: int,
    scan: int | None = None,
    count_left_out: bool = True,
) -> Plan:
    """The occurrences of [start, end) a backfill fires: those the job has passed, not already
    dispatched (unless `force`), at most `limit`. Already dispatched ones do not count against
    `limit`. Looks at `scan` occurrences at most (None: the whole window); then
    `resume_after_ms` says where to go on, and `left_out` counts only what was looked at.
    Without `count_left_out` it stops at the first occurrence past `limit` (a step fires what
    it may; the rest is the next step's): the first step of a forced per-second backfill
    walked on to its scan bound only to count what it left, 1 800 searches that held the
    scheduler's loop, and every tenant's due runs, 0.4 s (seconds on a loaded machine)."""
    until = min(end_ms, facts.cursor_ms + 1)
    cursor = start_ms - 1
    runs: list[Occurrence] = []
    dispatched: list[int] = []
    left_out = 0
    resume: int | None = None
    resume_at: int | None = None
    looked = 0
    looked_all = True
    while (occ := compiled.next_after(cursor)) is not None and occ.nominal_ms < until:
        if scan is not None and looked >= scan:
            if resume is None:
                resume, resume_at = cursor, occ.nominal_ms
            looked_all = False
            break
        looked += 1
        if not force and facts.dispatched(occ.nominal_ms):
            dispatched.append(occ.nominal_ms)
        elif len(runs) < limit:
            runs.append(occ)
        else:
            left_out += 1
            if resume is None:
                resume, resume_at = cursor, occ.nominal_ms
            if not count_left_out:
                looked_all = False
                break
        cursor = occ.nominal_ms
    return Plan(tuple(runs), tuple(dispatched), until, left_out, looked_all, resume, resume_at)


# -- the scheduler's side --------------------------------------------------------------------


def start(state: JobState, effects: Effects, cmd: Backfill, facts: Facts) -> JobState:
    """A Backfill command: a dry run publishes the plan's facts; a real one is queued and its
    first step runs now."""
    if cmd.dry_run:
        return _planned(state, effects, cmd, facts)
    start_ms = int(cmd.start.timestamp() * 1000)
    end_ms = int(cmd.end.timestamp() * 1000)
    if len(state.backfills) >= QUEUED_LIMIT:
        raise Refused(
            "too_many_backfills",
            f"{len(state.backfills)} backfills of this job are in progress (at most "
            f"{QUEUED_LIMIT}); wait for one to finish (its history says when)",
        )
    run = BackfillRun(
        request_id=cmd.request_id,
        after_ms=start_ms - 1,
        end_ms=min(end_ms, state.cursor_ms + 1),
        force=cmd.force,
        budget=cmd.max_occurrences,
        wake_ms=facts.now_ms,
        asked_end_ms=end_ms,
    )
    return step(state.evolve(backfills=(*state.backfills, run)), effects, facts)


def _planned(state: JobState, effects: Effects, cmd: Backfill, facts: Facts) -> JobState:
    start_ms = int(cmd.start.timestamp() * 1000)
    end_ms = int(cmd.end.timestamp() * 1000)
    known = DispatchFacts.of(state).within(start_ms, end_ms)
    effects.history(
        state,
        facts,
        Decision.backfill_planned,
        reason=f"backfill {cmd.request_id}: dry run (nothing fired)",
        details={
            "request_id": cmd.request_id,
            "definition_version": str(state.definition(facts.codec).version),
            **known.details(),
        },
    )
    return state


def step(state: JobState, effects: Effects, facts: Facts) -> JobState:
    """Run the first queued backfill's next step, if its time has come: at most STEP_RUNS runs,
    fewer when the tenant's budget for this second is smaller."""
    if not state.backfills or state.backfills[0].wake_ms > facts.now_ms:
        return state
    run = state.backfills[0]
    free = RUNNING_LIMIT - active_runs(state, facts.now_ms)
    if grouped(state, facts):  # one run of the group at a time; its line wakes the job
        if group_blocked(state, facts):
            return _replace_head(state, run.advanced(wake_ms=free_at(state, facts)))
        free = min(free, 1)
    room = min(STEP_RUNS, run.budget, facts.backfill_budget - effects.backfill_used, free)
    if room <= 0:  # the tenant's second is spent, or the job has its most runs at once
        return _replace_head(state, run.advanced(wake_ms=facts.now_ms + 1_000))
    known = DispatchFacts.of(state)

    def walk(after_ms: int, limit: int, count_left_out: bool) -> Plan:
        compiled = state.compiled(facts.codec)
        return plan(
            compiled,
            known,
            after_ms + 1,
            run.end_ms,
            force=run.force,
            limit=limit,
            scan=STEP_SCAN,
            count_left_out=count_left_out,
        )

    # a step that may spend max_occurrences walks on to say what it leaves; any other stops at
    # its last run, the next step goes on from there
    p = walk(run.after_ms, room, count_left_out=room >= run.budget)
    key = state.definition(facts.codec).key
    for nominal in p.dispatched:
        effects.history(
            state,
            facts,
            Decision.skipped_dispatched,
            execution_id=execution_id(key, nominal),
            nominal_at=ms_to_datetime(nominal),
            reason=f"backfill {run.request_id}: already dispatched (force to run again)",
        )
    for occ in p.runs:
        shot = Shot(
            execution_id(key, occ.nominal_ms), occ.nominal_ms, occ.due_ms, TriggerKind.backfill
        )
        state = fire(state, effects, facts, shot, backfill=run.request_id)
        state = state.evolve(backfilled=remember(state.backfilled, occ.nominal_ms))
    effects.backfill_used += len(p.runs)
    run = run.advanced(
        after_ms=p.resume_after_ms if p.resume_after_ms is not None else run.end_ms - 1,
        budget=run.budget - len(p.runs),
        fired=run.fired + len(p.runs),
        skipped=run.skipped + len(p.dispatched),
        wake_ms=facts.now_ms + 1,
    )
    finished = p.resume_after_ms is None
    if not finished and run.budget <= 0:
        # max_occurrences is spent: what is left of the window is counted, not fired
        rest = walk(run.after_ms, 0, count_left_out=True)
        run = run.advanced(
            left_out=rest.left_out, resume_ms=rest.resume_at_ms, counted_all=rest.looked_at_all
        )
        finished = True
    _progress(state, effects, facts, run, done=finished)
    if finished:
        return state.evolve(backfills=state.backfills[1:])
    return _replace_head(state, run)


def _replace_head(state: JobState, run: BackfillRun) -> JobState:
    return state.evolve(backfills=(run, *state.backfills[1:]))


def _progress(
    state: JobState, effects: Effects, facts: Facts, run: BackfillRun, done: bool
) -> None:
    """One history record per step: runs fired so far, already dispatched, and when done,
    what was left out (past max_occurrences) and the part of the window not yet reached."""
    details = {
        "request_id": run.request_id,
        "fired": str(run.fired),
        "already_dispatched": str(run.skipped),
        "done": "true" if done else "false",
    }
    parts = [f"{run.fired} fired", f"{run.skipped} already dispatched"]
    if done and run.left_out and run.resume_ms is not None:
        more = "" if run.counted_all else "+"
        resume = ms_to_datetime(run.resume_ms).isoformat()
        details["left_out"] = str(run.left_out)
        details["left_out_counted_all"] = "true" if run.counted_all else "false"
        details["resume_at"] = resume
        parts.append(
            f"{run.left_out}{more} left out past max_occurrences (backfill again from {resume})"
        )
    if done and run.asked_end_ms > run.end_ms:
        details["not_reached_from"] = ms_to_datetime(run.end_ms).isoformat()
        parts.append(
            f"from {ms_to_datetime(run.end_ms).isoformat()} on the job had not reached the "
            "window: those occurrences run on schedule"
        )
    effects.history(
        state,
        facts,
        Decision.backfill_progress,
        reason=f"backfill {run.request_id} {'done' if done else 'in progress'}: "
        + "; ".join(parts),
        details=details,
    )
