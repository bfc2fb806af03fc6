"""Occurrences the missed-run policy skipped on purpose in a bench run, counted from the
scheduler's own history records. A scheduler that falls behind notices occurrences later than
`KADENCE_MISFIRE_GRACE_MS` after their due time; the job's `missed.mode` then skips them
(`coalesced` into the run of the most recent one by `latest_once`, the default; `missed` by
`none`, or outside the catch-up window), each told in history. Such a run never starts, yet it
is not lost: a bench counts it apart, and LOST is what neither ran nor was skipped."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kadence.client import routing_key
from kadence.codec import Codec
from kadence.models import Decision, HistoryRecord
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from testkit.topic_reader import read_to_end

SKIPS = frozenset({Decision.coalesced, Decision.missed})
ROUTINE = frozenset({Decision.fired, Decision.succeeded})
"""Decisions every run of a bench has; `Skips.decisions` counts the others."""
CAPS = ("KADENCE_TENANT_MAX_IN_FLIGHT", "KADENCE_TENANT_FIRES_PER_S")
"""The tenant caps a `throttled` record's reason names (streams/scheduler/tenant_limits.py)."""
IN_PROGRESS = re.compile(r"the tenant has (\d+) runs in progress on this scheduler process's")
"""What a `throttled` record for KADENCE_TENANT_MAX_IN_FLIGHT says the tenant had in progress."""


def occurrences(record: HistoryRecord, every_ms: int) -> int:
    """How many occurrences of a job due every `every_ms` (on multiples of it) `record` says
    were skipped: one for a record naming its occurrence; a summary's count (`occurrences`:
    passed over while the job waited for its tenant's caps; `unlisted`: past the first 1 000
    listed); a range's occurrences (`range_from` < due < `range_to`: outside the catch-up
    window). Other decisions skip nothing."""
    if record.decision not in SKIPS:
        return 0
    details = record.details
    for counted in ("occurrences", "unlisted"):
        if counted in details:
            return int(details[counted])
    if "range_from" in details:
        after, before = int(details["range_from"]), int(details["range_to"])
        return max(0, (before - 1) // every_ms - after // every_ms)
    return 1


NOTICED_BUCKET_S = 10
"""The width of the buckets in which `Skips.noticed` counts when a skip was decided."""


@dataclass
class Skips:
    """What a missed-run policy skipped, and where and when: a stalled job partition shows as
    one partition, a scheduler behind on all of them as every one; `noticed` says whether it
    was one episode or spread over the run."""

    start_s: float
    """The instant `noticed` counts from (the window's start)."""
    total: int = 0
    by_job_partition: dict[int, int] = field(default_factory=dict)
    noticed: dict[int, int] = field(default_factory=dict)
    """Occurrences skipped, by when the scheduler decided it (seconds after `start_s`, in
    buckets of NOTICED_BUCKET_S, by each bucket's first second)."""
    late_when_noticed_s: list[float] = field(default_factory=list)
    """How long after its due time each listed skip was decided (not the summaries')."""
    jobs: set[str] = field(default_factory=set)
    by_job: dict[str, int] = field(default_factory=dict)
    """Occurrences skipped, by job key (what bench/lost_runs.py takes off each job's)."""
    decisions: dict[str, int] = field(default_factory=dict)
    """History records by decision, but `fired` and `succeeded`: what else the scheduler decided
    in the run (`throttled`: jobs that began to wait for their tenant's caps)."""
    throttled_by: dict[str, int] = field(default_factory=dict)
    """`throttled` records by the cap their reason names (its setting), `other` if none."""
    in_progress_told: list[tuple[float, int]] = field(default_factory=list)
    """(seconds after `start_s`, runs in progress) of each `throttled` record for the runs in
    progress: how far past its share a tenant was, and from when."""

    def add(self, record: HistoryRecord, every_ms: int, partitions: int) -> None:
        if record.decision not in ROUTINE:
            name = record.decision.value
            self.decisions[name] = self.decisions.get(name, 0) + 1
        if record.decision is Decision.throttled:
            cap = next((c for c in CAPS if c in (record.reason or "")), "other")
            self.throttled_by[cap] = self.throttled_by.get(cap, 0) + 1
            told = IN_PROGRESS.search(record.reason or "")
            if told is not None:
                at_s = round(record.at.timestamp() - self.start_s, 1)
                self.in_progress_told.append((at_s, int(told[1])))
        n = occurrences(record, every_ms)
        if not n:
            return
        self.total += n
        p = partition_for(routing_key(record.tenant, record.job_id, None), partitions)
        self.by_job_partition[p] = self.by_job_partition.get(p, 0) + n
        at = record.at.timestamp()
        bucket = int((at - self.start_s) // NOTICED_BUCKET_S) * NOTICED_BUCKET_S
        self.noticed[bucket] = self.noticed.get(bucket, 0) + n
        if record.due_at is not None and n == 1:
            self.late_when_noticed_s.append(at - record.due_at.timestamp())
        self.jobs.add(record.key)
        self.by_job[record.key] = self.by_job.get(record.key, 0) + n

    def as_row(self) -> dict[str, object]:
        """The row's `skipped_late_detail` (empty when nothing was skipped)."""
        if not self.total:
            return {}
        late = sorted(self.late_when_noticed_s)
        told = self.in_progress_told
        return {
            "by_job_partition": dict(sorted(self.by_job_partition.items())),
            "noticed_s_after_start": dict(sorted(self.noticed.items())),
            "late_when_noticed_s": (
                {"min": round(late[0], 2), "max": round(late[-1], 2)} if late else {}
            ),
            "jobs": len(self.jobs),
            "decisions": dict(sorted(self.decisions.items())),
            **(
                {"throttled_by": dict(sorted(self.throttled_by.items()))}
                if self.throttled_by
                else {}
            ),
            **(
                {
                    "in_progress_told": {
                        "first_s_after_start": min(at for at, _ in told),
                        "runs_min": min(n for _, n in told),
                        "runs_max": max(n for _, n in told),
                    }
                }
                if told
                else {}
            ),
        }


def skips(
    settings: KadenceSettings, start_s: float, every_ms: int = 1_000, timeout_s: float = 300
) -> Skips:
    """The occurrences skipped by a missed-run policy in `settings`' namespace (its history
    topic, read to its end), counted from `start_s`."""
    codec = Codec()
    found = Skips(start_s)
    history = Topics(settings).history
    for msg in read_to_end(settings.bootstrap_servers, history, timeout_s):
        value = msg.value()
        if value is not None and isinstance(record := codec.decode(value), HistoryRecord):
            found.add(record, every_ms, settings.partitions)
    return found
