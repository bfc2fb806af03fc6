"""What a worker writes on `leases` with a transaction: one LeaseSnapshot listing every run it
holds by reference (the default), or the previous release's LeaseEvents (`lease_format=events`,
for a rolling upgrade while some reapers still read only those)."""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from kadence.clock import ms_to_datetime
from kadence.fast_models import held_range
from kadence.models import (
    MAX_HELD_RANGES,
    MAX_HELD_RUNS,
    ExecutionRequested,
    ExecutionRevoked,
    HeldRange,
    LeaseEventKind,
    LeaseSnapshot,
    WireModel,
)
from kadence.models.base import DEFAULT_POOL
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.targets import Stop
from streams.worker.active import ActiveRun, TxnWork
from streams.worker.inbox import Inbox, Item
from streams.worker.item import read_after
from streams.worker.records import lease_event

log = logging.getLogger(__name__)

LeaseRecord = tuple[int, bytes, WireModel]
"""(leases partition, key, record)."""
PACE_FREE_RUNS = 256
PACE_US_PER_RUN = 20
"""A snapshot lists everything held, so building and writing one costs a few µs per run:
holding more than PACE_FREE_RUNS, a worker spaces its transactions by PACE_US_PER_RUN per run
held (8 000 held: one every 155 ms at most), which keeps snapshots to a fraction of a core."""


def _spans(keys: Iterable[tuple[int, int, int]]) -> list[list[int]]:
    """(partition, offset, ttl) keys as [partition, start, count, ttl] runs of consecutive
    offsets of one partition under one TTL."""
    out: list[list[int]] = []
    last: list[int] | None = None
    for p, o, ttl in sorted(keys):
        if last is not None and last[0] == p and last[3] == ttl and last[1] + last[2] == o:
            last[2] += 1
        else:
            last = [p, o, 1, ttl]
            out.append(last)
    return out


def _key(run: ActiveRun) -> tuple[int, int, int]:
    item = run.item
    return item.partition, item.offset, item.execution.lease_ttl_ms


def ranges(runs: Iterable[ActiveRun]) -> list[HeldRange]:
    """The runs as ranges of consecutive offsets of one partition under one TTL."""
    return [held_range(*span) for span in _spans({_key(r) for r in runs})]


def fits(found: list[HeldRange], limit: int = MAX_HELD_RANGES, runs: int = MAX_HELD_RUNS) -> bool:
    """Whether a worker may hold the runs of `found`: however many of them end, in whatever
    order, what is left fits in `limit` ranges. Ending one run splits a range at worst (ranges
    + runs never grow), and each run is one range at most, so ranges never exceed
    (ranges + runs) / 2: at most 2 x `limit` - 1 runs when they are consecutive, `limit` when
    they are scattered."""
    held = sum(r.count for r in found)
    return len(found) + held <= 2 * limit and held <= runs


class RangeCache:
    """The HeldRange of each range listed last time: consecutive snapshots list mostly the
    same ranges, and building thousands of models per snapshot would cost more than the rest."""

    def __init__(self) -> None:
        self._made: dict[tuple[int, ...], HeldRange] = {}

    def ranges(self, spans: list[list[int]]) -> list[HeldRange]:
        made, self._made = self._made, {}
        out = []
        for span in spans:
            key = tuple(span)
            found = made.get(key)
            if found is None:
                found = held_range(*span)
            self._made[key] = found
            out.append(found)
        return out


def fit(
    held: list[ActiveRun],
    txn: TxnWork,
    limit: int = MAX_HELD_RANGES,
    runs: int = MAX_HELD_RUNS,
    cache: RangeCache | None = None,
) -> tuple[list[HeldRange], list[ActiveRun]]:
    """The ranges of `held` plus the transaction's claims, claiming less (claims ahead first,
    latest first) so that they `fits`; and the claims left out. `held` fits already (it only
    lost runs since it last did). One pass: a claim changes the ranges by +1 (no neighbour
    held), 0 (one) or -1 (it joins two), so ranges + runs never shrink as claims are added and
    the claims kept are the longest prefix that fits."""
    keys = {(p, o): ttl for p, o, ttl in map(_key, held)}
    count = len(keys)
    spans = len(_spans((p, o, ttl) for (p, o), ttl in keys.items()))
    claims = [*txn.claims, *txn.ahead]
    kept = 0
    for run in claims:
        p, o, ttl = _key(run)
        if (p, o) not in keys:
            joins = (keys.get((p, o - 1)) == ttl) + (keys.get((p, o + 1)) == ttl)
            if spans + 1 - joins + count + 1 > 2 * limit or count + 1 > runs:
                break
            keys[(p, o)] = ttl
            spans += 1 - joins
            count += 1
        kept += 1
    dropped = claims[kept:][::-1]
    txn.claims, txn.ahead = claims[: min(kept, len(txn.claims))], claims[len(txn.claims) : kept]
    spans_now = _spans((p, o, t) for (p, o), t in keys.items())
    return (cache or RangeCache()).ranges(spans_now), dropped


class LeaseWriter:
    """The lease records of one worker process."""

    def __init__(
        self, worker_id: str, partitions: int, lease_format: str, pool: str = DEFAULT_POOL
    ) -> None:
        self.worker_id = worker_id
        self.pool = pool
        self.partitions = partitions
        self.snapshots = lease_format == "snapshot"
        self.incarnation = secrets.token_hex(6)
        """Random per process: a restarted worker does not release what the previous one held."""
        self.key = f"{worker_id}/{self.incarnation}"

    def records(self, txn: TxnWork, now: int) -> list[LeaseRecord]:
        if self.snapshots:
            if txn.held is None:
                return []
            snap = LeaseSnapshot(
                worker_id=self.worker_id,
                incarnation=self.incarnation,
                at=ms_to_datetime(now),
                held=txn.ranges,
                pool=self.pool,
            )
            return [(partition_for(self.key, self.partitions), self.key.encode(), snap)]
        out = [self._event(r, LeaseEventKind.acquired, now, True) for r in txn.claims]
        out += [self._event(r, LeaseEventKind.renewed, now) for r in txn.renewals]
        out += [
            self._event(r, LeaseEventKind.released, now)
            for r, _ in txn.finished
            if not r.lease_lost  # a lost lease is not released: the reaper redelivers
        ]
        return out

    def _event(
        self, run: ActiveRun, kind: LeaseEventKind, now: int, with_execution: bool = False
    ) -> LeaseRecord:
        event = lease_event(run, kind, now, self.worker_id, with_execution=with_execution)
        ex = run.execution
        partition = partition_for(ex.execution_id, self.partitions)
        return partition, ex.execution_id.encode(), event


class Holdings:
    """What a worker holds under its lease besides its running runs: claims ahead of the due
    time, waiting in memory. Decides what each transaction claims ahead and lists."""

    def __init__(self, settings: KadenceSettings, worker_id: str, inbox: Inbox) -> None:
        self.writer = LeaseWriter(
            worker_id, settings.partitions, settings.lease_format, settings.worker_pool
        )
        self.inbox = inbox
        self.claimed: dict[str, ActiveRun] = {}
        """execution id -> claimed ahead (listed in a committed snapshot), not started."""
        self.ahead_by: Counter[str] = Counter()
        """tenant -> its runs in `claimed`."""
        self.slots = settings.worker_concurrency
        ahead = settings.worker_claim_ahead_max
        default = max(0, 2 * MAX_HELD_RANGES - settings.worker_concurrency)
        self.ahead_max = (default if ahead is None else ahead) if self.writer.snapshots else 0
        self.lead_ms = 0
        """Half the longest lease TTL read: how far ahead of now a claim ahead may reach."""
        self.release = False
        """A claim ahead was dropped: the next transaction writes a snapshot without it."""
        self._ranges = RangeCache()
        self.monotonic: Callable[[], float] = time.monotonic
        self._next_txn = 0.0
        """`monotonic()` before which a transaction waits (`paced`)."""
        self.listed = 0
        """Ranges in the last snapshot committed (only a snapshot's claims add ranges)."""

    def saw(self, ex: ExecutionRequested) -> None:
        self.lead_ms = max(self.lead_ms, ex.lease_ttl_ms // 2)

    def paced(self) -> bool:
        """Too soon after the last transaction for another (PACE_US_PER_RUN); claims ahead still
        start at their due instant meanwhile."""
        return self.monotonic() < self._next_txn

    def room(self, running: int) -> int:
        """Runs that may still be claimed with `running` runs in flight, if each claim adds a
        run and no range (`fit` then claims less if they would not `fits`): the snapshot must
        list what is held however it ends."""
        held = running + len(self.claimed)
        if not self.writer.snapshots:  # a lease event per claim: as many as the slots
            return max(0, self.slots - held)
        return max(0, min(2 * MAX_HELD_RANGES - self.listed - held, MAX_HELD_RUNS - held))

    def starting(self, item: Item) -> ActiveRun | None:
        """The claim ahead of `item`, now due and its turn come: it starts without a commit."""
        run = self.claimed.get(item.execution.execution_id)
        if run is None or run.item is not item:
            return None
        del self.claimed[item.execution.execution_id]
        self.ahead_by[item.execution.tenant] -= 1
        return run

    def claim_ahead(
        self, txn: TxnWork, now: int, runs: Mapping[str, ActiveRun], claiming: set[str]
    ) -> None:
        """Claim executions due within half their lease TTL (so each lease outlives its wait
        by half a TTL at least), up to `ahead_max` waiting at once and within `room`; of a
        tenant with a running cap, only what its free slots can start (`Inbox.starts`): claims
        of a tenant whose runs hang would wait, renewed, and take the others' room. Never a
        leaseless one: the inbox does not offer those."""
        room = min(self.ahead_max - len(self.claimed), self.room(len(runs)) - len(txn.claims))
        if room <= 0:
            return
        picked: Counter[str] = Counter()

        def ready(item: Item) -> bool:
            ex = item.execution
            busy = ex.execution_id in runs or ex.execution_id in self.claimed
            if item.due_ms - ex.lease_ttl_ms // 2 > now or busy:
                return False
            if not self.inbox.starts(item, self.ahead_by[ex.tenant] + picked[ex.tenant]):
                return False
            picked[ex.tenant] += 1
            return True

        for item in self.inbox.upcoming(now + self.lead_ms, room, ready):
            if item.execution.execution_id not in claiming:
                claiming.add(item.execution.execution_id)
                self.inbox.claim(item)
                txn.ahead.append(claim(item, now))

    def revoke(self, rev: ExecutionRevoked, partition: int = -1, offset: int = -1) -> None:
        """Drop the claim ahead `rev` (read at `partition`, `offset`) revokes; not one read
        after it (a newer dispatch of the same execution: `read_after`)."""
        run = self.claimed.get(rev.execution_id)
        if run is None or read_after(run.item, partition, offset):
            return
        if run.execution.definition_version <= rev.definition_version:
            log.info("revoked after its claim ahead: %s", rev.execution_id)
            self.drop(run)

    def drop(self, run: ActiveRun) -> None:
        """A claim ahead given up before its start: the next snapshot leaves it out."""
        if self.claimed.pop(run.execution.execution_id, None) is not None:
            self.ahead_by[run.execution.tenant] -= 1
        run.item.held = False
        self.release = True

    def police(self, now: int) -> int:
        """Drop claims ahead whose lease ran out (the reaper redelivers them); how many."""
        gone = [r for r in self.claimed.values() if now >= r.lease_expires_ms]
        for run in gone:
            log.warning("lease of %s ran out before it started", run.execution.execution_id)
            self.drop(run)
        return len(gone)

    def snapshot(self, txn: TxnWork, now: int, runs: Iterable[ActiveRun]) -> None:
        """With snapshots: list every run held after this transaction when it claims,
        finishes, releases or renews (a renewal due for one renews them all), claiming less
        if they would not fit in one record."""
        if not self.writer.snapshots:
            return
        renew = bool(txn.renewals) or any(now >= r.next_renew_ms for r in self.claimed.values())
        txn.renewals = []
        if not (renew or txn.claims or txn.ahead or txn.finished or self.release):
            return
        ended = {id(run) for run, _ in txn.finished}
        held = [r for r in runs if not r.lease_lost and id(r) not in ended]
        held += self.claimed.values()
        txn.ranges, dropped = fit(held, txn, MAX_HELD_RANGES, cache=self._ranges)
        if dropped:  # `room` assumes each claim adds no range: a scattered burst fits fewer
            log.debug("lease snapshot full: %d claims wait for a later turn", len(dropped))
        for run in dropped:
            if run.item.claimed:
                self.inbox.unclaim(run.item)
            else:
                self.inbox.hold(run.item)
        txn.held = [*held, *txn.claims, *txn.ahead]

    def committed(self, txn: TxnWork) -> None:
        if txn.held is not None:
            self.release = False
            self.listed = len(txn.ranges)
            spaced = max(0, len(txn.held) - PACE_FREE_RUNS) * PACE_US_PER_RUN / 1e6
            self._next_txn = self.monotonic() + spaced
        for run in txn.ahead:
            if run.item.held:  # not dropped while the commit was retried
                self.claimed[run.execution.execution_id] = run
                self.ahead_by[run.execution.tenant] += 1

    def failed(self, txn: TxnWork) -> None:
        for run in txn.ahead:
            self.inbox.unclaim(run.item)


def claim(item: Item, now: int, stop: Stop | None = None) -> ActiveRun:
    ttl = item.execution.lease_ttl_ms
    return ActiveRun(item, stop or Stop(), now, now + ttl, now + max(1, ttl // 3))
