"""What the runtime drives: a processor, called with the narrow context of one partition."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from streams.runtime.coalescing import Coalescer
from streams.runtime.context import ProcessorContext
from streams.runtime.records import InputRecord


class Processor(Protocol):
    """Every call runs inside the open transaction, as a unit of work of its own: what it
    wrote and forwarded takes effect whole or not at all."""

    def process(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None: ...

    def fire(self, ctx: ProcessorContext, key: bytes, now_ms: int) -> None: ...

    def refuse(
        self, ctx: ProcessorContext, record: InputRecord, exc: Exception, now_ms: int
    ) -> None:
        """`process` raised: record why (a `rejected` record) and go on with the next input."""
        ...

    def quarantine(self, ctx: ProcessorContext, key: bytes, exc: Exception, now_ms: int) -> None:
        """`fire` raised for `key`: keep it from firing again, say so, and go on."""
        ...

    def prefetch(self, ctx: ProcessorContext, key: bytes) -> None:
        """`key` entered the timer window: decode ahead, not at the due time."""
        ...

    def maintain(self, ctx: ProcessorContext, now_ms: int) -> bool:
        """One bounded step of after-assignment upkeep; True when there is nothing left."""
        ...


@runtime_checkable
class Replaying(Protocol):
    """A processor that defers writes (`ProcessorContext.defer`) replays the inputs of the
    runner's `replay_topics` and writes what waited too long."""

    def replay(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        """`record` was processed before (it lies before the committed offset): apply what its
        deferred effect was, producing nothing."""
        ...

    def flush(self, ctx: ProcessorContext, key: bytes, now_ms: int) -> None:
        """Write the deferred state of `key` (`ctx.deferred_state(key)`)."""
        ...


@runtime_checkable
class Splitting(Protocol):
    """A processor whose inputs may carry several entries in one record (a worker's batch of
    outcomes): each entry is processed as a unit of its own, and the record's offset moves once
    all of them are done (no commit falls between two entries of one record)."""

    def split(self, record: InputRecord) -> Sequence[InputRecord]:
        """The units `record` holds: itself (maybe with `decoded` set), or one per entry, each
        keyed as its own record would be. Never raises: what cannot be split is returned whole
        (`process` then refuses it with the reason)."""
        ...


@runtime_checkable
class Together(Protocol):
    """A splitting processor that takes the entries of one record as one unit of work: what
    is done once per unit (the unit's undo log, the settle check) and what the entries share
    (a tenant's caps, its breaker) are done once per record. Should the unit raise, the runtime
    undoes it and processes each entry as a unit of its own, as `Splitting` does, so the one
    that raises is refused alone and the others take effect."""

    def process_together(
        self, ctx: ProcessorContext, records: Sequence[InputRecord], now_ms: int
    ) -> None:
        """What `process` does for each of `records` in turn, in one unit of work."""
        ...


@runtime_checkable
class Coalescing(Protocol):
    """A processor some of whose records are written together (`ProcessorContext.forward` with
    a group: streams/runtime/coalescing.py)."""

    def coalescer(self, record_limit: int) -> Coalescer | None:
        """The coalescer of the process's tasks, one for all of them (None: groups are
        ignored), its records within `record_limit` bytes: a group takes the records of every
        partition the process owns, as its transaction does."""
        ...


@runtime_checkable
class Owning(Protocol):
    """A processor that keeps something over every partition its process owns (a tenant's
    runs in progress, counted per partition in each one's store and judged per process)."""

    def owned(self, tasks: Mapping[int, ProcessorContext]) -> None:
        """The process owns `tasks` now, each as its store holds it: after an assignment, a
        revocation, or an abort that put every task back to its last commit. Called between
        units of work (no transaction's writes are pending)."""
        ...
