"""Occurrences the missed-run policy skipped on purpose in a bench run, counted from the
scheduler's own history records. A scheduler that falls behind notices occurrences later than
`KADENCE_MISFIRE_GRACE_MS` after their due time; the job's `missed.mode` then skips them
(`coalesced` into the run of the most recent one by `latest_once`, the default; `missed` by
`none`, or outside the catch-up window), each told in history. Such a run never starts, yet it
is not lost: a bench counts it apart, and LOST is what neither ran nor was skipped."""

from __future__ import annotations

from kadence.codec import Codec
from kadence.models import Decision, HistoryRecord
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from testkit.topic_reader import read_to_end

SKIPS = frozenset({Decision.coalesced, Decision.missed})


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


def skipped(settings: KadenceSettings, every_ms: int = 1_000, timeout_s: float = 300) -> int:
    """The occurrences skipped by a missed-run policy in `settings`' namespace (its history
    topic, read to its end)."""
    codec = Codec()
    total = 0
    history = Topics(settings).history
    for msg in read_to_end(settings.bootstrap_servers, history, timeout_s):
        value = msg.value()
        if value is not None and isinstance(record := codec.decode(value), HistoryRecord):
            total += occurrences(record, every_ms)
    return total
