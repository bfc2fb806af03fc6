"""A partition's task: its store, the open batch, its timer wheel, units of work.

The task is what a processor's `ProcessorContext` is made of (streams/runtime/context.py): it
reads your own writes, keeps the open transaction's writes in a batch (changelogged once per key
when the transaction commits: the last value wins, a delete is a tombstone), stages records so a
unit of work takes effect whole or not at all, and loads due timers from the store's index and
from the batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from kadence.errors import RecordTooLargeError
from kadence.log_limit import LogLimit
from kadence.sizing import RECORD_LIMIT, check_fits, record_bytes
from streams.runtime.coalescing import Coalescer
from streams.runtime.context import ALONE_HEADROOM, Headers, HeadersLater
from streams.runtime.deferred import Deferred, Entry, replay_key
from streams.runtime.store import Batch, Store, pack, payload_of, wake_of
from streams.runtime.wheel import TimerWheel

log = logging.getLogger(__name__)
_LIMIT = LogLimit()


Kept = tuple[Any, Callable[[Any], bytes]]
"""A value kept to be written at the commit, and how it is encoded then (`Task.keep`)."""


@dataclass(slots=True)
class _Unit:
    """What one unit of work did so far: batch entries before it touched them, its records."""

    undo: dict[bytes, tuple[bool, bytes | None]] = field(default_factory=dict)
    deferred: dict[bytes, Entry | None] = field(default_factory=dict)
    """Keys whose deferred entry it changed, and the entry before it (deferred.py)."""
    staged: list[
        tuple[str, int | None, bytes | None, bytes | None, Headers | HeadersLater, Hashable | None]
    ] = field(default_factory=list)
    """Its records, each with its group (`forward`)."""
    kept: dict[bytes, Kept | None] = field(default_factory=dict)
    """Keys whose kept value it changed, and the kept value before it (None: none)."""


class Task:
    """Everything one partition owns: its store, the open batch, its timer wheel, a cache."""

    def __init__(self, partition: int, store: Store, now_ms: int, window_ms: int) -> None:
        self.partition = partition
        self.store = store
        self.batch = Batch()
        self.wheel = TimerWheel(now_ms)
        self.window_ms = window_ms
        self.loaded_until_ms = -1
        """The due index is loaded into the wheel up to here; -1: nothing yet, so the first
        load also picks up everything that fell due while no one owned the partition."""
        self.cache: dict[bytes, Any] = {}
        """Processor-owned decoded state; dropped on abort and revoke."""
        self._emit: Callable[[str, int | None, bytes | None, bytes | None, Headers], None] = (
            lambda *_: None
        )
        """Where finished units' records go: the runner's transactional produce (tests collect
        them here)."""
        self.coalescer: Coalescer | None = None
        """Where records forwarded with a group wait for the commit (None: written at once,
        their group ignored): streams/runtime/coalescing.py."""
        self.changelog: str = ""
        self.maintenance_pending = True
        """The processor's `maintain` runs, in bounded steps, until it reports done."""
        self.prefetch: Callable[[bytes], None] = lambda _key: None
        """Called for each key entering the timer window: decode ahead, not at the due time."""
        self.record_limit = RECORD_LIMIT
        self.urgent = False
        """A unit asked for the open transaction to be committed at the end of this turn."""
        self.deferred = Deferred()
        """Keys whose newest state is only in memory (streams/runtime/deferred.py)."""
        self.replay_topics: tuple[str, ...] = ()
        """Inputs whose replay point is stored with each commit (the runner's config)."""
        self._units: list[_Unit] = []
        self.kept: dict[bytes, Kept] = {}
        """Values written when the transaction commits (`keep`), by key."""
        self._ahead: dict[bytes, int] = {}
        """Batch keys whose wake time lies beyond the loaded window: the store's due index does
        not have them until the batch is applied, so `load_window` takes them from here."""

    # -- state -------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """Read your own writes: a kept value, the open batch, then the store."""
        kept = self.kept.get(key)
        if kept is not None:
            return kept[1](kept[0])
        value = self.batch.values[key] if key in self.batch.values else self.store.get(key)
        return payload_of(value) if value is not None else None

    def put(self, key: bytes, payload: bytes | None, wake_ms: int | None) -> None:
        """Write state (None deletes); it is changelogged when this transaction commits (sized
        now, so a value too large fails the unit that wrote it)."""
        value = pack(wake_ms, payload) if payload is not None else None
        check_fits(self.changelog, key, value, (), self.record_limit)
        if self._units:
            undo = self._units[-1].undo
            if key not in undo:
                undo[key] = (key in self.batch.values, self.batch.values.get(key))
        if key in self.deferred:
            self._note_deferred(key, self.deferred.written(key))
        if key in self.kept:  # this write is the newer
            self._note_kept(key)
            del self.kept[key]
        self.batch.put(key, value)
        self._track_wake(key, wake_ms if value is not None else None)

    def keep(self, key: bytes, value: Any, encode: Callable[[Any], bytes]) -> None:
        """Write `value` when the transaction commits, encoded by `encode` then (the last kept
        value of the key wins; context.py). Sized when this transaction first keeps it."""
        if key not in self.kept:
            check_fits(self.changelog, key, pack(None, encode(value)), (), self.record_limit)
        self._note_kept(key)
        self.kept[key] = (value, encode)
        self.cache[key] = value

    def _note_kept(self, key: bytes) -> None:
        if self._units:
            self._units[-1].kept.setdefault(key, self.kept.get(key))

    def _write_kept(self) -> None:
        """At the commit: the kept values into the batch, each encoded once. A value that grew
        too large since it was first sized is not written, and says so (bounded values are
        kept: a breaker, a count)."""
        for key, (value, encode) in self.kept.items():
            packed = pack(None, encode(value))
            try:
                check_fits(self.changelog, key, packed, (), self.record_limit)
            except RecordTooLargeError as exc:
                log.error("partition %d: kept %r not written: %s", self.partition, key[:300], exc)
                continue
            self.batch.put(key, packed)
            self._track_wake(key, None)
        self.kept.clear()

    def defer(self, key: bytes, topic: str, offset: int, now_ms: int, state: Any) -> None:
        """Leave the key unwritten: `state` is its newest, the input at `offset` of `topic`
        (and later ones) rebuild it on replay. Its next `put` writes it."""
        self._note_deferred(key, self.deferred.defer(key, topic, offset, now_ms, state))

    def deferred_state(self, key: bytes) -> Any:
        """The key's newest state when it waits to be written, else None."""
        entry = self.deferred.get(key)
        return None if entry is None else entry.state

    def redefer(self, key: bytes, state: Any) -> None:
        """A key left unwritten has `state` as its newest now, in another form (the same
        inputs rebuild it): its replay point stays. Nothing happens to a key not waiting."""
        entry = self.deferred.get(key)
        if entry is not None:
            self.defer(key, entry.topic, entry.offset, entry.since_ms, state)

    def replay_point(self, topic: str) -> int | None:
        """The stored replay point on `topic`: re-read from here after a restore or an abort."""
        raw = self.get(replay_key(topic))
        return int(raw) if raw else None

    def store_replay_points(self) -> None:
        """Just before a commit: store each replay point that changed (deleted once nothing
        waits), in the same transaction as the input offsets."""
        for topic, offset in self.deferred.points(self.replay_topics).items():
            if offset != self.replay_point(topic):
                key = replay_key(topic)
                self.put(key, None if offset is None else str(offset).encode(), None)

    def _note_deferred(self, key: bytes, before: Entry | None) -> None:
        if self._units:
            self._units[-1].deferred.setdefault(key, before)

    def _track_wake(self, key: bytes, wake_ms: int | None) -> None:
        if wake_ms is not None and wake_ms > self.loaded_until_ms:
            self._ahead[key] = wake_ms
            return
        self._ahead.pop(key, None)
        if wake_ms is not None:
            self.wheel.insert(wake_ms, key)

    def commit_soon(self) -> None:
        """What this unit produced should be visible now: commit at the end of this turn."""
        self.urgent = True

    def changelog_records(self) -> None:
        """Send the open batch to the changelog, one record per key: its last value, or a
        tombstone; and the groups that wait (`coalescer`). Called by the runner just before
        the transaction commits."""
        self._write_kept()
        if self.coalescer is not None:
            self.coalescer.flush(self._emit)
        for key, value in self.batch.values.items():
            self._emit(self.changelog, self.partition, key, value, [])

    def committed(self, changelog_offset: int | None) -> None:
        """The transaction committed: apply its batch to the store, with the changelog offset."""
        batch = self.batch
        if changelog_offset is not None:
            batch.changelog_offset = changelog_offset
        if batch:
            self.store.apply(batch)
        self.batch = Batch()
        self._ahead.clear()  # in the store's due index now, beyond the loaded window
        self.urgent = False

    def forward(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | HeadersLater,
        *,
        group: Hashable | None = None,
    ) -> None:
        """Produce a record in the open transaction (sized against `record_limit` first); a
        None value is a tombstone. `group`, and headers made later: see
        ProcessorContext.forward."""
        self._send(topic, partition, key, value, headers, group=group)

    def keys_after(self, after: bytes, limit: int) -> list[bytes]:
        """Up to `limit` stored keys greater than `after`, in order (a resumable full scan of
        the store; the open transaction's writes are not in it yet)."""
        return self.store.keys_after(after, limit)

    @property
    def timers_loaded_until_ms(self) -> int:
        return self.loaded_until_ms

    def _send(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | HeadersLater,
        *,
        group: Hashable | None = None,
    ) -> None:
        if callable(headers):  # made when written alone: sized with room for them, if it has it
            limit = self.record_limit - ALONE_HEADROOM
            if group is None or self.coalescer is None or record_bytes(key, value) > limit:
                headers = headers()
                check_fits(topic, key, value, headers, self.record_limit)
            else:
                check_fits(topic, key, value, (), limit)
        else:
            check_fits(topic, key, value, headers, self.record_limit)
        if self._units:
            self._units[-1].staged.append((topic, partition, key, value, headers, group))
        else:
            self._out(topic, partition, key, value, headers, group)

    def _out(  # noqa: PLR0917 - a record's parts
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | HeadersLater,
        group: Hashable | None,
    ) -> None:
        """A finished unit's record: written, or kept with its group for the commit (as is a
        record that must follow groups kept on its partition)."""
        coalescer = self.coalescer
        if coalescer is not None and (group is not None or coalescer.waits(topic, partition)):
            coalescer.add((topic, partition, key, value, headers), group)
        else:
            self._emit(topic, partition, key, value, headers() if callable(headers) else headers)

    # -- units of work -----------------------------------------------------------------------

    def attempt(self, work: Callable[[], None], on_error: Callable[[Exception], None]) -> bool:
        """Run `work` as one unit: its state writes and records take effect together or not at
        all. If it raises (a bug, a record too large to write), everything it did is undone
        and `on_error(exc)` runs as a unit of its own (refuse the input, quarantine the key);
        should that fail too, it is undone and logged. Units nest: an inner unit that fails
        leaves what the outer one did. True when `work` succeeded."""
        self._units.append(_Unit())
        try:
            work()
        except Exception as exc:
            self._rollback()
            self._units.append(_Unit())
            try:
                on_error(exc)
            except Exception:
                self._rollback()
                log.exception("partition %d: handling a failed unit failed too", self.partition)
            else:
                self._finish()
            return False
        self._finish()
        return True

    def _finish(self) -> None:
        unit = self._units.pop()
        if self._units:
            outer = self._units[-1]
            for key, before in unit.undo.items():
                outer.undo.setdefault(key, before)
            for key, entry in unit.deferred.items():
                outer.deferred.setdefault(key, entry)
            for key, was in unit.kept.items():
                outer.kept.setdefault(key, was)
            outer.staged.extend(unit.staged)
            return
        for record in unit.staged:
            self._out(*record)

    def _rollback(self) -> None:
        unit = self._units.pop()
        for key, (present, before) in unit.undo.items():
            self._ahead.pop(key, None)
            if present:
                self.batch.values[key] = before
                wake = wake_of(before)
                if wake is not None and wake > self.loaded_until_ms:
                    self._ahead[key] = wake
            else:
                self.batch.values.pop(key, None)
            self.cache.pop(key, None)
        for key, entry in unit.deferred.items():
            self.deferred.restore(key, entry)
            self.cache.pop(key, None)  # loaded again: from the entry put back, or the store
        for key, was in unit.kept.items():
            if was is None:
                self.kept.pop(key, None)
            else:
                self.kept[key] = was
            self.cache.pop(key, None)

    # -- timers ------------------------------------------------------------------------------

    def load_window(self, now_ms: int) -> None:
        """Move the stored timers due up to `now_ms + window_ms` into the wheel. The runner
        loads the first window when the partition is assigned, before any record is
        processed: a timer set in the first turn is then in the wheel (`put` adds what falls
        inside the loaded window) and not only in a batch the store has not seen yet."""
        horizon = now_ms + self.window_ms
        if horizon > self.loaded_until_ms:
            self.wheel.advance_to(now_ms)
            values = self.batch.values
            for wake, key in self.store.due_between(self.loaded_until_ms, horizon):
                if key not in values:  # the open batch's value decides (below, or `put` did)
                    self._load_timer(wake, key)
            for key, wake in list(self._ahead.items()):
                if wake <= horizon:
                    del self._ahead[key]
                    self._load_timer(wake, key)
            self.loaded_until_ms = horizon

    def _load_timer(self, wake: int, key: bytes) -> None:
        if not self.wheel.insert(wake, key):
            raise RuntimeError(f"timer wheel span too small for the {self.window_ms} ms window")
        try:
            self.prefetch(key)
        except Exception as exc:  # only a head start: firing decodes it again (or quarantines it)
            if _LIMIT.allow(("prefetch", type(exc))):
                log.warning(
                    "partition %d: prefetching %r failed (%d similar lines held back): %s",
                    self.partition,
                    key[:300],
                    _LIMIT.take_held_back(),
                    exc,
                )

    def due(self, now_ms: int, limit: int) -> list[bytes]:
        """Keys whose wake time has come (never early), loading the next window from the index."""
        self.load_window(now_ms)
        keys: list[bytes] = []
        for wake, key in self.wheel.pop_due(now_ms, limit):
            value = self.batch.values[key] if key in self.batch.values else self.store.get(key)
            current = wake_of(value)
            if current is not None and current == wake:  # stale entries were moved or deleted
                keys.append(key)
        return keys

    def reset_after_abort(self, now_ms: int) -> None:
        self.maintenance_pending = True
        if self.coalescer is not None:
            self.coalescer.clear()
        self._units.clear()
        self.batch = Batch()
        self.kept.clear()
        self._ahead.clear()
        self.urgent = False
        self.cache.clear()
        self.deferred.clear()  # rebuilt by reading again from the replay point (loop.py)
        self.wheel.clear(now_ms)
        self.loaded_until_ms = -1
        self.load_window(now_ms)  # before the re-read records set timers (see load_window)
