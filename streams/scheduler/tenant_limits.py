"""Per-tenant caps on scheduled occurrences: how many one tenant's jobs may start per second
and how many of its runs may be in progress at once.

Within the API's job quota one tenant could create 10 000 jobs on `* * * * * *` with
`overlap=allow` and a 6 h timeout: 10 000 runs a second, all on its executions partition,
ahead of every other tenant's. Past a cap, a scheduled occurrence waits, never silently: its
job records `throttled` (naming the cap) when it starts to wait, and looks again in the first
second with room, which it reserves, so the jobs that wait take their turns in order instead
of losing to the jobs due on time, and a burst is spread over the seconds that follow it.
Late by then, an occurrence follows its job's missed-run policy, as after an outage (by
default the latest one fires). A run counts in the second it may start: its due second, or
the second it fired in when that is later.

Both caps are judged per scheduler process, over all the job partitions it owns together: it
allows its share of the tenant's cap (the cap times the partitions it owns over all of them,
rounded up), which holds the tenant to the cap overall. Judging them per partition (each its
share of the cap) held back a tenant within its cap: job keys hash unevenly, and 2 000 jobs of
one tenant due in one second put up to 210 on a partition whose share was 167, so 3 136 of B1's
100 000 one-off runs waited a second or more; and the per-second jobs of one tenant, each with
its runs dispatched ahead in progress, put 1.10 to 1.35 times their mean on the busiest of 12
partitions (B2's keys at 16 000/s), whose share of the in-flight cap was then full while the
tenant had 74 to 91 % of the cap in progress.
Runs in progress are stored per partition (`~inflight/<tenant>`, in its store: they outlive the
process) and summed in the process's memory (`TenantUse.running_on`), read again from every
owned partition's store when the partitions it owns change or an abort puts them back
(`TenantRuns.recount`). A run dispatched ahead is in progress from its due second: the
process keeps its jobs' runs out ahead per due second in its memory (`TenantUse.ahead_changed`,
from the look-ahead entries each write adds or drops) and takes the ones due after now off the
count when the cap would be reached (`TenantLoad.not_due`); forgotten on a recount, they count
as in progress until their jobs are next written. Only scheduled occurrences (on time, caught
up, dispatched ahead) wait: a trigger, a retry, a replay or a backfill is the tenant's explicit
request, bounded by the API's quotas and the backfill pace. What a process counts per second is
in its memory: a restarted process may let one cap's worth more start in that second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from streams.runtime.context import ProcessorContext
from streams.scheduler.entries import Ahead
from streams.scheduler.state import JobState

KEEP_SECONDS = 3_600
"""Seconds ahead a job may reserve (a backlog of an hour at the tenant's rate)."""
CAPS_KEPT = 10_000
"""Tenants whose caps are kept computed (`TenantUse.caps`)."""


@dataclass(frozen=True, slots=True)
class TenantCaps:
    """The caps of one tenant on one partition (0: no cap)."""

    fires_per_s: int = 0
    in_flight: int = 0

    @classmethod
    def share(
        cls, fires_per_s: int, in_flight: int, partitions: int, owned: int | None = None
    ) -> TenantCaps:
        """The share of tenant-wide caps of a process owning `owned` of `partitions` job
        partitions (all of them by default), over those partitions together."""
        mine = partitions if owned is None else max(1, min(owned, partitions))
        return cls(
            math.ceil(fires_per_s * mine / partitions) if fires_per_s else 0,
            math.ceil(in_flight * mine / partitions) if in_flight else 0,
        )


@dataclass(frozen=True, slots=True)
class TenantLoad:
    """What the tenant's jobs used of their caps on the process's partitions, as a step
    starts."""

    caps: TenantCaps = field(default_factory=TenantCaps)
    fired: Mapping[int, int] = field(default_factory=dict)
    """Scheduled runs per second they may start in (epoch seconds)."""
    reserved: Mapping[int, int] = field(default_factory=dict)
    """Places in a second held by jobs that wait for it."""
    running: int = 0
    """Runs fired on the process's partitions with no final outcome yet, those dispatched ahead
    and not yet due among them."""
    now_ms: int = 0
    ahead: Mapping[int, int] = field(default_factory=dict)
    """Of those, the runs dispatched ahead per second they are due in (epoch seconds), as the
    jobs were last written (`TenantUse.ahead_changed`): the ones due after this second are not
    in progress yet."""

    def why_not(
        self, due_ms: int, fired_now: Mapping[int, int], running_now: int, *, mine: bool
    ) -> str | None:
        """Why one more scheduled run due at `due_ms` may not fire now (None: it may).
        `fired_now`, `running_now`: what this step already added; `mine`: the job holds one of
        this second's reserved places."""
        caps = self.caps
        second = max(due_ms, self.now_ms) // 1000
        if caps.fires_per_s:
            used = self.fired.get(second, 0) + fired_now.get(second, 0)
            taken = used + self.reserved.get(second, 0) - (1 if mine else 0)
            if taken >= caps.fires_per_s:
                return (
                    f"the tenant's jobs on this scheduler process already start {used} runs "
                    f"in this second ({taken - used} more places are held by jobs that waited),"
                    f" its share {caps.fires_per_s} of the tenant's cap "
                    "(KADENCE_TENANT_FIRES_PER_S); spread the jobs (spread_s) or ask for a "
                    "higher cap"
                )
        if caps.in_flight and self.running + running_now >= caps.in_flight:
            running = max(0, self.running + running_now - self.not_due(fired_now))
            if running >= caps.in_flight:
                return (
                    f"the tenant has {running} runs in progress on this scheduler process's "
                    f"partitions, its share {caps.in_flight} of the tenant's cap "
                    "(KADENCE_TENANT_MAX_IN_FLIGHT); runs go on as its runs end"
                )
        return None

    def not_due(self, fired_now: Mapping[int, int]) -> int:
        """The runs fired and not yet due in a later second than now's: those dispatched ahead
        before this step, and `fired_now`'s (what this step fired, per second it may start
        in). Counted only when the cap would be reached otherwise (`why_not`). Never below
        none: after a recount a job's write takes off runs out before it that were not
        counted, and those must not count twice."""
        now_s = self.now_ms // 1000
        later = sum(n for s, n in self.ahead.items() if s > now_s)
        return max(0, later + sum(n for s, n in fired_now.items() if s > now_s))

    def next_place(self, fired_now: Mapping[int, int]) -> int:
        """The first second after now with room for one more run (epoch seconds)."""
        cap = self.caps.fires_per_s
        start = self.now_ms // 1000 + 1
        if not cap:
            return start
        for second in range(start, start + KEEP_SECONDS):
            used = self.fired.get(second, 0) + fired_now.get(second, 0)
            if used + self.reserved.get(second, 0) < cap:
                return second
        return start + KEEP_SECONDS


@dataclass
class TenantUse:
    """What each tenant's jobs started and reserved per second, and have in progress, on this
    process's partitions, in its memory."""

    fires_per_s: int = 0
    fires_by_tenant: Mapping[str, int] = field(default_factory=dict)
    in_flight: int = 0
    in_flight_by_tenant: Mapping[str, int] = field(default_factory=dict)
    partitions: int = 1
    owned: Callable[[], int] | None = None
    """How many job partitions the process owns now (None: all of them)."""
    _fired: dict[str, dict[int, int]] = field(default_factory=dict)
    _reserved: dict[str, dict[int, int]] = field(default_factory=dict)
    _holders: dict[str, dict[bytes, int]] = field(default_factory=dict)
    """Which job holds a place in which second: a place is given back once, whatever writes
    the job has after it."""
    _caps: dict[tuple[str, int], TenantCaps] = field(default_factory=dict)
    _pruned: dict[str, int] = field(default_factory=dict)
    """The second each tenant's counts were last pruned in."""
    _running: dict[str, dict[int, int]] = field(default_factory=dict)
    """Each tenant's runs in progress by job partition, as that partition last read or wrote
    them (only the tenants with some, on the partitions that have some)."""
    _running_total: dict[str, int] = field(default_factory=dict)
    """Their sum per tenant."""
    _ahead: dict[str, dict[int, int]] = field(default_factory=dict)
    """Each tenant's runs dispatched ahead, per second they are due in, as its jobs were
    written (only the seconds after the write's instant are changed, so a second's count holds
    the runs due in it that were out before it came; counted only for tenants with a cap on
    runs in progress). In memory: forgotten when the counts are read again (`recount`), after
    which a run out before is counted in progress from then, as until 0.21.0. A unit of work
    undone (a bug: the runtime refuses its input or quarantines its key) keeps what it changed
    here until its seconds pass: the cap is looser by that unit's runs out ahead, for one
    look-ahead at most."""

    def caps(self, tenant: str) -> TenantCaps:
        """The tenant's caps on this process (from the settings and the partitions it owns:
        computed once a tenant and a number of partitions)."""
        owned = self.partitions if self.owned is None else self.owned()
        caps = self._caps.get((tenant, owned))
        if caps is None:
            caps = TenantCaps.share(
                self.fires_by_tenant.get(tenant, self.fires_per_s),
                self.in_flight_by_tenant.get(tenant, self.in_flight),
                self.partitions,
                owned,
            )
            if len(self._caps) >= CAPS_KEPT:  # tenants seen long ago: computed again if seen
                self._caps.clear()
            self._caps[(tenant, owned)] = caps
        return caps

    def load(self, tenant: str, running: int, now_ms: int) -> TenantLoad:
        """The tenant's use, with `running` runs in progress on the partition asking."""
        return TenantLoad(
            self.caps(tenant),
            self._fired.get(tenant, {}),
            self._reserved.get(tenant, {}),
            max(0, running),
            now_ms,
            self._ahead.get(tenant, _NONE),
        )

    def ahead_changed(self, tenant: str, change: Mapping[int, int], now_ms: int) -> None:
        """The tenant's runs dispatched ahead changed by `change` (due second -> runs)."""
        mine = self._ahead.setdefault(tenant, {})
        for second, n in change.items():
            mine[second] = mine.get(second, 0) + n
        self._prune(tenant, now_ms // 1000)

    def running_on(self, tenant: str, partition: int, count: int) -> None:
        """The tenant has `count` runs in progress on `partition` now."""
        parts = self._running.get(tenant)
        before = 0 if parts is None else parts.get(partition, 0)
        if count == before:
            return
        if count:
            if parts is None:
                parts = self._running[tenant] = {}
            parts[partition] = count
        elif parts is not None:
            del parts[partition]
            if not parts:
                del self._running[tenant]
        total = self._running_total.get(tenant, 0) + count - before
        if total:
            self._running_total[tenant] = total
        else:
            self._running_total.pop(tenant, None)

    def running(self, tenant: str) -> int:
        """The tenant's runs in progress on the process's partitions."""
        return self._running_total.get(tenant, 0)

    def recount(self, counts: Mapping[int, Mapping[str, int]]) -> None:
        """Forget the runs in progress counted so far: the process's partitions have `counts`
        (partition -> tenant -> runs)."""
        self._running.clear()
        self._running_total.clear()
        self._ahead.clear()
        for partition, tenants in counts.items():
            for tenant, count in tenants.items():
                self.running_on(tenant, partition, count)

    def fired(self, tenant: str, seconds: Mapping[int, int], now_ms: int) -> None:
        """Count scheduled runs started (per second they may start in); the seconds past are
        forgotten (they were kept for ever: a tenant that never waited for its cap added one
        for every second its jobs fired, megabytes a day in a scheduler that ran on)."""
        mine = self._fired.setdefault(tenant, {})
        for second, n in seconds.items():
            mine[second] = mine.get(second, 0) + n
        self._prune(tenant, now_ms // 1000)

    def reserve(self, tenant: str, job: bytes, second: int, now_ms: int) -> None:
        """`job` holds a place in `second` (in place of any it held)."""
        self.release(tenant, job)
        self._holders.setdefault(tenant, {})[job] = second
        places = self._reserved.setdefault(tenant, {})
        places[second] = places.get(second, 0) + 1
        self._prune(tenant, now_ms // 1000)

    def release(self, tenant: str, job: bytes) -> None:
        """`job` gives back the place it holds, if any (it ran, or was deleted)."""
        holders = self._holders.get(tenant)
        second = holders.pop(job, None) if holders else None
        places = self._reserved.get(tenant)
        if second is not None and places and places.get(second, 0) > 0:
            places[second] -= 1

    def _prune(self, where: str, now_s: int) -> None:
        """Forget `where`'s seconds before the last one (at most once a second a tenant), and
        the tenants quiet for a while."""
        if self._pruned.get(where) == now_s:
            return
        if len(self._pruned) >= CAPS_KEPT:
            self._pruned.clear()
        self._pruned[where] = now_s
        for table in (self._fired, self._reserved, self._ahead):
            seconds = table.get(where)
            if seconds and min(seconds) < now_s - 1:
                table[where] = {s: n for s, n in seconds.items() if s >= now_s - 1 and n}
        holders = self._holders.get(where)
        if holders and len(holders) > 2 * sum(self._reserved.get(where, {}).values()) + 64:
            self._holders[where] = {j: s for j, s in holders.items() if s >= now_s - 1}
        if len(self._fired) + len(self._reserved) + len(self._ahead) > 20_000:  # quiet ones
            for table in (self._fired, self._reserved, self._ahead):
                for key in [k for k, v in table.items() if not v or max(v) < now_s - 1]:
                    del table[key]
            for key in [k for k, v in self._holders.items() if k not in self._reserved]:
                del self._holders[key]


_NONE: Mapping[int, int] = {}


def _count_bytes(count: int) -> bytes:
    return str(count).encode()


INFLIGHT_PREFIX = b"~inflight/"
"""`~inflight/<tenant>`: the tenant's runs in progress on a partition (kept while it has a cap)."""


class TenantRuns:
    """The processor's side of the caps: what the tenant used, kept as its jobs are written.

    Runs in progress are counted per partition in the store (`~inflight/<tenant>`), changed by
    the difference each write makes to a job's runs: the processor tells `loaded` what a job
    held when it was read (in this unit of work) and `written` what it holds now."""

    def __init__(self, use: TenantUse) -> None:
        self.use = use
        self._before: dict[bytes, tuple[int, int | None, tuple[Ahead, ...]]] = {}

    def begin(self) -> None:
        """A new unit of work: forget what was read in the last one."""
        self._before.clear()

    def loaded(self, key: bytes, state: JobState | None) -> None:
        """`key` was read in this unit of work, as `state` (None: no such job)."""
        self._before[key] = (
            (0, None, ()) if state is None else (len(state.running), state.held_ms, state.ahead)
        )

    def load(self, ctx: ProcessorContext, tenant: str, now_ms: int) -> TenantLoad:
        """The tenant's use on the process's partitions, this one's runs in progress read
        again (an undone unit of work may have left the process's count off)."""
        self.in_flight(ctx, tenant)
        return self.use.load(tenant, self.use.running(tenant), now_ms)

    def recount(self, tasks: Mapping[int, ProcessorContext]) -> None:
        """Count the runs in progress again from the stores of the partitions the process owns
        now (`tasks`): after an assignment, a revocation or an abort."""
        self.use.recount({p: dict(_counted(ctx)) for p, ctx in tasks.items()})

    def written(
        self,
        ctx: ProcessorContext,
        key: bytes,
        scheduled: Mapping[int, int],
        state: JobState | None,
        now_ms: int,
    ) -> None:
        """`key` was written as `state` (None: deleted), having started `scheduled` runs (per
        second they may start in)."""
        running, held_ms, ahead = (
            (0, None, ()) if state is None else (len(state.running), state.held_ms, state.ahead)
        )
        tenant = key.split(b"/", 1)[0].decode()
        before_running, before_held, before_ahead = self._before.get(key, (None, None, ()))
        self._before[key] = (running, held_ms, ahead)
        if before_running is not None and ahead is not before_ahead:
            self._ahead(tenant, before_ahead, ahead, now_ms)
        if scheduled:
            self.use.fired(tenant, scheduled, now_ms)
        if held_ms is not None and held_ms != before_held and held_ms > now_ms:
            self.use.reserve(tenant, key, held_ms // 1000, now_ms)  # waits for that second
        elif scheduled or held_ms is None:
            self.use.release(tenant, key)  # it ran (in its place, or without one), or is gone
        if before_running is None or before_running == running:
            return
        self._count(ctx, tenant, running - before_running)

    def _ahead(
        self, tenant: str, before: tuple[Ahead, ...], after: tuple[Ahead, ...], now_ms: int
    ) -> None:
        """What a write changed of the tenant's runs dispatched ahead and due after `now_ms`
        (those due by then are in progress however the job's entries say it)."""
        if not self.use.caps(tenant).in_flight:
            return
        change: dict[int, int] = {}
        for entry in after:
            if entry.due_ms > now_ms:
                second = entry.due_ms // 1000
                change[second] = change.get(second, 0) + 1
        for entry in before:
            if entry.due_ms > now_ms:
                second = entry.due_ms // 1000
                change[second] = change.get(second, 0) - 1
        if any(change.values()):
            self.use.ahead_changed(tenant, change, now_ms)

    def ended(self, ctx: ProcessorContext, key: bytes) -> None:
        """One run of `key`'s job ended and the job is not written now (its success waits:
        later.py): what `written` does for a write that took one run out of `running` and
        changed nothing else (the job holds no place: later.admit)."""
        tenant = key.split(b"/", 1)[0].decode()
        self.use.release(tenant, key)
        self._count(ctx, tenant, -1)

    def _count(self, ctx: ProcessorContext, tenant: str, change: int) -> None:
        """The tenant's runs in progress on this partition changed by `change` (stored only
        while it has a cap on them)."""
        if not self.use.caps(tenant).in_flight:
            return
        counted = INFLIGHT_PREFIX + tenant.encode()
        total = max(0, self.in_flight(ctx, tenant) + change)
        ctx.keep(counted, total, _count_bytes)  # written once a transaction
        self.use.running_on(tenant, ctx.partition, total)

    def in_flight(self, ctx: ProcessorContext, tenant: str) -> int:
        if not self.use.caps(tenant).in_flight:
            return 0
        counted = INFLIGHT_PREFIX + tenant.encode()
        cached = ctx.cache.get(counted)
        if isinstance(cached, int):
            total = cached
        else:
            raw = ctx.get(counted)
            total = int(raw) if raw else 0
            ctx.cache[counted] = total
        self.use.running_on(tenant, ctx.partition, total)
        return total


SCAN_PAGE = 1_000
"""Keys read at a time when the counts are read again (`_counted`)."""


def _counted(ctx: ProcessorContext) -> Iterator[tuple[str, int]]:
    """(tenant, runs in progress) of every `~inflight/<tenant>` in the partition's store."""
    after = INFLIGHT_PREFIX
    while True:
        keys = ctx.keys_after(after, SCAN_PAGE)
        for key in keys:
            if not key.startswith(INFLIGHT_PREFIX):
                return
            raw = ctx.get(key)
            if raw:
                yield key[len(INFLIGHT_PREFIX) :].decode(), int(raw)
        if len(keys) < SCAN_PAGE:
            return
        after = keys[-1]
