"""The processor's part of concurrency groups: the group index and waiting line it keeps
beside the jobs (`groups` holds their rules), and waking the job whose turn it is when the
group becomes free, in the same transaction as the step that freed it."""

from __future__ import annotations

from dataclasses import replace

from kadence.codec import Codec
from kadence.models import ExecutionRequested, ScheduleDefinition
from streams.runtime.context import ProcessorContext
from streams.scheduler import firing, groups
from streams.scheduler.state import JobState
from streams.scheduler.step import Effects, Facts, Sink

GROUP_PREFIX = b"~group/"
WAITING_PREFIX = b"~waiting/"
GONE_PREFIX = b"~gone/"
WAKE_LIMIT = 16
"""Jobs of a group woken at most when its run ends (one that cannot start lets the next try)."""


class GroupKeeping:
    """Mixed into the scheduler processor, which provides the methods declared here."""

    codec: Codec

    def _load(self, ctx: ProcessorContext, key: bytes) -> JobState | None:
        raise NotImplementedError

    def _facts(
        self, ctx: ProcessorContext, state: JobState | None, now_ms: int, tenant: str | None = None
    ) -> Facts:
        raise NotImplementedError

    def _write(
        self,
        ctx: ProcessorContext,
        key: bytes,
        effects: Effects,
        *,
        now_ms: int,
        tenant: str | None = None,
        wake_group: bool = True,
    ) -> None:
        raise NotImplementedError

    def _group(self, ctx: ProcessorContext, d: ScheduleDefinition) -> groups.Group:
        return groups.load(ctx.get(GROUP_PREFIX + d.routing_key.encode()))

    def _waiting(self, ctx: ProcessorContext, routing_key: str) -> list[str]:
        return groups.load_waiting(ctx.get(WAITING_PREFIX + routing_key.encode()))

    def _in_group(
        self,
        ctx: ProcessorContext,
        d: ScheduleDefinition,
        state: JobState,
        effects: Effects,
        *,
        now_ms: int,
        wake: bool,
    ) -> None:
        """Keep the group's index and waiting line up to date after a step of `d`'s job; when
        the group has no run left, start the waiting runs of the jobs in line (`WAKE_LIMIT`)."""
        route = d.routing_key.encode()
        group = groups.with_runs(self._group(ctx, d), d.key, state.running)
        ctx.put(GROUP_PREFIX + route, groups.dump(group), None)
        started = any(
            e.sink is Sink.executions and isinstance(e.record, ExecutionRequested)
            for e in effects.out
        )
        waits = bool(state.buffered or state.backfills)
        line = self._waiting(ctx, d.routing_key)
        line = groups.in_line(line, d.key, waits=waits, started=started)
        ctx.put(WAITING_PREFIX + route, groups.dump_waiting(line), None)
        if wake and not groups.busy(group, "", now_ms):
            self._wake_line(ctx, d.routing_key, now_ms)

    def _wake_line(self, ctx: ProcessorContext, routing_key: str, now_ms: int) -> None:
        """The group has no run: the jobs in its waiting line, first come first, start what
        waits, until one has started a run (at most `WAKE_LIMIT` tries)."""
        route = routing_key.encode()
        for job in self._waiting(ctx, routing_key)[:WAKE_LIMIT]:
            key = job.encode()
            other = self._load(ctx, key)
            if other is None or other.definition(self.codec).routing_key != routing_key:
                left = [k for k in self._waiting(ctx, routing_key) if k != job]
                ctx.put(WAITING_PREFIX + route, groups.dump_waiting(left), None)
                continue
            facts = replace(self._facts(ctx, other, now_ms), group_turn=True)
            effects = firing.on_group_free(other, facts)
            self._write(ctx, key, effects, now_ms=now_ms, wake_group=False)
            if groups.busy(groups.load(ctx.get(GROUP_PREFIX + route)), "", now_ms):
                return

    def _leave_group(
        self, ctx: ProcessorContext, key: bytes, state: JobState, now_ms: int, *, deleted: bool
    ) -> None:
        """The job leaves its concurrency group (deleted, or its key changed): out of the
        waiting line. A deleted job's runs in progress keep the group busy until their outcomes
        (`~gone/<job>` says which group they hold), or their expiry."""
        d = state.definition(self.codec)
        if not d.concurrency_key:
            return
        route = d.routing_key.encode()
        line = [k for k in self._waiting(ctx, d.routing_key) if k != d.key]
        ctx.put(WAITING_PREFIX + route, groups.dump_waiting(line), None)
        group = self._group(ctx, d)
        if deleted and any(r.expires_ms > now_ms for r in state.running):
            ctx.put(GONE_PREFIX + key, route, None)
            return
        ctx.put(GROUP_PREFIX + route, groups.dump(groups.with_runs(group, d.key, ())), None)

    def _gone_run_ended(
        self, ctx: ProcessorContext, key: bytes, execution_id: str, now_ms: int
    ) -> None:
        """A run of a job deleted while it ran has ended: it no longer holds its group."""
        route = ctx.get(GONE_PREFIX + key)
        if route is None:
            return
        group = groups.load(ctx.get(GROUP_PREFIX + route))
        group = groups.without_run(group, key.decode(), execution_id)
        ctx.put(GROUP_PREFIX + route, groups.dump(group), None)
        if key.decode() not in group:
            ctx.put(GONE_PREFIX + key, None, None)
        if not groups.busy(group, "", now_ms):
            self._wake_line(ctx, route.decode(), now_ms)
