"""A job's state in its partition's store: the one place it is read and written.

A job is kept under its key (`tenant/job`: its run state, with its wake time in the due index)
and `~def/<job key>` (its definition, written once per version: stored.py). A job that fires
soon or awaits an outcome stays decoded in the context's cache, within a bound. Every read and
write is told to the tenants' caps (`TenantRuns`), which count runs in progress by the
difference a write makes to what the job held when it was read."""

from __future__ import annotations

from collections.abc import Mapping

from kadence.codec import Codec
from streams.runtime.context import ProcessorContext
from streams.scheduler.later import Waiting, caught_up, current
from streams.scheduler.state import JobState, fit_state
from streams.scheduler.stored import definition_key, definition_to_write, stored_state
from streams.scheduler.tenant_limits import TenantRuns

AWAITING_CACHE_LIMIT = 20_000
"""Jobs kept decoded while they await an outcome, per process at most: the outcome then finds
them decoded (about 100 µs less each), but a burst whose outcomes are slow to come (workers
down) must not hold every job's state in memory (B1 at 100 000 with no workers: 781 MiB RSS).
Each partition's task has a cache of its own, so a partition keeps them only while its cache
holds fewer than its share, this over the job partitions (1 666 of 12 by default): the whole
of it per partition never bound B1 (8 300 jobs a partition)."""
WAKE_BYTES = 8
"""The wake time the store packs before each value (streams/runtime/store.py, `pack`)."""


class JobStore:
    def __init__(
        self,
        codec: Codec,
        tenants: TenantRuns,
        job_partitions: int,
        awaiting_limit: int = AWAITING_CACHE_LIMIT,
    ) -> None:
        self.codec = codec
        self.tenants = tenants
        self.awaiting_share = max(1, awaiting_limit // job_partitions)
        """Jobs awaiting an outcome a partition keeps decoded: its share of the process's."""

    def load(self, ctx: ProcessorContext, key: bytes) -> JobState | None:
        """The job under `key` (None: no such job), decoded from the cache when it is there,
        with the successes that wait for it applied (later.py)."""
        cached = self.decoded(ctx, key)
        if isinstance(cached, Waiting):
            cached = self._caught_up(ctx, key, cached)
        if cached is not None:
            self.tenants.loaded(key, cached)
            return cached
        state = stored_state(ctx.get, key)
        self.tenants.loaded(key, state)
        return state

    @staticmethod
    def decoded(ctx: ProcessorContext, key: bytes) -> JobState | Waiting | None:
        """The job under `key` as kept decoded (with successes waiting for it, perhaps), or
        None when it is not (then only `load` reads it)."""
        cached = ctx.cache.get(key)
        if cached is None:
            cached = ctx.deferred_state(key)  # newer than the store's (write_behind.py)
        assert cached is None or isinstance(cached, JobState | Waiting)
        return cached

    def wait(
        self,
        ctx: ProcessorContext,
        key: bytes,
        waiting: Waiting,
        *,
        topic: str,
        offset: int,
        now_ms: int,
    ) -> None:
        """Keep the job's successes waiting (later.py) as a deferred state is kept: the input
        at `offset` of `topic` and later ones rebuild them on a replay."""
        ctx.cache[key] = waiting
        ctx.defer(key, topic, offset, now_ms, waiting)

    @staticmethod
    def _caught_up(ctx: ProcessorContext, key: bytes, waiting: Waiting) -> JobState:
        """The waiting successes applied, kept in their place (same replay point)."""
        state = caught_up(waiting)
        ctx.cache[key] = state
        ctx.redefer(key, state)
        return state

    def write(
        self,
        ctx: ProcessorContext,
        key: bytes,
        state: JobState | None,
        scheduled: Mapping[int, int],
        now_ms: int,
    ) -> JobState | None:
        """Store `state` under `key` (None deletes the job and its definition), having started
        `scheduled` runs (per second they may start in); returns the state as stored, its
        history trimmed to fit a record (`fit_state`)."""
        self.tenants.written(ctx, key, scheduled, state, now_ms)
        if state is None:
            ctx.put(key, None, None)
            ctx.put(definition_key(key), None, None)
            ctx.cache.pop(key, None)
            return None
        return self.store(ctx, key, state)

    def store(self, ctx: ProcessorContext, key: bytes, state: JobState) -> JobState:
        """Put `state` under `key` as it fits (what `write` does once the tenants' caps were
        told; a deferred state written later is stored so, as they were told already)."""
        state, data = fit_state(state, ctx.record_limit - len(key) - WAKE_BYTES)
        wake = state.wake_ms
        if (definition := definition_to_write(state)) is not None:
            ctx.put(definition_key(key), definition, None)
        ctx.put(key, data, wake)
        fires_soon = wake is not None and wake <= ctx.timers_loaded_until_ms
        awaits = bool(state.running) and len(ctx.cache) < self.awaiting_share
        if fires_soon or awaits:
            ctx.cache[key] = state  # fires soon or awaits an outcome: keep it decoded
        else:
            ctx.cache.pop(key, None)
        return state

    def defer(
        self,
        ctx: ProcessorContext,
        key: bytes,
        state: JobState,
        *,
        topic: str,
        offset: int,
        now_ms: int,
    ) -> None:
        """Leave `state` unwritten for now (write_behind.py), kept decoded: the input at
        `offset` of `topic` rebuilds it on a replay; the job's next write stores it."""
        ctx.cache[key] = state
        ctx.defer(key, topic, offset, now_ms, state)

    def prefetch(self, ctx: ProcessorContext, key: bytes) -> None:
        """Decode the job under `key` (if any) and keep it decoded: it fires soon."""
        if key in ctx.cache:
            return
        state = self.load(ctx, key)
        if state is not None:
            state.compiled(self.codec)
            ctx.cache[key] = state

    def quarantine(self, ctx: ProcessorContext, key: bytes) -> None:
        """The job under `key` keeps its state (what waited to be written too) but leaves the
        due index: it no longer fires."""
        waiting = current(ctx.deferred_state(key))
        if waiting is not None:
            self.store(ctx, key, waiting)
        raw = ctx.get(key)
        if raw is not None:
            ctx.put(key, raw, None)
        ctx.cache.pop(key, None)
