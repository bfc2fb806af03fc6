"""Chaining: the links a job names to run other jobs of its tenant when a run ends, and the
bounds that keep a cycle of links from running away (docs/execution.md, "Chaining")."""

from __future__ import annotations

from pydantic import Field

from kadence.models.base import Identifier, WireModel

MAX_CHAIN_LINKS = 8
"""Links in one of a job's lists (`on_success`, `on_failure`) at most."""
MAX_CHAIN_DEPTH = 16
"""Runs one chain may add after the run that started it: a run triggered by a link has the
depth of the run that triggered it plus one (a scheduled or manual run: 0), and a run at this
depth triggers nothing (history says so). A cycle of links (A on_success B, B on_success A)
therefore runs at most 17 times from one start. A limit carried on the runs, because a
definition cannot see the other jobs' definitions (they live on other partitions)."""


class ChainLink(WireModel):
    """Run job `job_id` of the same tenant once when a run of this job ends this way."""

    job_id: Identifier
    """A job of this job's tenant: a job id, never a `tenant/job` key (no slash is accepted)."""
    pass_result: bool = False
    """Send the run a JSON document describing the run that triggered it (its execution id,
    job, status, attempt, error and, once outcomes carry one, its result) as its payload,
    instead of its own payload."""
    concurrency_key: Identifier | None = Field(default=None)
    """The downstream job's `concurrency_key`, when it has one: a job in a concurrency group
    lives on its group's scheduler partition, and the trigger goes there. A wrong or missing
    one: the trigger reaches no job, and is refused (history and `rejected` say so)."""
