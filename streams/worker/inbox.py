"""Executions a worker has read but not claimed: held until due, committed only in prefix.

Executions may arrive up to the scheduler's look-ahead before they are due. The worker holds
them, and the consumer offset it commits for a partition never passes one it still holds: if
the worker dies, the next owner of the partition reads every unclaimed execution again.
Claimed ones are covered by their lease (the reaper redelivers them), so they leave the inbox.

Executions are not on the topic in due order (each job dispatches its look-ahead together; jobs
that wait for their due time come after others' look-ahead), so the first held execution can
sit in front of many already claimed. The commit therefore also carries, in the offset
metadata, which offsets between it and the read position are still held: the next owner of
the partition reads again only those (and everything after the read position), not the ones
already claimed. Past METADATA_LIMIT characters the list is left out, and the next owner
re-reads everything after the committed offset (duplicates, with the same execution id).

Revocations read again. A revocation that takes a run out of a single execution's record ends
that record's hold: the commit passes both. One that takes a run out of a batch whose other runs
are still held would be passed while the batch is not, and the next owner would read the batch
whole again without it: so the batch pins the revocation's offset (`Item.pins`), and the commit
names it held for as long as the batch is. Reading a partition again (a take-over's replay, or
owed executions read again) meets the revocations after what they revoke, maybe many polls
later: what is read during it waits (`_parked`) until the reading is back where it had been
(`_replayed`), then waits for its due time as usual. So nothing read again starts before the
revocations after it were read again too.

Fairness between tenants (which due execution is served first): streams/worker/fairness.py.

Bound: executions read past a tenant's quota while it is at its cap are let go, owed (never
passed by the commit, named in its metadata) and read again later; streams/worker/backlog.py.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kadence.models import ExecutionRequested, ExecutionRevoked
from kadence.models.targets import Target
from kadence.throttle import destination_of
from streams.worker.fairness import Budget, Fairness, never
from streams.worker.item import Item, due_ms, read_after
from streams.worker.offsets import CommitPoints, HeldRuns, decode_metadata
from streams.worker.owed import Owed
from streams.worker.waiting import Waiting

__all__ = ["Fairness", "Inbox", "Item"]  # Fairness: as loop.py has always imported it
log = logging.getLogger(__name__)


@functools.cache
def _limited(target: type) -> bool:
    """Whether targets of this type may have a rate limit (`destination_of`; asking a model
    without the field for it costs more than the rest of taking the execution in)."""
    return "rate_limit" in getattr(target, "model_fields", {"rate_limit": None})


def has_rate_limit(target: Target) -> bool:
    """Whether `target` has a rate limit set; a target type without the field is not asked
    (pydantic raises and catches an AttributeError for it: 1.7 µs, each entry of a batch)."""
    return _limited(type(target)) and getattr(target, "rate_limit", None) is not None


@dataclass
class Inbox(Waiting):
    _open: dict[int, dict[int, Item]] = field(default_factory=dict)
    """partition -> offset -> held item."""
    _held: dict[int, HeldRuns] = field(default_factory=dict)
    _points: CommitPoints = field(default_factory=CommitPoints)
    """partition -> the offsets of `_open`, as runs."""
    _next: dict[int, int] = field(default_factory=dict)
    """partition -> the offset after the last record read."""
    _replay: dict[int, tuple[int, frozenset[int]]] = field(default_factory=dict)
    """partition -> (read position, held offsets) from the previous owner's last commit."""
    _parked: dict[int, list[Item]] = field(default_factory=dict)
    """partition -> executions read during its replay, released when it ends (`_replayed`)."""
    _pinned: dict[int, dict[int, int]] = field(default_factory=dict)
    """partition -> revocation offset -> batches held that pin it (`Item.pins`)."""
    owed: Owed = field(default_factory=Owed)
    """Executions read and let go (`shed`, `refuses`), to read again (`backlog`)."""
    count: int = 0
    """Executions held (`_open`), and their bytes as read:"""
    size: int = 0
    max_count: int = 0
    """At most (0: no bound; `backlog` sets them), and bytes at most:"""
    max_size: int = 0
    _by_tenant: dict[str, int] = field(default_factory=dict)
    """tenant -> executions held."""
    _busy: Mapping[str, int] = field(default_factory=dict)
    """tenant -> slots its runs take, as `due` was last told."""
    _slotless: Callable[[Item], bool] = never
    _flying: Mapping[str, int] = field(default_factory=dict)
    """tenant -> its runs without a thread in flight, as `due` was last told."""
    assignments: int = 0
    """Partitions assigned so far (`resume` calls)."""
    max_leaseless: int | None = None
    """Leaseless executions one `due` hands out at most: what one transaction delivers
    (streams/worker/delivering.py sets it; None: every one due)."""

    # -- taking over a partition -------------------------------------------------------------

    def resume(self, partition: int, committed: int, metadata: str | None) -> None:
        """A partition was assigned; `metadata` is what its last commit carried."""
        self.assignments += 1
        parsed = decode_metadata(committed, metadata)
        if parsed is None:
            self._replay.pop(partition, None)
        else:
            self._replay[partition] = parsed

    def wanted(self, partition: int, offset: int) -> bool:
        """False for a record the previous owner already claimed or finished with (or, read
        again, one not owed)."""
        replay = self._replay.get(partition)
        if replay is None:
            return True
        upto, held = replay
        if offset >= upto:
            self._replayed(partition)
            return True
        return offset in held

    def _replayed(self, partition: int) -> None:
        """`partition` is read again up to where it had been: what its replay read waits for
        its due time now (the revocations after it have been read again too)."""
        del self._replay[partition]
        self.owed.rereading.pop(partition, None)
        for item in self._parked.pop(partition, ()):
            if item.held and not item.claimed:
                self._wait(item)

    def replaying(self) -> list[tuple[int, int]]:
        """(partition, read position to reach) of each replay that holds executions back."""
        return [(p, self._replay[p][0]) for p in self._parked if p in self._replay]

    def caught_up(self, partition: int) -> None:
        """The consumer has read all there is of `partition` (the log ends before the replay's
        read position: truncated, or emptied by retention): its replay ends."""
        if partition in self._replay:
            log.warning("executions[%d]: the log ends before its last read position", partition)
            self._replayed(partition)

    def add(
        self,
        partition: int,
        offset: int,
        ex: ExecutionRequested,
        record: bytes | None = None,
        *,
        leaseless: bool = False,
    ) -> Item | None:
        """Hold `ex` (`record`: its bytes as read; `leaseless`: never claimed ahead); None if
        it is let go instead (`refuses`)."""
        due = due_ms(ex.due_at)
        lane = destination_of(ex, partition, self.shards) if _limited(type(ex.target)) else None
        item = Item(partition, offset, ex, due, record=record, leaseless=leaseless, lane=lane)
        return self._taken(item)

    def add_batch(
        self,
        partition: int,
        offset: int,
        entries: list[tuple[ExecutionRequested, bytes]],
        *,
        leaseless: bool,
    ) -> Item | None:
        """Hold the executions of a batch read at `offset` (each with its bytes), all due at the
        same instant, as one item that moves them together (`Item.batch`); None if it is let go
        instead (`refuses`: all of them, owed as one record). They take no destination's rate
        limit (the scheduler batches none that has one)."""
        first = entries[0][0]
        due = due_ms(first.due_at)
        items = [
            Item(partition, offset, ex, due, record=raw, leaseless=leaseless) for ex, raw in entries
        ]
        head = Item(
            partition,
            offset,
            first,
            due,
            leaseless=leaseless,
            batch=items,
            weight=len(items),
            nbytes=sum(i.nbytes for i in items),
        )
        for item in items:
            item.head = head
        return self._taken(head)

    def _taken(self, item: Item) -> Item | None:
        """`item` (a record's, just read) held, or let go and owed (`refuses`): None."""
        self.read(item.partition, item.offset)
        if self.full() or self.refuses(item):
            self.owed.add(item.partition, item.offset, item.execution.tenant)
            again = self.owed.rereading.get(item.partition)
            if again is not None and not any(map(self._hungry, again)):
                self.owed.abandoned.add(item.partition)  # the rest would be let go again
            return None
        self._keep(item)
        if item.partition in self._replay:
            self._parked.setdefault(item.partition, []).append(item)
        else:
            self._wait(item)
        return item

    def full(self) -> bool:
        return 0 < self.max_count <= self.count or 0 < self.max_size <= self.size

    def stuck(self, item: Item) -> bool:
        """Its run cannot start now: its tenant is at its cap for runs of its kind."""
        return not self.starts(item, 0)

    def starts(self, item: Item, waiting: int) -> bool:
        """Whether `item` could start at once beside `waiting` runs of its tenant claimed: a
        leaseless one always (it is delivered in the turn's transaction), one without a thread
        below its tenant's share of those, one on the pool below its tenant's running cap."""
        if item.leaseless:
            return True
        tenant = item.execution.tenant
        if self._slotless(item):
            return not self._loose_capped(tenant, waiting)
        return not self._slot_capped(tenant, waiting)

    def _slot_capped(self, tenant: str, waiting: int = 0) -> bool:
        cap = self.fairness.cap(tenant) if self.fairness.by_tenant else 0
        return 0 < cap <= self._busy.get(tenant, 0) + waiting

    def _loose_capped(self, tenant: str, waiting: int = 0) -> bool:
        cap = self.fairness.async_cap if self.fairness.by_tenant else 0
        return 0 < cap <= self._flying.get(tenant, 0) + waiting

    def _capped(self, tenant: str) -> bool:
        return self._slot_capped(tenant) or self._loose_capped(tenant)

    def quota(self, tenant: str) -> int:
        """Executions a tenant at its running cap holds at most: twice that cap (its slots', or
        else its share of the runs without a thread)."""
        slots = self._slot_capped(tenant)
        return 2 * (self.fairness.cap(tenant) if slots else self.fairness.async_cap)

    def refuses(self, item: Item) -> bool:
        tenant = item.execution.tenant
        return self.stuck(item) and self._by_tenant.get(tenant, 0) >= self.quota(tenant)

    def shed(self) -> int:
        """Let go of the executions held of tenants `stuck` past their `quota` (the earliest
        due kept): owed, to read again. How many.

        Only a tenant at its cap (`_capped`: `stuck` needs it) holding more than its quota can
        lose any, so the held executions are looked at only when there is such a tenant, and
        then only theirs: a worker of Kafka-target runs (leaseless, never stuck) holding a
        30 s look-ahead past three quarters of its bound looked at each of them every second
        (SHED_INTERVAL_S) to let none go."""
        over = {
            t for t, held in self._by_tenant.items() if held > self.quota(t) and self._capped(t)
        }
        if not over:
            return 0
        stuck: dict[str, list[Item]] = {}
        for items in self._open.values():
            for item in items.values():
                if item.execution.tenant in over and item.held and self.stuck(item):
                    stuck.setdefault(item.execution.tenant, []).append(item)
        shed = 0
        for tenant, found in stuck.items():
            found.sort(key=lambda i: (i.due_ms, i.partition, i.offset))
            for item in found[self.quota(tenant) :]:
                self._unkeep(item)
                self._close(item)
                for offset in (item.offset, *(item.pins or ())):
                    self.owed.add(item.partition, offset, tenant)
                shed += 1
        if shed:
            self._purge()
        return shed

    def hungry(self, partition: int) -> bool:
        """A tenant with executions owed on `partition` would take them now (no longer at its
        cap, or holding half its quota or less)."""
        return any(map(self._hungry, self.owed.tenants.get(partition, ())))

    def _hungry(self, tenant: str) -> bool:
        return not self._capped(tenant) or self._by_tenant.get(tenant, 0) <= self.quota(tenant) // 2

    def abandon(self, partition: int) -> int | None:
        """Stop reading `partition` again (what it still owes stays owed): the offset to seek
        to, where the reading had got before; None if it is not being read again."""
        if partition not in self.owed.rereading or partition not in self._replay:
            self.owed.abandoned.discard(partition)
            return None
        upto, offsets = self._replay[partition]
        self.owed.restore(partition, offsets, self._next[partition])
        self._replayed(partition)  # what was read again and kept waits for its due time
        self._next[partition] = upto
        return upto

    def reread(self, partition: int) -> int | None:
        """Read again what `partition` owes (as after a take-over: `wanted` takes only those):
        the offset to seek to; None if it owes nothing or is still reading a replay."""
        if partition in self._replay or partition not in self._next:
            return None
        offsets = self.owed.take(partition)
        if not offsets:
            return None
        self._replay[partition] = (self._next[partition], frozenset(offsets))
        self._next[partition] = offsets[0]
        return offsets[0]

    def _keep(self, item: Item) -> None:
        opened = self._open.setdefault(item.partition, {})
        if item.offset in opened:
            return
        opened[item.offset] = item
        held = self._held.setdefault(item.partition, HeldRuns())
        held.add(item.offset)
        if item.pins:
            pinned = self._pinned.setdefault(item.partition, {})
            for offset in item.pins:
                pinned[offset] = pinned.get(offset, 0) + 1
                held.add(offset)
        tenant = item.execution.tenant
        self._by_tenant[tenant] = self._by_tenant.get(tenant, 0) + item.weight
        self.count += item.weight
        self.size += item.nbytes

    def _unkeep(self, item: Item) -> None:
        if self._open.get(item.partition, {}).pop(item.offset, None) is None:
            return
        held = self._held[item.partition]
        held.remove(item.offset)
        if item.pins:
            pinned = self._pinned[item.partition]
            for offset in item.pins:
                pinned[offset] -= 1
                if not pinned[offset]:
                    del pinned[offset]
                    held.remove(offset)
        tenant = item.execution.tenant
        self._by_tenant[tenant] -= item.weight
        if not self._by_tenant[tenant]:
            del self._by_tenant[tenant]
        self.count -= item.weight
        self.size -= item.nbytes

    def read(self, partition: int, offset: int) -> None:
        """A record was read (also one with nothing to hold: a revocation, a bad record)."""
        self._next[partition] = nxt = max(self._next.get(partition, 0), offset + 1)
        replay = self._replay.get(partition)
        if replay is not None and nxt >= replay[0]:  # read up to where the replay ends
            self._replayed(partition)

    def revoke(self, rev: ExecutionRevoked, partition: int = -1, offset: int = -1) -> bool:
        """Drop held executions that `rev` (read at `partition`, `offset`) revokes; True if one
        was dropped. Only those read before it on its partition: one read after it (a run
        dispatched again after its job's resume, under the same execution id) stands, also when
        a replay reads the revocation again. Owed when its partition owes an earlier offset
        (`owed`)."""
        if self.owed.before(partition, offset):
            self.owed.add(partition, offset, rev.tenant)
        dropped = False
        for items in self._open.values():
            for item in list(items.values()):
                if read_after(item, partition, offset):
                    continue  # it revokes what came before it on its partition
                if item.batch is not None:
                    dropped |= self._revoke_in(item, rev, partition, offset)
                    continue
                ex = item.execution
                same = ex.execution_id == rev.execution_id
                if same and ex.definition_version <= rev.definition_version:
                    self._unkeep(item)
                    self._close(item)
                    dropped = True
        return dropped

    def _revoke_in(
        self, head: Item, rev: ExecutionRevoked, partition: int = -1, offset: int = -1
    ) -> bool:
        """Take the executions `rev` (read at `partition`, `offset`) revokes out of the
        batch `head` holds (the batch goes once none is left); whether one was. While the rest
        is held, so is the revocation's offset (`Item.pins`)."""
        assert head.batch is not None
        gone = [
            i
            for i in head.batch
            if i.execution.execution_id == rev.execution_id
            and i.execution.definition_version <= rev.definition_version
        ]
        if not gone:
            return False
        self._unkeep(head)
        for item in gone:
            head.batch.remove(item)
            head.weight -= 1
            head.nbytes -= item.nbytes
            item.held = False
        if head.batch:
            head.execution = head.batch[0].execution
            if offset >= 0 and partition == head.partition:
                head.pins = [*(head.pins or ()), offset]
            self._keep(head)
        else:
            self._close(head)
        return True

    def due(
        self,
        now_ms: int,
        limit: int,
        running: Mapping[str, int] | None = None,
        *,
        room: int | None = None,
        slotless: Callable[[Item], bool] | None = None,
        loose: tuple[int, Mapping[str, int]] | None = None,
    ) -> list[Item]:
        """Held executions due by `now_ms`, tenants served by weighted deficit round robin.
        They stop being held (call `hold` to put one back if its claim fails).
        - `limit`: slots free. Each execution takes one, except those `slotless` accepts
          (their run needs no pool thread); a tenant at its running cap (`running`: tenant ->
          slots its runs take) takes no more slots.
        - `room`: executions not claimed ahead yet taken at most (what the worker's lease
          snapshot has room for); one claimed ahead is held already. Default: `limit`.
        - `loose`: runs `slotless` accepts taken at most, and tenant -> such runs in flight
          (a tenant at its `async_cap` takes no more). Default: `room`, none.
        A leaseless execution (delivered in this turn's transaction) takes none of these;
        `max_leaseless` of them are taken at most."""
        self._busy, self._slotless, self._now = running or {}, slotless or never, now_ms
        self._release(now_ms)
        out: list[Item] = []
        room = limit if room is None else room
        free, flying = loose or (room, {})
        self._flying = flying
        budget = Budget(limit, room, slotless or never, free, dict(flying), self.max_leaseless)
        busy = dict(running or {})
        while self._turns:
            progressed = False
            for _ in range(len(self._turns)):
                tenant = self._turns[0]
                self._turns.rotate(-1)
                progressed |= self._serve(tenant, out, budget, busy)
            if not progressed:
                break
        return out

    def _serve(self, tenant: str, out: list[Item], budget: Budget, busy: dict[str, int]) -> bool:
        """One round-robin turn of `tenant`: add its weight to its credit, take whole credits'
        worth of executions into `out` (their slots counted in `busy`). False if it cannot take
        at all."""
        queue = self._ready[tenant]
        while queue and not queue[0].held:
            queue.popleft()  # revoked, or its partition went away
        if not queue:
            self._retire(tenant)
            return False
        fair = self.fairness
        caps = (fair.cap(tenant), fair.async_cap) if fair.by_tenant else (0, 0)
        if not budget.admits(queue[0], tenant, busy.get(tenant, 0), caps):
            return False
        credit = self._deficit.get(tenant, 0.0) + self.fairness.weight(tenant)
        while queue and credit >= 1:
            item = queue[0]
            if not item.held:
                queue.popleft()
                continue
            if not budget.admits(item, tenant, busy.get(tenant, 0), caps):
                break
            queue.popleft()
            if item.lane is not None and self._throttled(item):
                continue  # it waits for its destination's next start (waiting.py)
            if budget.take(item, tenant):
                busy[tenant] = busy.get(tenant, 0) + item.weight
            self._unkeep(item)
            self._close(item)
            out.append(item)
            credit -= 1
        self._deficit[tenant] = credit if queue else 0.0
        return True  # it took, or gained credit towards taking in a later round

    def claim(self, item: Item) -> None:
        """`item` is being claimed ahead: the offset commit may pass it (the lease covers it);
        it keeps its place in due order."""
        item.claimed = True
        self._unkeep(item)

    def unclaim(self, item: Item) -> None:
        """The claim ahead did not commit: the offset commit covers it again (or, if its
        partition went away meanwhile, the next owner reads it again: dropped here)."""
        item.claimed = False
        if item.partition not in self._next:
            item.held = False
            return
        self._keep(item)
        self._offer(item)

    def hold(self, item: Item) -> None:
        """Back into the inbox (its claim did not commit); an execution of a batch puts its
        whole batch back, once."""
        if item.head is not None:
            item = item.head
            if item.held:
                return
        if item.partition not in self._next:
            return  # the partition is gone
        item.held = True
        self._keep(item)
        self._wait(item)

    def serve_claimed_only(self) -> None:
        """Draining: `due` serves claims ahead only. The rest stay held for the offset commit
        (their positions do not move): the partition's next owner reads them again."""
        for items in self._open.values():
            for item in items.values():
                item.held = False

    def offsets(self) -> dict[int, tuple[int, str]]:
        """Per partition read: the offset to commit (the first one still held) and the
        metadata naming the held ones after it."""
        held, owed, replay, point = (
            self._held.get,
            self.owed.runs.get,
            self._replay.get,
            self._points.of,
        )
        return {p: point(p, held(p), owed(p), nxt, replay(p)) for p, nxt in self._next.items()}

    def forget(self, partitions: set[int]) -> None:
        """Partitions revoked: their held executions are the next owner's to read again (ones
        claimed ahead stay: the commit passed them, this worker's lease covers them)."""
        for p in partitions:
            for item in list(self._open.get(p, {}).values()):
                self._unkeep(item)
                self._close(item)
            self._open.pop(p, None)
            self._parked.pop(p, None)
            self._pinned.pop(p, None)
            self.owed.forget(p)
            self._held.pop(p, None)
            self._next.pop(p, None)
            self._replay.pop(p, None)

    def __len__(self) -> int:
        return self.count

    @staticmethod
    def _close(item: Item) -> None:
        item.held = False
