"""Which jobs a bench run counts `lost` (occurrences that neither succeeded nor were skipped
by the missed-run policy), and what their history says about them.

B2 gives `lost` as one count (bench/sustained.py): expected, less what succeeded, less what
history says was skipped. On 2026-12-08 one run at 20 000/s counted 20 000 lost, a run for each
of its 20 000 jobs, and the count alone could not say which runs, nor whether a job stopped or
the count was off. Now a run that counts any names them: the jobs, per job the occurrences with
neither a success nor a skip, the seconds after the start their due times fall in, and the
history records of a few of those jobs (read again from the history topic, only then).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kadence.codec import Codec
from kadence.models import HistoryRecord
from testkit.topic_reader import read_to_end

SAMPLE_JOBS = 3
"""Jobs whose history a row with lost runs shows."""
SAMPLE_RECORDS = 40
"""History records shown per sampled job (its last ones: a lost run is near the end)."""


@dataclass
class Lost:
    """The jobs with lost occurrences, and the seconds their missing successes fall in."""

    jobs: dict[str, int] = field(default_factory=dict)
    """Job key -> its occurrences neither succeeded nor skipped."""
    unsucceeded_s: dict[int, int] = field(default_factory=dict)
    """Over those jobs: the seconds after the start with no success of theirs (skipped ones
    too: history counts skips per job, not per occurrence), and how many jobs had none then."""
    history: dict[str, list[str]] = field(default_factory=dict)
    """Sampled job -> its last history records, one line each."""

    def as_row(self) -> dict[str, object]:
        return {
            "jobs": len(self.jobs),
            "runs": sum(self.jobs.values()),
            "per_job": dict(sorted(_counted(self.jobs.values()).items())),
            "unsucceeded_s_after_start": dict(sorted(self.unsucceeded_s.items())),
            "history": self.history,
        }


def lost_runs(
    succeeded: Iterable[tuple[str, float]],
    keys: Iterable[str],
    due_s: range,
    skipped_by_job: Mapping[str, int],
) -> Lost:
    """The jobs among `keys` (each due once a second in `due_s`, unix seconds) with fewer
    successes (`succeeded`: job key and due time of each run that succeeded, first ones only)
    than occurrences less the skips history gives for them (`skipped_by_job`)."""
    seen: dict[str, set[int]] = {}
    for key, due in succeeded:
        seen.setdefault(key, set()).add(int(due))
    lost = Lost()
    for key in keys:
        done = seen.get(key, set())
        gone = len(due_s) - len(done & set(due_s)) - skipped_by_job.get(key, 0)
        if gone <= 0:
            continue
        lost.jobs[key] = gone
        for second in due_s:
            if second not in done:
                at = second - due_s.start
                lost.unsucceeded_s[at] = lost.unsucceeded_s.get(at, 0) + 1
    return lost


def sample_history(
    bootstrap: str, history_topic: str, keys: Iterable[str], timeout_s: float = 300
) -> dict[str, list[str]]:
    """The last SAMPLE_RECORDS history records of each job in `keys`, one line each."""
    wanted = set(keys)
    found: dict[str, list[str]] = {key: [] for key in wanted}
    codec = Codec()
    for msg in read_to_end(bootstrap, history_topic, timeout_s):
        value = msg.value()
        if value is None:
            continue
        record = codec.decode(value)
        if isinstance(record, HistoryRecord) and record.key in wanted:
            lines = found[record.key]
            lines.append(line(record))
            del lines[:-SAMPLE_RECORDS]
    return found


def line(record: HistoryRecord) -> str:
    """A history record as one line: when, what, which run, why, details."""
    due = record.due_at.isoformat() if record.due_at else "-"
    details = ",".join(f"{k}={v}" for k, v in sorted(record.details.items()))
    return (
        f"{record.at.isoformat()} {record.decision.value} {record.execution_id or '-'} "
        f"due {due} attempt {record.attempt or '-'}: {record.reason or ''} [{details}]"
    )


def _counted(values: Iterable[int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for n in values:
        counts[n] = counts.get(n, 0) + 1
    return counts
