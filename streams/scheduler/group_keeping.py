"""What the scheduler keeps of concurrency groups beside the jobs (`groups` holds their rules):
each group's index of runs (`~group/<routing key>`), its waiting line (`~waiting/<routing
key>`), and the group held by a job deleted while its runs were in progress (`~gone/<job
key>`). When a group becomes free, its waiting line says which jobs may start what waits; the
processor starts them in the same transaction as the step that freed it."""

from __future__ import annotations

from collections.abc import Iterator

from kadence.codec import Codec
from kadence.models import ExecutionRequested, ScheduleDefinition
from streams.runtime.context import ProcessorContext
from streams.scheduler import groups
from streams.scheduler.job_store import JobStore
from streams.scheduler.state import JobState
from streams.scheduler.step import Effects, Sink

GROUP_PREFIX = b"~group/"
WAITING_PREFIX = b"~waiting/"
GONE_PREFIX = b"~gone/"
WAKE_LIMIT = 16
"""Jobs of a group woken at most when its run ends (one that cannot start lets the next try)."""


class Groups:
    def __init__(self, codec: Codec, store: JobStore) -> None:
        self.codec = codec
        self.store = store

    def group(self, ctx: ProcessorContext, d: ScheduleDefinition) -> groups.Group:
        return groups.load(ctx.get(GROUP_PREFIX + d.routing_key.encode()))

    def waiting(self, ctx: ProcessorContext, routing_key: str) -> list[str]:
        return groups.load_waiting(ctx.get(WAITING_PREFIX + routing_key.encode()))

    def standing(
        self, ctx: ProcessorContext, d: ScheduleDefinition, now_ms: int
    ) -> tuple[int, bool]:
        """Where `d`'s job stands in its group: until when the other jobs' runs hold the group
        (`groups.busy_until`), and whether no job waits before it (`groups.turn`)."""
        until = groups.busy_until(self.group(ctx, d), d.key, now_ms)
        return until, groups.turn(self.waiting(ctx, d.routing_key), d.key)

    def kept(
        self,
        ctx: ProcessorContext,
        d: ScheduleDefinition,
        state: JobState,
        effects: Effects,
        now_ms: int,
    ) -> bool:
        """Keep the group's index and waiting line up to date after a step of `d`'s job;
        True when the group has no run left (its waiting line may start: `line`)."""
        route = d.routing_key.encode()
        group = groups.with_runs(self.group(ctx, d), d.key, state.running)
        ctx.put(GROUP_PREFIX + route, groups.dump(group), None)
        started = any(
            e.sink is Sink.executions and isinstance(e.record, ExecutionRequested)
            for e in effects.out
        )
        waits = bool(state.buffered or state.backfills)
        line = self.waiting(ctx, d.routing_key)
        line = groups.in_line(line, d.key, waits=waits, started=started)
        ctx.put(WAITING_PREFIX + route, groups.dump_waiting(line), None)
        return not groups.busy(group, "", now_ms)

    def line(
        self, ctx: ProcessorContext, routing_key: str, now_ms: int
    ) -> Iterator[tuple[bytes, JobState]]:
        """The group has no run: the jobs in its waiting line, first come first, each to start
        what it waits for (the caller writes that step before asking for the next), until one
        has started a run (at most `WAKE_LIMIT` tries). A job no longer in the group leaves
        the line."""
        route = routing_key.encode()
        for job in self.waiting(ctx, routing_key)[:WAKE_LIMIT]:
            key = job.encode()
            other = self.store.load(ctx, key)
            if other is None or other.definition(self.codec).routing_key != routing_key:
                left = [k for k in self.waiting(ctx, routing_key) if k != job]
                ctx.put(WAITING_PREFIX + route, groups.dump_waiting(left), None)
                continue
            yield key, other
            if groups.busy(groups.load(ctx.get(GROUP_PREFIX + route)), "", now_ms):
                return

    def leave(
        self, ctx: ProcessorContext, key: bytes, state: JobState, now_ms: int, *, deleted: bool
    ) -> None:
        """The job leaves its concurrency group (deleted, or its key changed): out of the
        waiting line. A deleted job's runs in progress keep the group busy until their outcomes
        (`~gone/<job>` says which group they hold), or their expiry."""
        d = state.definition(self.codec)
        if not d.concurrency_key:
            return
        route = d.routing_key.encode()
        line = [k for k in self.waiting(ctx, d.routing_key) if k != d.key]
        ctx.put(WAITING_PREFIX + route, groups.dump_waiting(line), None)
        group = self.group(ctx, d)
        if deleted and any(r.expires_ms > now_ms for r in state.running):
            ctx.put(GONE_PREFIX + key, route, None)
            return
        ctx.put(GROUP_PREFIX + route, groups.dump(groups.with_runs(group, d.key, ())), None)

    @staticmethod
    def back(ctx: ProcessorContext, key: bytes) -> None:
        """A job deleted while its runs were in progress is defined again: its old runs no
        longer tell on its group."""
        if ctx.get(GONE_PREFIX + key):
            ctx.put(GONE_PREFIX + key, None, None)

    @staticmethod
    def gone_run_ended(
        ctx: ProcessorContext, key: bytes, execution_id: str, now_ms: int
    ) -> str | None:
        """A run of a job deleted while it ran has ended: it no longer holds its group. Returns
        the group's routing key when the group has no run left (its line may start), else
        None."""
        route = ctx.get(GONE_PREFIX + key)
        if route is None:
            return None
        group = groups.load(ctx.get(GROUP_PREFIX + route))
        group = groups.without_run(group, key.decode(), execution_id)
        ctx.put(GROUP_PREFIX + route, groups.dump(group), None)
        if key.decode() not in group:
            ctx.put(GONE_PREFIX + key, None, None)
        return None if groups.busy(group, "", now_ms) else route.decode()
