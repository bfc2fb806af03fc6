"""Quiet successes applied per job, not per outcome.

A per-second job dispatched 30 s ahead has about 30 runs in `running` and 30 look-ahead entries,
and most of its outcomes are *quiet* successes (write_behind.py): each took the run out of
`running`, folded the settled outcomes (settled.py), settled the step (step.settle) and was
deferred, a few copies of the state and passes over its 60 entries per outcome, about half of
the scheduler's work per execution. Such a success now only *waits* (`Waiting`, kept where a
deferred state is kept, with the replay point of its input): the job's state is brought up to
date (`caught_up`) when something reads it next (its next fire, a command, a failure, the
write-behind flush), every waiting success at once: one pass over its runs and one fold for
the 15 or so successes between two fires.

`admit` takes a success to wait only when applying it at once would have been quiet and would
have changed nothing but the runs, the settled outcomes and the look-ahead entries come due, so
that `caught_up` gives exactly the state applying each at once would have given
(tests/scheduler/test_later.py checks it for any state and sequence of outcomes):

- it is the success of the current attempt of a run listed once in `running`, not applied and
  not already waiting, of a job with nothing buffered, no `on_success` link, no
  `delete_after_completion`, no concurrency group, overlap `allow` (a run's end changes nothing
  the next dispatch depends on), not held for the tenant's caps, its definition stored;
- `finished` has room for every waiting entry without dropping one (RECENT_LIMIT);
- the processor adds (processor.py): the tenant's breaker neither opens nor closes on it, and
  the step would leave the job's `early_ms` as it is (`keeps_early`, with the tenant's load now).

The fold of k successes at once equals k folds one after the other because, between two of
them, the live runs only shrink (nothing is dispatched while they wait) and the watermark's
floor only rises: what one fold covers, a later one covers too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter

from kadence.codec import Codec
from kadence.models import ExecutionOutcome, OutcomeStatus, OverlapPolicy
from kadence.notifications import is_notification
from streams.scheduler.entries import Ahead
from streams.scheduler.settled import _folded
from streams.scheduler.state import RECENT_LIMIT, JobState, kept_payloads
from streams.scheduler.step import Facts, early_after

_ID = attrgetter("execution_id")
_DUE = attrgetter("due_ms")


class _Log:
    """The successes waiting on one base, in the order they came, shared by the `Waiting`s made
    one from the other: each sees the first `n` (`Waiting.n`), and `admit` appends to it in
    place while it extends the newest, so that a success costs no copy of those before it. An
    undo puts an older `Waiting` back; the next `admit` from it copies its part (`upto`)."""

    __slots__ = ("at", "entries", "ids", "times")

    def __init__(self) -> None:
        self.ids: list[str] = []
        """The executions that succeeded."""
        self.entries: list[str] = []
        """Their `<execution id>#<attempt>`, as `finished` remembers them."""
        self.times: list[int] = []
        """When each was taken (never earlier than the one before): the look-ahead entries due
        by then had been dropped when it was applied."""
        self.at: dict[str, int] = {}
        """Execution id -> its place in `ids` (each id is in it once)."""

    def add(self, eid: str, entry: str, at_ms: int) -> None:
        self.at[eid] = len(self.ids)
        self.ids.append(eid)
        self.entries.append(entry)
        self.times.append(at_ms)

    def upto(self, n: int) -> _Log:
        """A copy of the first `n`."""
        log = _Log()
        log.ids, log.entries, log.times = self.ids[:n], self.entries[:n], self.times[:n]
        log.at = {eid: i for i, eid in enumerate(log.ids)}
        return log


@dataclass(slots=True, eq=False)
class Waiting:
    """A job's state as last applied (`base`) and the quiet successes not applied to it yet.
    Never changed once made (`admit` makes a new one: a failed unit of work puts the one
    before back); not frozen, because a frozen dataclass costs four times as much to make,
    and one is made per success. Two are equal when they hold the same base and the same
    successes (whichever `_Log` holds them)."""

    base: JobState
    log: _Log = field(compare=False, repr=False)
    n: int
    """How many of `log`'s successes are this one's."""
    listed: Mapping[str, int] = field(compare=False, repr=False)
    """`base`'s runs listed once in `running`: execution id -> attempt (looked up once for all
    the successes that wait on one base; never changed)."""
    finished: frozenset[str] = field(compare=False, repr=False)
    """`base.finished` as a set (made once for all the successes that wait on one base: the
    tuple holds up to RECENT_LIMIT entries, and each success looked through it)."""

    @property
    def ids(self) -> tuple[str, ...]:
        """The executions that succeeded, in the order their outcomes came."""
        return tuple(self.log.ids[: self.n])

    @property
    def entries(self) -> tuple[str, ...]:
        """Their `<execution id>#<attempt>`, as `finished` remembers them."""
        return tuple(self.log.entries[: self.n])

    @property
    def times(self) -> tuple[int, ...]:
        """When each was taken (never earlier than the one before)."""
        return tuple(self.log.times[: self.n])

    @property
    def last_ms(self) -> int:
        """When the newest was taken."""
        return self.log.times[self.n - 1]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Waiting):
            return NotImplemented
        return (self.base, self.ids, self.entries, self.times) == (
            other.base,
            other.ids,
            other.entries,
            other.times,
        )

    __hash__ = None  # type: ignore[assignment]


_SUCCEEDED = OutcomeStatus.succeeded


def admit(
    held: JobState | Waiting, outcome: ExecutionOutcome, now_ms: int, codec: Codec
) -> Waiting | None:
    """`held` with `outcome` waiting too, or None when it must be applied at once."""
    if outcome.status is not _SUCCEEDED:
        return None
    eid = outcome.execution_id
    if type(held) is Waiting:
        base, n, log = held.base, held.n, held.log
        place = log.at.get(eid)
        if (place is not None and place < n) or len(base.finished) + n >= RECENT_LIMIT:
            return None
        listed, finished = held.listed, held.finished
    else:
        assert isinstance(held, JobState)
        base, n, log = held, 0, None
        if len(base.finished) >= RECENT_LIMIT or not _job_lets(base, codec):
            return None  # (the base's: a success changes none of what `_job_lets` looks at)
        listed, finished = _listed_once(base), frozenset(base.finished)
    attempt = outcome.attempt
    if listed.get(eid) != attempt or is_notification(eid):
        return None
    entry = f"{eid}#{attempt}"
    if entry in finished:
        return None
    if log is None:
        log = _Log()
    elif n != len(log.ids):  # a newer one was undone: this one goes on from its own part
        log = log.upto(n)
    log.add(eid, entry, max(log.times[-1], now_ms) if n else now_ms)
    return Waiting(base, log, n + 1, listed, finished)


def _listed_once(state: JobState) -> dict[str, int]:
    """Execution id -> attempt of each run listed once in `running`."""
    ids = list(map(_ID, state.running))
    listed = {run.execution_id: run.attempt for run in state.running}
    if len(listed) != len(ids):  # an id listed twice: none of its successes waits
        for eid in {e for e in ids if ids.count(e) > 1}:
            del listed[eid]
    return listed


def _job_lets(state: JobState, codec: Codec) -> bool:
    """The job's successes may wait: nothing buffered, not held for the tenant's caps, its
    definition stored, no link or group a run's end changes, overlap `allow`."""
    if state.buffered or state.held_ms is not None or not state.definition_stored:
        return False
    d = state.definition(codec)
    return not (d.on_success or d.delete_after_completion or d.concurrency_key) and (
        d.overlap is OverlapPolicy.allow
    )


def keeps_early(waiting: Waiting, facts: Facts) -> bool:
    """Whether settling the step of the newest waiting success (at `facts.now_ms`) would leave
    the job's `early_ms`, hence its wake time, as it is."""
    base = waiting.base
    ahead, now = base.ahead, waiting.last_ms
    if ahead and ahead[-1].due_ms <= now:  # else `early_after` sees what it would after the drop
        ahead = _due_dropped(base, now)  # (it looks only at whether any is left, and the last)
    return early_after(base, ahead, facts) == base.early_ms


def caught_up(waiting: Waiting) -> JobState:
    """The state applying each waiting success at once would have given: their runs out of
    `running` (and `unsettled`), their entries folded once, the look-ahead entries due by the
    last of them dropped."""
    base = waiting.base
    gone = set(waiting.ids)
    running = tuple(r for r in base.running if r.execution_id not in gone)
    unsettled = base.unsettled
    if unsettled and not gone.isdisjoint(unsettled):
        unsettled = tuple(e for e in unsettled if e not in gone)
    finished = (*base.finished, *waiting.entries)
    times = waiting.log.times
    n = waiting.n
    folded_with = base if n == 1 else base.evolve(ahead=_due_dropped(base, times[n - 2]))
    mark, kept = _folded(folded_with, running, finished, unsettled)
    after = base.evolve(
        running=running,
        failures_in_row=0,
        finished=kept,
        unsettled=unsettled,
        settled_ms=mark,
        ahead=_due_dropped(base, times[n - 1]),
    )
    return kept_payloads(after)


def current(held: object) -> JobState | None:
    """A kept job state brought up to date (None: not a job state)."""
    if isinstance(held, Waiting):
        return caught_up(held)
    return held if isinstance(held, JobState) else None


def _due_dropped(state: JobState, now_ms: int) -> tuple[Ahead, ...]:
    """`state.ahead` without the entries due by `now_ms` (what `settle` drops)."""
    ahead = state.ahead
    if any(map(now_ms.__ge__, map(_DUE, ahead))):
        return tuple(compress(ahead, map(now_ms.__lt__, map(_DUE, ahead))))
    return ahead
