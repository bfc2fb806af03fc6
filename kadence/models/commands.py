"""Commands on the `commands` topic (keyed `tenant/job_id`), applied by the owning scheduler.

Each command carries the caller's `request_id`: resending a command with the same id is a no-op,
which is what makes "trigger now" and "backfill" safe to retry.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from kadence.models.base import (
    Actor,
    ExecutionId,
    Identifier,
    Partition,
    Payload,
    UtcDatetime,
    Version,
    WireModel,
    job_key,
)
from kadence.models.chain import MAX_CHAIN_DEPTH
from kadence.models.execution import ExecutionRequested

RequestId = Annotated[str, Field(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]


class _JobCommand(WireModel):
    tenant: Identifier
    job_id: Identifier
    request_id: RequestId
    """Idempotency key of the command itself."""
    issued_at: UtcDatetime
    actor: Actor | None = None
    """Who sent it through the API (kadence/models/base.py `Actor`); None: written to Kafka
    directly, by someone Kadence cannot name (a tenant's ingress clears what it is told)."""

    @property
    def key(self) -> str:
        return job_key(self.tenant, self.job_id)


class TriggerNow(_JobCommand):
    """Run the job once now, outside its schedule; the execution id derives from request_id."""

    avro_name = "TriggerNow"
    payload: Payload | None = None
    """Replaces the job's payload for this run only (the shapes a definition's payload takes;
    absent or null: the job's payload)."""
    caused_by: ExecutionId | None = None
    """Written by a scheduler, for a chain link: the run of a job of the same tenant whose end
    triggered this one (its history names it). None: a user's trigger."""
    chain_depth: Annotated[int, Field(ge=0, le=MAX_CHAIN_DEPTH)] = 0
    """Links followed from the run that started the chain (0: a user's trigger); also in the
    request id, so in the execution id (kadence/chains.py)."""

    @model_validator(mode="after")
    def _chained(self) -> TriggerNow:
        if (self.caused_by is None) != (self.chain_depth == 0):
            raise ValueError("caused_by and chain_depth come together (a chain link's trigger)")
        if self.caused_by is not None and not self.caused_by.startswith(f"{self.tenant}/"):
            raise ValueError("caused_by must be a run of the same tenant")
        return self


class Backfill(_JobCommand):
    """Fire every occurrence of the schedule with nominal time in [start, end)."""

    avro_name = "Backfill"
    start: UtcDatetime
    end: UtcDatetime
    force: bool = False
    """Also fire occurrences already dispatched (they keep their execution ids)."""
    max_occurrences: Annotated[int, Field(ge=1, le=100_000)] = 1_000
    """Runs fired at most (occurrences left out as already dispatched do not count)."""
    dry_run: bool = False
    """Fire nothing: the scheduler publishes the facts its plan would use (a
    `backfill_planned` history record), so the API's dry run computes the same plan."""

    @model_validator(mode="after")
    def _window(self) -> Backfill:
        if self.end <= self.start:
            raise ValueError("end must be after start")
        return self


class CancelRun(_JobCommand):
    """Stop an in-flight (or pending retry of an) execution."""

    avro_name = "CancelRun"
    execution_id: ExecutionId
    reason: Annotated[str, Field(max_length=512)] = ""


class ReplayDeadLetter(_JobCommand):
    """Run dead-lettered executions of the job again (same execution id, attempt 1)."""

    avro_name = "ReplayDeadLetter"
    execution_id: ExecutionId | None = None
    """One dead letter; None replays every dead letter the job remembers (the last 100)."""
    letter: ExecutionRequested | None = None
    """The dead letter's execution as the dead-letter topic holds it (the API reads it back
    there): with it, a letter the job no longer remembers (older than its last 100), or a
    letter of a deleted job, can be replayed too. Its ids must match the command's."""

    @model_validator(mode="after")
    def _letter_matches(self) -> ReplayDeadLetter:
        if self.letter is not None and (
            self.letter.execution_id != self.execution_id
            or (self.letter.tenant, self.letter.job_id) != (self.tenant, self.job_id)
        ):
            raise ValueError("letter must be the dead letter of this job's execution_id")
        return self


class PauseJob(_JobCommand):
    """Stop firing until resumed; occurrences in between are skipped, each with a history record
    (docs/decisions/0008: paused means skipped; backfill runs them if they are wanted)."""

    avro_name = "PauseJob"
    reason: Annotated[str, Field(max_length=512)] = ""
    """A note kept in the job's history and shown while it is paused (who paused it, and why)."""


class ResumeJob(_JobCommand):
    """Fire again from the next occurrence; what fell due while paused stays skipped."""

    avro_name = "ResumeJob"
    reason: Annotated[str, Field(max_length=512)] = ""
    """A note kept in the job's history (who resumed it, and why)."""


class JobMoved(_JobCommand):
    """Written by a scheduler, not by users: version `version` of the job now lives on scheduler
    partition `partition` (its definition arrived there, new to that partition, with a version
    above 1: its concurrency key, hence its partition, changed). Every other partition removes
    an older copy of the job; one holding a newer version keeps it and answers `partition`
    with `keeps`, which removes the copy there. The highest version wins everywhere; on a tie
    (one version written under two keys: not an update) the lower-numbered partition."""

    avro_name = "JobMoved"
    version: Version
    partition: Partition
    keeps: bool = False
    """An answer: `partition` keeps its copy of `version`; the receiver removes its copy unless
    it is newer (then it answers, naming its version)."""


class TenantCircuit(WireModel):
    """Written by a scheduler, not by users (keyed by the tenant): the tenant's retry circuit
    breaker opened (`open_until` set) or closed on scheduler partition `partition`, at `at`.
    Every other partition applies it unless its own copy changed later, so the tenant has one
    circuit: open everywhere or closed everywhere (docs/execution.md)."""

    avro_name = "TenantCircuit"
    tenant: Identifier
    partition: Partition
    at: UtcDatetime
    open_until: UtcDatetime | None = None
    """When the open circuit lets a probe through (None: closed)."""
    reason: Annotated[str, Field(max_length=512)] = ""

    @property
    def key(self) -> str:
        return self.tenant


Command = TriggerNow | Backfill | CancelRun | PauseJob | ResumeJob | ReplayDeadLetter
COMMAND_TYPES: tuple[type[WireModel], ...] = (
    TriggerNow,
    Backfill,
    CancelRun,
    PauseJob,
    ResumeJob,
    ReplayDeadLetter,
)
"""What users send (the SDK, the API, the CLI)."""
CONTROL_TYPES: tuple[type[WireModel], ...] = (JobMoved, TenantCircuit, ReplayDeadLetter, TriggerNow)
"""What Kadence's own processes say to the schedulers, on the `scheduler-control` topic that
no tenant may write: a scheduler's `JobMoved` and `TenantCircuit`, and the API's replays that
carry their dead letter (`ReplayDeadLetter.letter`, read back from the dead-letter topic). On
`commands` (and a tenant's ingress) these are refused: anyone who may write there could forge
them (docs/security.md, "Control records"). A chain link's trigger (a `TriggerNow` with
`caused_by`) travels here too (`kadence_only`)."""
TOPIC_COMMAND_TYPES: tuple[type[WireModel], ...] = (*COMMAND_TYPES, JobMoved, TenantCircuit)
"""Every command-like record: users' commands and the control records (for the schema files
and the decoder of the topics that refuse control records by name)."""


def kadence_only(command: object) -> bool:
    """Whether `command` is Kadence's own word, refused where tenants write (docs/security.md,
    "Control records"): a job moved, a tenant's circuit, a replay carrying its letter, a chain
    link's trigger (one with `caused_by`)."""
    if isinstance(command, ReplayDeadLetter):
        return command.letter is not None
    if isinstance(command, TriggerNow):
        return command.caused_by is not None
    return isinstance(command, JobMoved | TenantCircuit)
