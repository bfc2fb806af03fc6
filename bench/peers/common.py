"""What every peer run shares: the due instant, the result shape, the results file."""

from __future__ import annotations

import json
import platform
import time
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.scheduler import RESULTS, percentiles


def due_at(lead_s: int) -> datetime:
    """The next whole minute at least `lead_s` away (cron-based peers fire on minutes)."""
    t = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    while (t - datetime.now(UTC)).total_seconds() < lead_s:
        t += timedelta(minutes=1)
    return t


def wait_until(t: datetime) -> None:
    time.sleep(max(0.0, (t - datetime.now(UTC)).total_seconds()))


def result(
    peer: str,
    version: str,
    n: int,
    due: datetime,
    starts: Iterable[tuple[str, float]],
    *,
    ingest_s: float,
    durability: str,
    notes: str = "",
) -> dict[str, Any]:
    """`starts`: (job id, unix start time) per invocation, duplicates included."""
    starts = list(starts)
    counts = Counter(job for job, _t in starts)
    first: dict[str, float] = {}
    for job, t in sorted(starts, key=lambda s: s[1]):
        first.setdefault(job, t)
    late = [t - due.timestamp() for t in first.values()]
    return {
        "peer": peer,
        "version": version,
        "jobs": n,
        "due": due.isoformat(),
        "durability": durability,
        "ingest_jobs_per_s": round(n / ingest_s, 1) if ingest_s > 0 else None,
        "start_lateness_s": {k: round(v, 3) for k, v in percentiles(late).items()},
        "early": sum(1 for x in late if x < 0),
        "within_1s_pct": round(100 * sum(1 for x in late if 0 <= x <= 1) / n, 1) if n else None,
        "last_start_after_due_s": round(max(late), 3) if late else None,
        "lost": n - len(first),
        "duplicated": sum(c - 1 for c in counts.values()),
        "machine": f"{platform.machine()}, {platform.system()}",
        "notes": notes,
    }


def save(res: dict[str, Any], results: Path = RESULTS) -> Path:
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"peer-{res['peer']}-{res['jobs']}.json"
    path.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    return path
