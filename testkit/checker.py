"""The history checker: from the job definitions, the acknowledged commands and what every
component recorded, find lost, early, phantom and differently-keyed duplicate executions,
retry-policy violations, and cursors that disagree with the committed outputs.

Input is the JSONL history a chaos run writes (one event per line, see `Event`); the checker is
pure, so it is tested on hand-made histories with planted faults.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from kadence.models import ScheduleDefinition
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.identity import execution_id

Event = dict[str, Any]
"""{"kind": ..., "at_ms": ..., ...}. Kinds and their fields:
created   job (ScheduleDefinition as JSON), at_ms (acknowledged by the broker)
paused / resumed / deleted   key, at_ms (acknowledged)
dispatched   execution_id, key, trigger, nominal_ms, due_ms, at_ms (read_committed)
revoked   execution_id, key, at_ms
outcome   execution_id, key, attempt, delivery, status, started_ms, finished_ms
dead_letter   execution_id, key, reason
hit       execution_id, key, attempt, delivery, due_ms, at_ms (the target's own log), and
          `"via": "kafka"` for a record a read_committed consumer of a tenant's topic read
explained execution_id, key, decision (a history record saying why it did not run)
cursor    key, cursor_ms (the job's last committed scheduler state; None: deleted)
window    start_ms, end_ms, grace_ms
"""


@dataclass
class Report:
    expected: int = 0
    succeeded: int = 0
    dead_lettered: int = 0
    explained: int = 0
    """Did not run, with a history record saying why (missed by the job's policy, coalesced,
    skipped): accounted for, not lost."""
    same_key_duplicates: int = 0
    """Extra target calls for an attempt already called (redeliveries; allowed: at least once)."""
    kafka_records: int = 0
    """Records of Kafka-topic targets read back (read_committed)."""
    kafka_duplicates: list[str] = field(default_factory=list)
    """A Kafka-topic target's record read twice for one attempt by a read_committed consumer
    (not allowed: those are delivered exactly once)."""
    lost: list[str] = field(default_factory=list)
    early: list[str] = field(default_factory=list)
    different_key_duplicates: list[str] = field(default_factory=list)
    phantom: list[str] = field(default_factory=list)
    retries: list[str] = field(default_factory=list)
    state: list[str] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)
    """A Kadence process that exited by itself (not stopped or killed by the scenario): even
    with nothing lost yet, a broker restart or a bad record must not end a process."""

    FINDINGS = (
        "lost",
        "early",
        "different_key_duplicates",
        "kafka_duplicates",
        "phantom",
        "retries",
        "state",
        "crashed",
    )

    @property
    def ok(self) -> bool:
        return not any(getattr(self, name) for name in self.FINDINGS)

    def render(self, examples: int = 3) -> str:
        lines = [
            f"expected {self.expected} occurrences: {self.succeeded} succeeded, "
            f"{self.dead_lettered} dead-lettered, {self.explained} not run with a reason, "
            f"{self.same_key_duplicates} same-key duplicates; "
            f"{self.kafka_records} Kafka-topic records read back",
        ]
        for name in self.FINDINGS:
            found: list[str] = getattr(self, name)
            verdict = (
                "ok" if not found else f"{len(found)} FOUND, e.g. " + "; ".join(found[:examples])
            )
            lines.append(f"  {name:<26} {verdict}")
        lines.append("PASS" if self.ok else "FAIL")
        return "\n".join(lines)


def check(events: list[Event]) -> Report:
    report = Report()
    by_kind: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        by_kind[e["kind"]].append(e)
    [window] = by_kind["window"]
    horizon = window["end_ms"] - window["grace_ms"]
    jobs = {
        (d := ScheduleDefinition.model_validate(e["job"])).key: (d, e["at_ms"])
        for e in by_kind["created"]
    }
    stops = _stopped_intervals(by_kind, window["end_ms"])
    oracle = _oracle(jobs, stops, horizon)
    report.expected = len(oracle)
    succeeded = {e["execution_id"] for e in by_kind["outcome"] if e["status"] == "succeeded"}
    dead = {e["execution_id"] for e in by_kind["dead_letter"]}
    report.succeeded = len(oracle & succeeded)
    report.dead_lettered = len(oracle & dead - succeeded)
    explained = {e["execution_id"] for e in by_kind["explained"]} - succeeded - dead
    report.explained = len(oracle & explained)
    report.lost = sorted(oracle - succeeded - dead - explained)
    report.crashed = [f"{e['process']} (exit code {e['code']})" for e in by_kind["crashed"]]
    triggers: dict[str, str] = {}
    for e in by_kind["dispatched"]:
        triggers.setdefault(e["execution_id"], e["trigger"])  # the first: retries keep the id
    _hits(by_kind["hit"], triggers, report)
    _phantoms(by_kind, jobs, stops, report)
    _retries(by_kind["hit"], jobs, report)
    _cursors(by_kind, report)
    _final_state(by_kind, jobs, stops, window["end_ms"], report)
    return report


def _stopped_intervals(
    by_kind: dict[str, list[Event]], end_ms: int
) -> dict[str, list[tuple[int, int]]]:
    """Per job, the acknowledged [pause, resume) and [delete, end) intervals."""
    marks = sorted(
        (e["at_ms"], e["kind"], e["key"])
        for kind in ("paused", "resumed", "deleted")
        for e in by_kind[kind]
    )
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    since: dict[str, int] = {}
    for at, kind, key in marks:
        if kind in ("paused", "deleted") and key not in since:
            since[key] = at
        elif kind == "resumed" and key in since:
            out[key].append((since.pop(key), at))
    for key, at in since.items():
        out[key].append((at, end_ms + 1))
    return out


def _during(stops: list[tuple[int, int]], t: int) -> bool:
    return any(a <= t < b for a, b in stops)


def _oracle(
    jobs: dict[str, tuple[ScheduleDefinition, int]],
    stops: dict[str, list[tuple[int, int]]],
    horizon: int,
) -> set[str]:
    """Every occurrence that must have run: due after the job's creation was acknowledged and
    before the horizon, and not while it was paused or deleted (with a second of slack on each
    side of an acknowledgement: the command may overtake or trail an occurrence then)."""
    out: set[str] = set()
    for key, (d, created) in jobs.items():
        compiled = compile_schedule(d.schedule, key)
        cursor = created
        while (occ := compiled.next_after(cursor)) is not None and occ.due_ms <= horizon:
            cursor = occ.nominal_ms
            near_stop = any(a - 1_000 <= occ.due_ms < b + 1_000 for a, b in stops.get(key, []))
            if not near_stop:
                out.add(execution_id(key, occ.nominal_ms))
    return out


def _hits(hits: list[Event], triggers: dict[str, str], report: Report) -> None:
    keys_per_occurrence: dict[tuple[str, int], set[str]] = defaultdict(set)
    seen: set[tuple[str, int]] = set()
    for h in hits:
        if h["at_ms"] < h["due_ms"]:
            report.early.append(f"{h['execution_id']} started {h['due_ms'] - h['at_ms']} ms early")
        if h["attempt"] == 1 and triggers.get(h["execution_id"], "schedule") == "schedule":
            # a first attempt's due time is its occurrence's (a retry's is when it was retried)
            keys_per_occurrence[(h["key"], h["due_ms"])].add(h["execution_id"])
        attempt = (h["execution_id"], h["attempt"])  # a redelivery is a duplicate, a retry not
        report.kafka_records += h.get("via") == "kafka"
        if attempt in seen and h.get("via") == "kafka":
            report.kafka_duplicates.append(f"{h['execution_id']} attempt {h['attempt']}")
        elif attempt in seen:
            report.same_key_duplicates += 1
        seen.add(attempt)
    for (key, due), ids in sorted(keys_per_occurrence.items()):
        manual = {i for i in ids if "@manual:" in i}
        if len(ids - manual) > 1:
            report.different_key_duplicates.append(f"{key} due {due}: {sorted(ids)}")


def _phantoms(
    by_kind: dict[str, list[Event]],
    jobs: dict[str, tuple[ScheduleDefinition, int]],
    stops: dict[str, list[tuple[int, int]]],
    report: Report,
) -> None:
    revoked = {e["execution_id"] for e in by_kind["revoked"]}
    for e in by_kind["dispatched"]:
        if e["trigger"] not in ("schedule", "catch_up") or e["execution_id"] in revoked:
            continue
        key = e["key"]
        if key not in jobs:
            report.phantom.append(f"{e['execution_id']}: no such job was created")
            continue
        d, _created = jobs[key]
        compiled = compile_schedule(d.schedule, key)
        occ = compiled.next_after(e["nominal_ms"] - 1)
        if occ is None or occ.nominal_ms != e["nominal_ms"]:
            report.phantom.append(f"{e['execution_id']}: not an occurrence of {key}")
    trigger: dict[str, str] = {}
    for e in by_kind["dispatched"]:
        trigger.setdefault(e["execution_id"], e["trigger"])  # the first: retries keep the id
    ran = {h["execution_id"]: h for h in by_kind["hit"]}
    for eid, h in sorted(ran.items()):
        if trigger.get(eid, "schedule") != "schedule" or eid in revoked:
            continue  # catch-up after a resume, manual, backfill, replay: asked for
        job_stops = stops.get(h["key"], [])
        if _during(job_stops, h["due_ms"] - 1_000) and _during(job_stops, h["due_ms"]):
            report.phantom.append(f"{eid}: ran although its job was paused or deleted")
    # A revoked occurrence may run again after its job's resume (a catch-up under the same
    # execution id), never while the job is still paused: not a second before the resume.
    for h in sorted(by_kind["hit"], key=lambda h: (h["execution_id"], h["at_ms"])):
        eid = h["execution_id"]
        if eid not in revoked or trigger.get(eid, "schedule") != "schedule":
            continue
        due, at = h["due_ms"], h["at_ms"]
        for a, b in stops.get(h["key"], []):
            if a <= due - 1_000 and due < b and at + 1_000 < b:
                why = "revoked, and ran while its job was paused or deleted"
                report.phantom.append(f"{eid}: {why}")


def _retries(
    hits: list[Event], jobs: dict[str, tuple[ScheduleDefinition, int]], report: Report
) -> None:
    by_id: dict[str, list[Event]] = defaultdict(list)
    for h in hits:
        by_id[h["execution_id"]].append(h)
    for eid, attempts in sorted(by_id.items()):
        if attempts[0]["key"] not in jobs:
            continue
        policy = jobs[attempts[0]["key"]][0].retry
        top = max(a["attempt"] for a in attempts)
        if top > policy.max_attempts:
            report.retries.append(f"{eid}: attempt {top} > max_attempts {policy.max_attempts}")
        if policy.jitter != "none":
            continue
        firsts: dict[int, int] = {}
        for a in sorted(attempts, key=lambda a: a["at_ms"]):
            firsts.setdefault(a["attempt"], a["at_ms"])
        for n in range(2, top + 1):
            if n in firsts and n - 1 in firsts:
                floor = min(
                    policy.max_backoff_ms,
                    int(policy.initial_backoff_ms * policy.multiplier ** (n - 2)),
                )
                gap = firsts[n] - firsts[n - 1]
                if gap < floor:
                    report.retries.append(f"{eid}: attempt {n} {gap} ms after {n - 1} (< {floor})")


def _cursors(by_kind: dict[str, list[Event]], report: Report) -> None:
    revoked = {e["execution_id"] for e in by_kind["revoked"]}
    last_fired: dict[str, int] = {}
    for e in by_kind["dispatched"]:
        if e["trigger"] in ("schedule", "catch_up") and e["execution_id"] not in revoked:
            last_fired[e["key"]] = max(last_fired.get(e["key"], 0), e["nominal_ms"])
    for e in by_kind["cursor"]:
        fired = last_fired.get(e["key"])
        if fired is not None and e["cursor_ms"] is not None and e["cursor_ms"] < fired:
            report.state.append(
                f"{e['key']}: cursor {e['cursor_ms']} is behind its last dispatched "
                f"occurrence {fired}"
            )


def _final_state(
    by_kind: dict[str, list[Event]],
    jobs: dict[str, tuple[ScheduleDefinition, int]],
    stops: dict[str, list[tuple[int, int]]],
    end_ms: int,
    report: Report,
) -> None:
    """Recompute each job's final scheduler state from the committed inputs (its definition
    and the acknowledged commands) and compare: a deleted job has no state; a live one whose
    schedule ended inside the window has decided every occurrence, so its cursor is the last
    one; a job still paused at the end may be behind that, never ahead."""
    final = {e["key"]: e["cursor_ms"] for e in by_kind["cursor"]}
    deleted = {e["key"] for e in by_kind["deleted"]}
    for key, (d, created) in sorted(jobs.items()):
        cursor = final.get(key)
        if key in deleted:
            if cursor is not None:
                report.state.append(f"{key}: deleted, but its state survives (cursor {cursor})")
            continue
        if key not in final:
            report.state.append(f"{key}: created, but the scheduler has no state for it")
            continue
        last = _last_occurrence(d, key, created, end_ms)
        if last is None or getattr(d.schedule, "end_at", None) is None:
            continue
        still_paused = any(b > end_ms for _a, b in stops.get(key, []))
        if cursor is None or cursor > last or (cursor != last and not still_paused):
            report.state.append(
                f"{key}: cursor {cursor}, recomputed from its definition and commands {last}"
            )


def _last_occurrence(d: ScheduleDefinition, key: str, created: int, end_ms: int) -> int | None:
    compiled = compile_schedule(d.schedule, key)
    cursor, last = created, None
    while (occ := compiled.next_after(cursor)) is not None and occ.nominal_ms <= end_ms:
        cursor = last = occ.nominal_ms
    return last
