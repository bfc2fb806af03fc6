"""The API's per-tenant quotas, applied to what a tenant produces to its ingress topics: the
same logic (kadence/quotas.py) and the same settings (`api_quota_*`), so Kafka is no way
around them. A record past a quota becomes a `rejected` record with code `quota_exceeded`
and the refusal's message (which quota, its limit, what to do), which the tenant is told on
its events topic like any refusal of its ingress (streams/ingress/events.py).

What counts, per record:
- a `TriggerNow`: one trigger (`triggers_per_minute`), as `POST .../trigger`;
- a dry-run `Backfill`: one trigger, as the API's plan request, which costs the scheduler
  the same command and history record;
- a real `Backfill`: its `max_occurrences` backfill occurrences. The API counts the runs its
  plan lists, which it asks the scheduler for first; the ingress cannot wait for that, so it
  counts the most the scheduler will fire for it (a bound, never fewer than the API would);
- a `ReplayDeadLetter`: one replay, or `DEAD_LIMIT` (the dead letters a job remembers) for
  one without `execution_id`, which replays all of them;
- a definition of a job the view does not show (a create): one job against
  `jobs_per_tenant`. An update of a job that exists is never refused, nor is a delete.

Rates are checked in memory. The job count costs no call per record: once per batch the
ingress asks the view (streams/ingress/lookup.py) whether the batch's jobs exist, and for
the count of each tenant with a definition in the batch whose count is older than
`COUNT_TTL_S`; the creates this process let through that the view does not show yet are
counted on top (the view's answer says which it shows: those are dropped from the pending).
A create the view never shows (the scheduler refused it) stops counting after `PENDING_S`.

Each ingress process holds its own buckets and pending creates, as each API process does:
with n of them, a tenant whose records spread over their partitions may send up to n times a
rate, and creates through several doors at once may pass the jobs quota by those in flight.

When the view cannot answer, rates still apply; a definition of a tenant with a jobs quota is
let through while the last count seen (at most `STALE_S` old) and the pending creates leave
room for it as a create, and is otherwise refused with code `quota_unknown` (send it again):
without the view an update cannot be told from a create, and a quota that lapses whenever the
view is down is none. Everything else is routed as usual.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kadence.errors import KadenceError
from kadence.models import Backfill, ReplayDeadLetter, ScheduleDefinition, TriggerNow, WireModel
from kadence.quotas import JOBS, Quotas
from streams.ingress.lookup import Answer
from streams.scheduler.state import DEAD_LIMIT

COUNT_TTL_S = 2.0
"""A tenant's job count is asked again after this long (between, its creates count on top)."""
PENDING_S = 60.0
"""A create this process let through counts until the view shows it, or this long."""
STALE_S = 300.0
"""Without the view, the last count seen decides, if it is at most this old."""


class QuotaUnknownError(KadenceError):
    """Without the query view the ingress cannot tell whether a definition creates a job past
    the tenant's quota: the record is refused, to be sent again."""

    code = "quota_unknown"


@dataclass
class _Count:
    jobs: int
    at: float


@dataclass
class IngressQuotas:
    quotas: Quotas
    clock: Callable[[], float] = time.monotonic
    """Seconds, monotonic (tests pass a fake; the rate quotas hold the same clock)."""
    _counts: dict[str, _Count] = field(default_factory=dict)
    _pending: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per tenant: job key -> when this process let its create through."""
    _exists: dict[str, bool] = field(default_factory=dict)
    """This batch: job key -> whether the view shows it (keys it was asked about)."""
    _down: str = ""
    """This batch: why the view did not answer ("": it did)."""

    def question(self, definitions: Iterable[tuple[str, str]]) -> tuple[set[str], dict[str, int]]:
        """What to ask the view for a batch with these (tenant, job key) definitions: the jobs
        whose existence decides create or update, and the counts due again (with the pending
        creates of those tenants, so that the answer says which of them it counts)."""
        jobs: set[str] = set()
        counts: dict[str, int] = {}
        now = self.clock()
        for tenant, key in definitions:
            limit = self.quotas.jobs.limit(tenant)
            if not limit:
                continue
            jobs.add(key)
            if tenant in counts:
                continue
            count = self._counts.get(tenant)
            if count is None or now - count.at >= COUNT_TTL_S:
                counts[tenant] = limit
                pending = self._pending.get(tenant, {})
                for job, since in list(pending.items()):
                    if now - since >= PENDING_S:
                        del pending[job]
                jobs.update(pending)
        return jobs, counts

    def answered(self, answer: Answer | None, why: str = "") -> None:
        """The view's answer for the batch to come (None: it did not answer, `why`)."""
        self._exists = {}
        self._down = why if answer is None else ""
        if answer is None:
            return
        now = self.clock()
        self._exists = {k: v is not None for k, v in answer.jobs.items()}
        for tenant, jobs in answer.counts.items():
            self._counts[tenant] = _Count(jobs, now)
            pending = self._pending.get(tenant, {})
            for key in [k for k in pending if answer.jobs.get(k) is not None]:
                del pending[key]  # the view counts it now
        if len(self._counts) > 10_000:
            self._counts = {t: c for t, c in self._counts.items() if now - c.at < STALE_S}

    def definition(self, definition: ScheduleDefinition) -> None:
        """Raise QuotaExceededError (or QuotaUnknownError) if `definition` creates a job past
        its tenant's quota; a create let through counts from now on."""
        tenant, key = definition.tenant, definition.key
        limit = self.quotas.jobs.limit(tenant)
        if not limit:
            return
        pending = self._pending.setdefault(tenant, {})
        if key in pending or self._exists.get(key):
            return  # an update of a job that exists (or that this process created)
        now = self.clock()
        count = self._counts.get(tenant)
        if count is None or (key not in self._exists and now - count.at >= STALE_S):
            why = self._down or "it was not asked"
            raise QuotaUnknownError(
                f"quota {JOBS}: tenant {tenant} may have {limit} jobs, and the query view could "
                f"not say whether {key} exists nor how many jobs the tenant has ({why}); nothing "
                "was written: send the record again in a few seconds"
            )
        self.quotas.jobs.check(tenant, count.jobs + len(pending))
        pending[key] = now

    def deleted(self, key: str) -> None:
        """A delete of `key` was routed: a create of it still pending no longer counts."""
        tenant = key.partition("/")[0]
        self._pending.get(tenant, {}).pop(key, None)

    def command(self, command: WireModel) -> None:
        """Spend the command's cost from its tenant's rate quota, or raise QuotaExceededError."""
        tenant = str(getattr(command, "tenant", ""))
        if isinstance(command, TriggerNow) or (isinstance(command, Backfill) and command.dry_run):
            self.quotas.triggers.take(tenant)
        elif isinstance(command, Backfill):
            self.quotas.backfill.take(tenant, command.max_occurrences)
        elif isinstance(command, ReplayDeadLetter):
            self.quotas.replays.take(tenant, 1 if command.execution_id else DEAD_LIMIT)

    def pending(self, tenant: str) -> Mapping[str, float]:
        """The creates of `tenant` let through that the view did not show yet."""
        return self._pending.get(tenant, {})
