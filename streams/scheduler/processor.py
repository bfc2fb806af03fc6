"""The scheduler as a runtime processor: decode inputs, call the domain, write what it decided.

Inputs (co-partitioned, keyed by job): definitions, commands, Kadence's own control records,
outcomes. Timers: each job's wake time in the partition's due index. Outputs: executions
(tenant-keyed), history, dead letters, and `rejected` for anything unusable — bad bytes never
stop the processor. The decisions live in the domain modules beside this one (definitions,
firing, commands, outcomes, breaker, groups); this module decodes, routes each input to them
and writes what they decided through the collaborators that keep the partition's state:
- `JobStore` (job_store.py): a job's run state under its key (`tenant/job`) and its
  definition under `~def/<job key>` (stored.py), kept decoded while it fires soon; the state
  of a quiet outcome waits to be written (write_behind.py: the runtime keeps the partition's
  replay point under `~replay/<outcomes topic>` and hands back what it reads again to `replay`);
- `Groups` (group_keeping.py): `~group/<routing key>` and `~waiting/<routing key>` (a
  concurrency group's runs and its waiting line), `~gone/<job key>` (the group of a job deleted
  while its runs were in progress);
- `Breakers` and `BackfillPace` (tenant_keeping.py): `~breaker/<tenant>`, and the backfill pace
  in memory; `TenantRuns` (tenant_limits.py): `~inflight/<tenant>`;
- `Moves` (moving.py): what a partition tells the others when a job moves to it;
- orphans.py: `~replaying/<execution id>`;
- `HeldCommands` (held_commands.py): `~held/<job key>` and `~held-count`, commands read before
  their job's definition, waiting for it.
Its own keys: `~dead-depth`, `~tzdb`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import replace
from functools import partial

from kadence.codec import MAGIC, Codec
from kadence.errors import DecodeError
from kadence.models import (
    Backfill,
    CancelRun,
    Decision,
    ExecutionOutcome,
    ExecutionOutcomes,
    JobMoved,
    PauseJob,
    ReplayDeadLetter,
    ResumeJob,
    ScheduleDefinition,
    TenantCircuit,
    TriggerKind,
    TriggerNow,
)
from kadence.topics import COMMANDS, OUTCOMES, SCHEDULER_CONTROL, SCHEDULES
from streams.runtime.coalescing import Coalescer
from streams.runtime.context import ProcessorContext
from streams.runtime.records import InputRecord
from streams.runtime.reject import reject, why_refused
from streams.scheduler import (
    chaining,
    commands,
    definitions,
    firing,
    later,
    orphans,
    outcomes,
    write_behind,
)
from streams.scheduler.batching import ExecutionBatches, group_of
from streams.scheduler.breaker import Breaker, after_outcome
from streams.scheduler.config import SchedulerConfig
from streams.scheduler.group_keeping import GROUP_PREFIX, Groups
from streams.scheduler.held_commands import HELD_PREFIX, HeldCommands
from streams.scheduler.job_store import AWAITING_CACHE_LIMIT, WAKE_BYTES, JobStore
from streams.scheduler.metrics import SchedulerMetrics
from streams.scheduler.moving import Moves
from streams.scheduler.output import Output
from streams.scheduler.requested import SeriesRun
from streams.scheduler.state import JobState
from streams.scheduler.step import Effects, Emit, Facts, Refused, Sink, keyed_history
from streams.scheduler.tenant_keeping import BackfillPace, Breakers
from streams.scheduler.tenant_limits import TenantLoad, TenantRuns, TenantUse
from streams.scheduler.together import Shared

__all__ = ["SchedulerConfig", "SchedulerProcessor"]  # the config lives in config.py
log = logging.getLogger(__name__)
DEAD_DEPTH = b"~dead-depth"
"""Dead letters of the partition's jobs not replayed (each job remembers its last 100)."""
TZDB_MARKER = b"~tzdb"
"""The tz database version every job of the partition was last computed with."""
MAINTAIN_STEP = 2_000
USER_COMMANDS = (TriggerNow, Backfill, CancelRun, PauseJob, ResumeJob, ReplayDeadLetter)
MAX_KEY_BYTES = 257
"""The longest job key: two 128-character identifiers and the slash."""
_SCHEDULED = TriggerKind.schedule.value


class SchedulerProcessor:
    """One per scheduler process, over every partition it owns (each a `ProcessorContext`)."""

    def __init__(
        self, cfg: SchedulerConfig, codec: Codec, metrics: SchedulerMetrics | None = None
    ) -> None:
        self.cfg = cfg
        self.codec = codec
        self.metrics = metrics or SchedulerMetrics()
        self.tenants = TenantRuns(
            TenantUse(
                cfg.tenant_fires_per_s,
                cfg.tenant_fires_by_tenant,
                cfg.tenant_in_flight,
                cfg.tenant_in_flight_by_tenant,
                cfg.job_partitions,
            )
        )
        self.store = JobStore(codec, self.tenants, cfg.job_partitions, AWAITING_CACHE_LIMIT)
        self.groups = Groups(codec, self.store)
        self.moves = Moves(codec, cfg.topics, cfg.job_partitions)
        self.breakers = Breakers(codec, cfg.topics, cfg.job_partitions, self.metrics)
        self.pace = BackfillPace(cfg.backfill_per_tenant_per_s)
        self.output = Output(cfg, codec)
        self.batches = ExecutionBatches(codec) if cfg.execution_batches else None
        self.held = HeldCommands(cfg.command_hold_ms, cfg.topics.commands)
        self._shared: Shared | None = None
        """While a worker's batch of outcomes is taken as one unit (`process_together`), what
        its quiet successes share (together.py); None: not in one."""

    # -- inputs ------------------------------------------------------------------------------

    def process(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        self.tenants.begin()
        self._process(ctx, record, now_ms)

    def process_together(
        self, ctx: ProcessorContext, records: Sequence[InputRecord], now_ms: int
    ) -> None:
        """A worker's batch of outcomes (`split`) as one unit of work: each outcome as
        `process` takes it, in order, with what a run of quiet successes shares done once
        (together.py)."""
        self.tenants.begin()
        self._shared = shared = Shared()
        try:
            for record in records:
                self._process(ctx, record, now_ms)
            self.metrics.deferred.inc(shared.deferred)
        finally:
            self._shared = None

    def _process(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        if record.key is None:
            self._keyless(ctx, record, now_ms)
            return
        topics = self.cfg.topics
        try:
            if record.topic == topics.schedules:
                self._definition(ctx, record, now_ms)
            elif record.topic == topics.commands:
                self._command(ctx, record, now_ms)
                ctx.commit_soon()  # someone waits for a command's effect, and commands are few
            elif record.topic == topics.scheduler_control:
                self._control(ctx, record, now_ms)
                ctx.commit_soon()
            elif record.topic == topics.outcomes:
                self._outcome(ctx, record, now_ms)
        except DecodeError as exc:
            self._reject(ctx, record, exc.code, str(exc), now_ms)
        except Refused as exc:
            self._forward(ctx, exc.out)
            self._reject(ctx, record, exc.code, exc.reason, now_ms)
        # anything else propagates: the runtime undoes this record's writes and calls `refuse`

    def split(self, record: InputRecord) -> Sequence[InputRecord]:
        """An outcomes record decoded once here: a worker's batch (ExecutionOutcomes) is one
        unit per outcome, keyed by its job as a record of its own would be (its headers are
        left out: nothing reads them); anything else is itself (`process` decodes it, and
        refuses what does not decode)."""
        if record.topic != self.cfg.topics.outcomes or record.value is None:
            return (record,)
        try:
            found = OUTCOMES.decode(self.codec, record.value)
        except DecodeError:
            return (record,)
        if isinstance(found, ExecutionOutcome):
            return (replace(record, decoded=found),)
        assert isinstance(found, ExecutionOutcomes)
        topic, partition, offset, at = (
            record.topic,
            record.partition,
            record.offset,
            record.timestamp_ms,
        )
        return [
            InputRecord(topic, partition, offset, o.key.encode(), None, [], at, o)
            for o in found.outcomes
        ]

    def refuse(
        self, ctx: ProcessorContext, record: InputRecord, exc: Exception, now_ms: int
    ) -> None:
        """Processing `record` raised and was undone: a `rejected` record (and a history record
        when the key names a job) say why; the next input is processed as usual."""
        code, reason = why_refused(record, exc)
        self.metrics.failures.labels("refused").inc()
        self._forward(ctx, [keyed_history(record.key, Decision.refused, reason, now_ms)])
        self._reject(ctx, record, code, reason, now_ms)

    def quarantine(self, ctx: ProcessorContext, key: bytes, exc: Exception, now_ms: int) -> None:
        """Firing `key` raised and was undone: the job keeps its state but leaves the due index,
        so it stops firing (and failing) until its definition is written again or a command
        (pause and resume) touches it. A history record holds the error; a metric counts it."""
        log.error("firing %r failed; quarantined", key, exc_info=exc)
        self.store.quarantine(ctx, key)
        self.metrics.failures.labels("quarantined").inc()
        reason = (
            f"{type(exc).__name__}: {exc}; the job no longer fires: write its definition again, "
            "or pause and resume it, to try again"
        )
        self._forward(ctx, [keyed_history(key, Decision.quarantined, reason, now_ms)])

    def _definition(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        assert record.key is not None
        state = self.store.load(ctx, record.key)
        if record.value is None:
            if state is not None:
                facts = self._facts(ctx, state, now_ms)
                effects = definitions.apply_delete(state, facts)
                self.groups.leave(ctx, record.key, state, now_ms, deleted=True)
                self._write(ctx, record.key, effects, now_ms=now_ms)
            return
        definition = SCHEDULES.decode(self.codec, record.value)
        assert isinstance(definition, ScheduleDefinition)
        if state is None and definition.concurrency_key:
            self.groups.back(ctx, record.key)
        facts = self._facts(ctx, state, now_ms)
        compiled = definitions.admit(
            state,
            definition,
            facts,
            key=record.key,
            partition=record.partition,
            cfg=self.cfg,
        )
        raw = record.value if record.value.startswith(MAGIC) else self.codec.encode(definition)
        effects = definitions.apply_definition(
            state, definition, raw, record.timestamp_ms, facts, compiled=compiled
        )
        if state is not None and state.definition(self.codec).routing_key != definition.routing_key:
            self.groups.leave(ctx, record.key, state, now_ms, deleted=False)
        self._write(ctx, record.key, effects, now_ms=now_ms)
        if state is None and definition.version > 1:  # an update new here: the job may have moved
            self.moves.arrived(ctx, record.key, definition, record.partition, now_ms)
        if state is None:
            self._release(ctx, record.key, now_ms)

    def _command(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        """A user's command. What only Kadence may say (docs/security.md, "Control records")
        is refused here by name: anyone who may write `commands` could forge it."""
        assert record.key is not None
        command = COMMANDS.decode(self.codec, record.value)
        commands.refuse_control(command, record.topic, self.cfg.topics.scheduler_control)
        assert isinstance(command, USER_COMMANDS)
        self._keyed(command.key, record)
        state = self.store.load(ctx, record.key)
        if state is None:  # its definition may not have been read yet: it waits for it
            self.held.hold(ctx, record, command.key, now_ms)
            return
        effects = commands.apply_command(state, command, self._facts(ctx, state, now_ms))
        self._write(ctx, record.key, effects, now_ms=now_ms)

    def _release(self, ctx: ProcessorContext, key: bytes, now_ms: int) -> None:
        """The job under `key` is new here: the commands held for it are processed now, in
        the order they came, each as a unit of its own (one that fails is refused alone)."""
        for held in self.held.release(ctx, key):
            ctx.attempt(
                partial(self.process, ctx, held, now_ms),
                partial(self.refuse, ctx, held, now_ms=now_ms),
            )

    def _expire(self, ctx: ProcessorContext, held_key: bytes, now_ms: int) -> None:
        """The commands whose hold is over: their job really is not here. Each is refused
        (`unknown_job`) with a `refused` history record naming it and its actor."""
        job = held_key.removeprefix(HELD_PREFIX).decode(errors="replace")
        why = (
            f"no job {job} on this partition ({ctx.partition}): its definition was not read "
            f"within {self.held.hold_ms} ms of the command"
        )
        for held in self.held.expire(ctx, held_key, now_ms):
            refused = Refused("unknown_job", why)
            with suppress(DecodeError):  # it was decoded when held: this codec reads it
                command = COMMANDS.decode(self.codec, held.value)
                if isinstance(command, USER_COMMANDS):
                    refused = commands.refused(command, refused, now_ms)
            self._forward(ctx, refused.out)
            self._reject(ctx, held, refused.code, refused.reason, now_ms)

    def _control(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        """What another scheduler partition or the API tells this one: a job moved, a tenant's
        circuit opened or closed, a dead letter replayed from the letter the API read back."""
        assert record.key is not None
        control = SCHEDULER_CONTROL.decode(self.codec, record.value)
        assert isinstance(control, JobMoved | TenantCircuit | ReplayDeadLetter | TriggerNow)
        self._keyed(control.key, record)
        if isinstance(control, TenantCircuit):
            self.breakers.heard(ctx, control)
            return
        state = self.store.load(ctx, record.key)
        if isinstance(control, JobMoved):
            if state is not None and self.moves.heard(ctx, record.key, control, state, now_ms):
                facts = self._facts(ctx, state, now_ms)
                effects = definitions.apply_moved_away(
                    state, facts, control.version, control.partition
                )
                self.groups.leave(ctx, record.key, state, now_ms, deleted=True)
                self._write(ctx, record.key, effects, now_ms=now_ms)
        elif isinstance(control, ReplayDeadLetter) and state is None and control.letter:
            self._forward(ctx, orphans.replay_once(ctx, record.key, control, now_ms))
        elif state is None:
            raise chaining.unknown_job(control, control.key, record.partition, now_ms)
        else:
            effects = commands.apply_command(state, control, self._facts(ctx, state, now_ms))
            self._write(ctx, record.key, effects, now_ms=now_ms)

    def _keyless(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        """A record without a key: on `outcomes` a batch is keyless, so one that `split` could
        not read is rejected for what is wrong with its bytes; anything else needs a key."""
        code, reason = "missing_key", "records on Kadence input topics need a key"
        if record.topic == self.cfg.topics.outcomes and record.decoded is None:
            try:
                OUTCOMES.decode(self.codec, record.value)
            except DecodeError as exc:
                code, reason = exc.code, str(exc)
        self._reject(ctx, record, code, reason, now_ms)

    @staticmethod
    def _keyed(key: str, record: InputRecord) -> None:
        if key.encode() != record.key:
            raise Refused("key_mismatch", f"record key {record.key!r} is not {key}")

    def _outcome(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        assert record.key is not None
        outcome = self._decoded(record)
        if self.cfg.write_behind and self._waits(ctx, record, outcome, now_ms):
            return
        state = self.store.load(ctx, record.key)
        if state is None:  # its job was deleted or moved: it still tells the tenant's breaker
            orphans.ended(ctx, outcome.execution_id)
            free = self.groups.gone_run_ended(ctx, record.key, outcome.execution_id, now_ms)
            if free is not None:
                self._wake(ctx, free, now_ms)
            self._forward(ctx, [outcomes.orphaned(outcome, now_ms)])
            breaker = self.breakers.get(ctx, outcome.tenant)
            counted = after_outcome(breaker, outcome, now_ms, self.cfg.breaker)
            if counted is not None:
                self.breakers.put(ctx, outcome.tenant, *counted)
            return
        facts = self._facts(ctx, state, now_ms, tenant=outcome.tenant)
        effects = outcomes.apply_outcome(state, outcome, facts)
        if self.cfg.write_behind and write_behind.quiet(self.codec, state, effects):
            self._defer(ctx, record, effects, outcome.tenant, now_ms)
        else:
            self._write(ctx, record.key, effects, now_ms=now_ms, tenant=outcome.tenant)

    def _waits(
        self, ctx: ProcessorContext, record: InputRecord, outcome: ExecutionOutcome, now_ms: int
    ) -> bool:
        """A quiet success of a job kept decoded waits for the job's next read (later.py),
        when applying it now would change nothing but the job's runs: its tenant's breaker
        neither opens nor closes, the job's wake time stays. True: it waits."""
        key = record.key
        assert key is not None
        decoded = self.store.decoded(ctx, key)
        waiting = None if decoded is None else later.admit(decoded, outcome, now_ms, self.codec)
        if waiting is None:
            return self._not_quiet()
        facts = self._quiet_facts(ctx, waiting.base.definition(self.codec).tenant, now_ms)
        if not later.keeps_early(waiting, facts):
            return self._not_quiet()
        tenant, shared = outcome.tenant, self._shared
        breaker = self.breakers.get(ctx, tenant)
        counted = None
        if shared is not None and shared.owns(tenant, breaker):  # its copy: counted in place
            if not breaker.count_quiet_success(outcome.execution_id, now_ms, self.cfg.breaker):
                return self._not_quiet()
        else:
            counted = after_outcome(breaker, outcome, now_ms, self.cfg.breaker)
            if counted is None or counted[1] is not None:
                return self._not_quiet()
        self.tenants.ended(ctx, key)
        self.store.wait(ctx, key, waiting, topic=record.topic, offset=record.offset, now_ms=now_ms)
        if shared is None:
            self.metrics.deferred.inc()
        else:
            shared.deferred += 1
        if counted is not None:
            self.breakers.put(ctx, tenant, *counted)
            if shared is not None:
                shared.breakers[tenant] = counted[0]
        return True

    def _quiet_facts(self, ctx: ProcessorContext, tenant: str, now_ms: int) -> Facts:
        """The facts a quiet success of `tenant`'s job is judged with (`keeps_early`). In a
        batch taken as one unit they are made once for a run of quiet successes: a quiet
        success changes nothing they hold (its tenant's runs per second and places; its runs in
        progress are counted only under a cap on them, and then they are made for each)."""
        shared = self._shared
        facts = None if shared is None else shared.facts.get(tenant)
        if facts is None:
            load = self.tenants.load(ctx, tenant, now_ms)
            facts = Facts(
                now_ms, self.codec, self.cfg.tzdb, ahead_ms=self.cfg.dispatch_ahead_ms, tenant=load
            )
            if shared is not None and not load.caps.in_flight:
                shared.facts[tenant] = facts
        return facts

    def _not_quiet(self) -> bool:
        """The outcome is applied at once: what it writes may change what a tenant's facts
        hold, so those made for a run of quiet successes are made again (`Shared.applied`)."""
        if self._shared is not None:
            self._shared.applied()
        return False

    def _decoded(self, record: InputRecord) -> ExecutionOutcome:
        """The outcome `record` is (decoded by `split`, or now); a batch whose key says it is
        one outcome is refused."""
        outcome = record.decoded
        if outcome is None:
            outcome = OUTCOMES.decode(self.codec, record.value)
        if not isinstance(outcome, ExecutionOutcome):
            raise Refused(
                "unexpected_record_type",
                f"a keyed {type(outcome).__name__} record: a batch of outcomes has no key",
            )
        return outcome

    # -- timers ------------------------------------------------------------------------------

    def fire(self, ctx: ProcessorContext, key: bytes, now_ms: int) -> None:
        self.tenants.begin()
        if self.held.owns(key):
            self._expire(ctx, key, now_ms)
            return
        state = self.store.load(ctx, key)
        if state is None or state.wake_ms is None or state.wake_ms > now_ms:
            return
        effects = firing.on_due(state, self._facts(ctx, state, now_ms))
        self._write(ctx, key, effects, now_ms=now_ms)

    def owned(self, tasks: Mapping[int, ProcessorContext]) -> None:
        """The process owns `tasks` now (streams/runtime/processor.py, `Owning`): its tenants'
        runs in progress are counted again from their stores (tenant_limits.py)."""
        self.tenants.recount(tasks)

    def maintain(self, ctx: ProcessorContext, now_ms: int) -> bool:
        """After assignment: if the tz database changed, recompute every job (in steps)."""
        current = self.cfg.tzdb.encode()
        if ctx.get(TZDB_MARKER) == current:
            return True
        after = ctx.cache.get(TZDB_MARKER, b"")
        keys = ctx.keys_after(after, MAINTAIN_STEP)
        for key in keys:
            if key.startswith(b"~"):
                continue
            ctx.attempt(
                lambda key=key: self._maintain_one(ctx, key, now_ms),  # type: ignore[misc]
                lambda exc, key=key: self.quarantine(ctx, key, exc, now_ms),  # type: ignore[misc]
            )
        if len(keys) < MAINTAIN_STEP:
            ctx.put(TZDB_MARKER, current, None)
            ctx.cache.pop(TZDB_MARKER, None)
            return True
        ctx.cache[TZDB_MARKER] = keys[-1]
        return False

    def _maintain_one(self, ctx: ProcessorContext, key: bytes, now_ms: int) -> None:
        state = self.store.load(ctx, key)
        if state is not None and state.tzdb != self.cfg.tzdb:
            effects = definitions.apply_tzdb(state, self._facts(ctx, state, now_ms))
            self._write(ctx, key, effects, now_ms=now_ms)

    def prefetch(self, ctx: ProcessorContext, key: bytes) -> None:
        """Decode a job entering the timer window now, so its due time pays only for firing."""
        if not key.startswith(GROUP_PREFIX) and not self.held.owns(key):
            self.store.prefetch(ctx, key)

    # -- state -------------------------------------------------------------------------------

    def _facts(
        self, ctx: ProcessorContext, state: JobState | None, now_ms: int, tenant: str | None = None
    ) -> Facts:
        """What the domain needs besides the job's state: the group index says whether the
        job's group is busy; the breaker is the job's tenant's (or `tenant`'s)."""
        busy, until, turn = False, 0, True
        breaker = Breaker()
        load = TenantLoad()
        budget = self.pace.per_s
        if state is not None:
            d = state.definition(self.codec)
            if d.concurrency_key:
                until, turn = self.groups.standing(ctx, d, now_ms)
                busy = until > now_ms
            breaker = self.breakers.get(ctx, tenant or d.tenant)
            budget = self.pace.budget(d.tenant, now_ms)
            load = self.tenants.load(ctx, d.tenant, now_ms)
        return Facts(
            now_ms,
            self.codec,
            self.cfg.tzdb,
            misfire_grace_ms=self.cfg.misfire_grace_ms,
            group_busy=busy,
            group_until_ms=until,
            group_turn=turn,
            breaker=breaker,
            breaker_cfg=self.cfg.breaker,
            ahead_ms=self.cfg.dispatch_ahead_ms,
            backfill_budget=budget,
            tenant=load,
            state_limit=ctx.record_limit - MAX_KEY_BYTES - WAKE_BYTES,
        )

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
        """Write what a step decided: the job's state (and its group's index, waking the job
        whose turn it is when the group became free), its records, the dead-letter count, and
        the tenant's breaker (the job's, or `tenant`'s)."""
        state = self.store.write(ctx, key, effects.state, effects.scheduled, now_ms)
        effects.state = state
        job_tenant = tenant
        if state is not None:
            d = state.definition(self.codec)
            if d.concurrency_key:
                free = self.groups.kept(ctx, d, state, effects, now_ms)
                if free and wake_group:
                    self._wake(ctx, d.routing_key, now_ms)
            job_tenant = tenant or d.tenant
            if effects.backfill_used:
                self.pace.used(d.tenant, effects.backfill_used, now_ms)
        self._forward(ctx, effects.out)
        if effects.urgent:
            ctx.commit_soon()
        if effects.dead_delta:
            depth = outcomes.dead_letter_depth(self.dead_letter_depth(ctx), effects)
            ctx.put(DEAD_DEPTH, str(depth).encode(), None)
        if effects.breaker is not None and job_tenant is not None:
            self.breakers.put(ctx, job_tenant, effects.breaker, effects.breaker_change)

    def _wake(self, ctx: ProcessorContext, routing_key: str, now_ms: int) -> None:
        """The group has no run left: the jobs in its waiting line start what waits for it
        (`Groups.line`), in the transaction of the step that freed it."""
        for key, state in self.groups.line(ctx, routing_key, now_ms):
            facts = replace(self._facts(ctx, state, now_ms), group_turn=True)
            effects = firing.on_group_free(state, facts)
            self._write(ctx, key, effects, now_ms=now_ms, wake_group=False)

    def _defer(
        self,
        ctx: ProcessorContext,
        record: InputRecord,
        effects: Effects,
        tenant: str,
        now_ms: int,
    ) -> None:
        """A quiet step: its job's state waits in memory (write_behind.py); the tenant's
        breaker and count of runs in progress are written now."""
        state, key = effects.state, record.key
        assert state is not None
        assert key is not None
        self.tenants.written(ctx, key, effects.scheduled, state, now_ms)
        self.store.defer(ctx, key, state, topic=record.topic, offset=record.offset, now_ms=now_ms)
        self.metrics.deferred.inc()
        if effects.breaker is not None:
            self.breakers.put(ctx, tenant, effects.breaker, effects.breaker_change)

    def replay(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        """An outcome read again after a restore or an abort: a success deferred before is
        applied again, as it was the first time, writing only its job's state."""
        key = record.key
        if record.topic != self.cfg.topics.outcomes or key is None:
            return
        self.tenants.begin()
        outcome = self._decoded(record)
        state = self.store.load(ctx, key)
        if state is None or not write_behind.pending(state, outcome):
            return
        facts = self._facts(ctx, state, now_ms, tenant=outcome.tenant)
        effects = outcomes.apply_outcome(state, outcome, facts)
        after = effects.state
        if after is None or effects.out:  # never the case for a step that was deferred
            log.warning("replaying %s: not a deferred success; skipped", outcome.execution_id)
            return
        self.metrics.replayed.inc()
        if after.wake_ms == state.wake_ms and write_behind.replayable(after):
            at = record.offset
            self.store.defer(ctx, key, after, topic=record.topic, offset=at, now_ms=now_ms)
        else:  # later than the first time: its look-ahead may have moved on
            self.store.store(ctx, key, after)

    def flush(self, ctx: ProcessorContext, key: bytes, now_ms: int) -> None:
        """Write a job whose state waited `write_behind_ms` (write_behind.py)."""
        state = later.current(ctx.deferred_state(key))
        if state is not None:
            self.store.store(ctx, key, state)

    def dead_letter_depth(self, ctx: ProcessorContext) -> int:
        raw = ctx.get(DEAD_DEPTH)
        return int(raw) if raw else 0

    # -- output ------------------------------------------------------------------------------

    def _forward(self, ctx: ProcessorContext, out: Sequence[Emit | None]) -> None:
        """Write `out`; a series' runs that go in groups are written from the series' template
        without their records (`Output.series`), and counted as dispatched without them."""
        batches = self.batches is not None
        records: list[object] = []
        ahead: dict[tuple[str, str], int] = {}
        for emit in out:
            if emit is None:
                continue
            if batches and type(emit) is SeriesRun:
                written = self.output.series(ctx.partition, emit)
                if written is not None:
                    topic, to, key, value, headers, due_at = written
                    ctx.forward(topic, to, key, value, headers, group=due_at)
                    runs = emit.runs
                    if emit.shot.due_ms >= runs.facts.now_ms:  # dispatched ahead, or at due
                        at = (runs.tenant, _SCHEDULED)
                        ahead[at] = ahead.get(at, 0) + 1
                    else:
                        records.append(emit.record)
                    continue
            record = emit.record
            group = group_of(record) if batches and emit.sink is Sink.executions else None
            later = group is not None  # its headers, only if it is written alone
            ctx.forward(
                *self.output.encoded(ctx.partition, emit.sink, record, emit.pool, later=later),
                group=group,
            )
            records.append(record)
        self.metrics.observe_all(records, ahead)

    def coalescer(self, record_limit: int) -> Coalescer | None:
        """The tasks' coalescer: executions in batches (batching.py), when they are on."""
        return None if self.batches is None else self.batches.coalescer(record_limit)

    def _reject(
        self, ctx: ProcessorContext, record: InputRecord, code: str, reason: str, now_ms: int
    ) -> None:
        reject(
            ctx,
            self.codec,
            to_topic=self.cfg.topics.rejected,
            processor=self.cfg.name,
            record=record,
            code=code,
            reason=reason,
            now_ms=now_ms,
        )
