"""History past its hot period, rolled up: per job per UTC day, what happened in counts.

The view keeps every event of a job for `KADENCE_HISTORY_RETENTION_DAYS` (30). When the
retention sweep drops older events, each is first folded into its job's roll-up for its day
(`R|tenant|job_id|YYYY-MM-DD`): runs by final status of each attempt, the scheduler's decisions
by kind, dead letters, and the start lateness of attempts in the buckets the metrics use (so
p50 and p99 read as "at most"). Roll-ups are kept `KADENCE_HISTORY_ROLLUP_DAYS` (400).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kadence.metrics import LATENESS_BUCKETS
from kadence.notifications import is_notification
from streams.views.store import SEP

Doc = dict[str, Any]
BOUNDS = [*LATENESS_BUCKETS, float("inf")]


def rollup_prefix(tenant: str, job_id: str) -> bytes:
    return f"R{SEP}{tenant}{SEP}{job_id}{SEP}".encode()


def rollup_key(tenant: str, job_id: str, day: str) -> bytes:
    return rollup_prefix(tenant, job_id) + day.encode()


def day_of(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).date().isoformat()


def empty(tenant: str, job_id: str, day: str) -> Doc:
    return {
        "tenant": tenant,
        "job_id": job_id,
        "day": day,
        "events": 0,
        "attempts": {},
        "decisions": {},
        "dead_letters": 0,
        "lateness_buckets": [0] * len(BOUNDS),
        "lateness_max_s": None,
    }


def fold(doc: Doc, event: Doc) -> Doc:
    """`doc` with one more history event in it (the view's event shapes: apply.py)."""
    doc["events"] += 1
    kind = event.get("kind")
    if kind == "outcome" and is_notification(str(event.get("execution_id") or "")):
        pass  # a notification's call, not an attempt of the job (its `notified` records count)
    elif kind == "outcome":
        status = str(event.get("status"))
        doc["attempts"][status] = doc["attempts"].get(status, 0) + 1
        late = event.get("lateness_s")
        if isinstance(late, int | float):
            i = next(i for i, b in enumerate(BOUNDS) if late <= b)
            doc["lateness_buckets"][i] += 1
            top = doc["lateness_max_s"]
            doc["lateness_max_s"] = late if top is None else max(top, late)
    elif kind == "dead_letter":
        doc["dead_letters"] += 1
    else:
        decision = str(event.get("decision"))
        doc["decisions"][decision] = doc["decisions"].get(decision, 0) + 1
    return doc


def shown(doc: Doc) -> Doc:
    """A roll-up as the API shows it: the lateness percentiles read off the buckets (the
    bucket's upper bound: p99 "at most"; above the last bound, the day's maximum)."""
    buckets: list[int] = doc["lateness_buckets"]
    total = sum(buckets)
    top: float | None = doc["lateness_max_s"]

    def at(q: float) -> float | None:
        if not total:
            return None
        seen = 0
        for bound, n in zip(BOUNDS, buckets, strict=True):
            seen += n
            if seen >= q * total:
                return bound if bound != float("inf") else top
        return top

    out = {k: v for k, v in doc.items() if k != "lateness_buckets"}
    out["started"] = total
    out["lateness_p50_s"] = at(0.50)
    out["lateness_p99_s"] = at(0.99)
    return out
