"""The checker itself: a clean history passes; each planted fault is found, with an example."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from apps.processes import ChildProcess
from kadence.clock import datetime_to_ms
from kadence.models import KafkaTarget, ScheduleDefinition
from kadence.settings import KadenceSettings
from testkit.chaos_run import Run
from testkit.checker import Event, check
from testkit.history_io import iso

T0 = 1_796_115_600_000  # 2026-12-01T09:00:00Z, a whole minute
KEY = "acme/tick"


def job(**kw: Any) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": "tick",
            "version": 1,
            "schedule": {"kind": "cron", "expression": "* * * * * *"},
            "target": KafkaTarget(topic="t"),
            "overlap": "allow",
            "retry": {"max_attempts": 3, "initial_backoff_ms": 1_000, "jitter": "none"},
            **kw,
        }
    )


def eid(t: int) -> str:
    return f"{KEY}@{iso(t)}"


def clean(seconds: int = 10) -> list[Event]:
    """A job every second for `seconds` s: each occurrence dispatched, run once, succeeded."""
    events: list[Event] = [
        {"kind": "window", "start_ms": T0, "end_ms": T0 + seconds * 1_000, "grace_ms": 0},
        {"kind": "created", "job": job().model_dump(mode="json"), "at_ms": T0},
    ]
    for s in range(1, seconds + 1):
        t = T0 + s * 1_000
        events += [
            {
                "kind": "dispatched",
                "execution_id": eid(t),
                "key": KEY,
                "trigger": "schedule",
                "nominal_ms": t,
                "due_ms": t,
                "at_ms": t - 500,
            },
            {
                "kind": "hit",
                "execution_id": eid(t),
                "key": KEY,
                "attempt": 1,
                "delivery": 1,
                "due_ms": t,
                "at_ms": t + 5,
            },
            {
                "kind": "outcome",
                "execution_id": eid(t),
                "key": KEY,
                "attempt": 1,
                "delivery": 1,
                "status": "succeeded",
                "started_ms": t + 5,
                "finished_ms": t + 9,
            },
        ]
    events.append({"kind": "cursor", "key": KEY, "cursor_ms": T0 + seconds * 1_000})
    return events


def test_a_clean_history_passes() -> None:
    report = check(clean())
    assert report.ok, report.render()
    assert (report.expected, report.succeeded) == (10, 10)
    assert "PASS" in report.render()


def test_a_planted_loss_is_found() -> None:
    lost = eid(T0 + 4_000)
    events = [e for e in clean() if not (e["kind"] == "outcome" and e["execution_id"] == lost)]
    report = check(events)
    assert report.lost == [lost]
    assert not report.ok
    assert "lost" in report.render() and "FAIL" in report.render()


def test_a_process_that_exited_by_itself_fails_the_run_with_nothing_lost() -> None:
    events = [*clean(), {"kind": "crashed", "process": "reaper.log", "code": -6}]
    report = check(events)
    assert report.lost == []
    assert report.crashed == ["reaper.log (exit code -6)"]
    assert not report.ok
    assert "crashed" in report.render() and "FAIL" in report.render()


def test_a_dead_letter_is_not_a_loss() -> None:
    gone = eid(T0 + 4_000)
    events = [e for e in clean() if not (e["kind"] == "outcome" and e["execution_id"] == gone)]
    events.append({"kind": "dead_letter", "execution_id": gone, "key": KEY, "reason": "x"})
    report = check(events)
    assert report.ok
    assert report.dead_lettered == 1


def test_a_planted_early_start_is_found() -> None:
    events = clean()
    t = T0 + 3_000
    events.append(
        {
            "kind": "hit",
            "execution_id": eid(t),
            "key": KEY,
            "attempt": 1,
            "delivery": 2,
            "due_ms": t,
            "at_ms": t - 40,
        }
    )
    report = check(events)
    assert report.early == [f"{eid(t)} started 40 ms early"]


def test_a_duplicate_with_a_different_key_is_found_and_one_with_the_same_key_is_counted() -> None:
    events = clean()
    t = T0 + 2_000
    events.append(
        {
            "kind": "hit",
            "execution_id": eid(t),
            "key": KEY,
            "attempt": 1,
            "delivery": 1,
            "due_ms": t,
            "at_ms": t + 50,
        }
    )  # same key: fine
    events.append(
        {
            "kind": "hit",
            "execution_id": f"{KEY}@other",
            "key": KEY,
            "attempt": 1,
            "delivery": 1,
            "due_ms": t,
            "at_ms": t + 60,
        }
    )  # same occurrence, new key
    report = check(events)
    assert report.same_key_duplicates == 1
    assert len(report.different_key_duplicates) == 1
    assert f"{KEY}@other" in report.different_key_duplicates[0]


def test_a_phantom_execution_and_a_run_after_a_pause_are_found() -> None:
    events = clean()
    odd = T0 + 2_500  # not a whole second: no occurrence of the job
    events.append(
        {
            "kind": "dispatched",
            "execution_id": eid(odd),
            "key": KEY,
            "trigger": "schedule",
            "nominal_ms": odd,
            "due_ms": odd,
            "at_ms": odd,
        }
    )
    events.append({"kind": "paused", "key": KEY, "at_ms": T0 + 5_200})
    report = check(events)
    assert any(eid(odd) in p and "not an occurrence" in p for p in report.phantom)
    # 6 s .. 10 s ran after an acknowledged pause at 5.2 s (6 s is within the 1 s slack)
    after = [p for p in report.phantom if "paused or deleted" in p]
    assert [p.split(": ran")[0] for p in after] == [eid(T0 + s * 1_000) for s in (7, 8, 9, 10)]


def test_retry_violations_are_found() -> None:
    events = clean()
    t = T0 + 1_000
    for attempt, at in ((2, t + 300), (3, t + 5_000), (4, t + 9_000)):
        events.append(
            {
                "kind": "hit",
                "execution_id": eid(t),
                "key": KEY,
                "attempt": attempt,
                "delivery": 1,
                "due_ms": t,
                "at_ms": at,
            }
        )
    report = check(events)
    assert f"{eid(t)}: attempt 4 > max_attempts 3" in report.retries
    assert any("attempt 2 295 ms after 1 (< 1000)" in r for r in report.retries)


def test_a_cursor_behind_the_committed_outputs_is_found() -> None:
    events = [e for e in clean() if e["kind"] != "cursor"]
    events.append({"kind": "cursor", "key": KEY, "cursor_ms": T0 + 3_000})
    report = check(events)
    assert report.state and "behind" in report.state[0]


def test_iso_matches_the_execution_id_format() -> None:
    from datetime import UTC, datetime  # noqa: PLC0415

    assert (
        iso(datetime_to_ms(datetime(2026, 12, 1, 9, 0, tzinfo=UTC))) == "2026-12-01T09:00:00.000Z"
    )


def test_retries_of_different_occurrences_due_together_are_not_duplicates() -> None:
    events = clean()
    retry_at = T0 + 20_000  # a restarted scheduler retried two failures in the same turn
    for s in (1, 2):
        t = T0 + s * 1_000
        events.append(
            {
                "kind": "dispatched",
                "execution_id": eid(t),
                "key": KEY,
                "trigger": "retry",
                "nominal_ms": t,
                "due_ms": retry_at,
                "at_ms": retry_at,
            }
        )
        events.append(
            {
                "kind": "hit",
                "execution_id": eid(t),
                "key": KEY,
                "attempt": 2,
                "delivery": 1,
                "due_ms": retry_at,
                "at_ms": retry_at + 3,
            }
        )
    report = check(events)
    assert report.different_key_duplicates == []
    assert report.ok, report.render()


def test_an_occurrence_missed_by_policy_with_a_history_record_is_not_lost() -> None:
    gone = eid(T0 + 4_000)
    events = [e for e in clean() if e.get("execution_id") != gone]
    assert check(events).lost == [gone]
    events.append({"kind": "explained", "execution_id": gone, "key": KEY, "decision": "missed"})
    report = check(events)
    assert report.ok
    assert report.explained == 1


def ending(seconds: int = 10) -> list[Event]:
    """clean(), with the job's schedule ending at the window's end."""
    end = iso(T0 + seconds * 1_000)
    schedule = {"kind": "cron", "expression": "* * * * * *", "end_at": end}
    d = job(schedule=schedule).model_dump(mode="json")
    return [{**e, "job": d} if e["kind"] == "created" else e for e in clean(seconds)]


def test_a_cursor_that_differs_from_its_recomputation_is_found() -> None:
    assert check(ending()).ok, check(ending()).render()
    events = [e for e in ending() if e["kind"] != "cursor"]
    events.append({"kind": "cursor", "key": KEY, "cursor_ms": T0 + 11_000})  # past its end
    report = check(events)
    assert report.state == [
        f"{KEY}: cursor {T0 + 11_000}, recomputed from its definition and commands {T0 + 10_000}"
    ]


def test_a_job_still_paused_may_be_behind_its_recomputation() -> None:
    later = {eid(T0 + s * 1_000) for s in range(6, 11)}  # not run: paused before them
    events = [e for e in ending() if e["kind"] != "cursor" and e.get("execution_id") not in later]
    events.append({"kind": "paused", "key": KEY, "at_ms": T0 + 5_500})
    events.append({"kind": "cursor", "key": KEY, "cursor_ms": T0 + 5_000})
    assert check(events).state == []
    events.append({"kind": "resumed", "key": KEY, "at_ms": T0 + 7_000})
    assert check(events).state  # resumed: it must have caught up to its end


def test_state_surviving_a_delete_and_a_job_without_state_are_found() -> None:
    events = [*clean(), {"kind": "deleted", "key": KEY, "at_ms": T0 + 10_500}]
    assert check(events).state == [f"{KEY}: deleted, but its state survives (cursor {T0 + 10_000})"]
    events = [e for e in clean() if e["kind"] != "cursor"]
    assert check(events).state == [f"{KEY}: created, but the scheduler has no state for it"]


def test_a_kafka_record_read_twice_for_one_attempt_is_a_finding_an_http_repeat_is_not() -> None:
    """Kafka-topic targets are delivered exactly once to read_committed consumers: a second
    record of one attempt fails the run; a second webhook call is at least once, counted."""
    t = T0 + 2_000
    hit = {"kind": "hit", "execution_id": eid(t), "key": KEY, "attempt": 1, "delivery": 1}
    kafka = [{**e, "via": "kafka"} if e["kind"] == "hit" else e for e in clean()]
    assert check(kafka).ok
    twice = check([*kafka, {**hit, "via": "kafka", "due_ms": t, "at_ms": t + 50}])
    assert twice.kafka_duplicates == [f"{eid(t)} attempt 1"]
    assert twice.kafka_records == check(kafka).kafka_records + 1 > 1
    assert not twice.ok
    webhook = check([*clean(), {**hit, "due_ms": t, "at_ms": t + 50}])
    assert (webhook.kafka_duplicates, webhook.same_key_duplicates, webhook.ok) == ([], 1, True)


def test_the_run_reports_a_process_that_exited_by_itself_and_not_one_it_stopped() -> None:
    def child(code: str) -> ChildProcess:
        proc = ChildProcess("x", KadenceSettings(), log=Path(f"{len(code)}.log"))
        proc.proc = subprocess.Popen([sys.executable, "-c", code])
        return proc

    aborted = child("import os; os.abort()")
    failed = child("raise SystemExit(2)")
    clean = child("pass")
    killed = child("import time; time.sleep(60)")
    killed.signal(signal.SIGKILL)
    for proc in (aborted, failed, clean):
        assert proc.proc is not None
        proc.proc.wait(30)
    run = SimpleNamespace(schedulers=[aborted], reaper=clean, worker_procs=[failed, killed])
    crashed = Run.crashes(run)  # type: ignore[arg-type]
    assert [(e["process"], e["code"]) for e in crashed] == [
        (aborted.log.name, -signal.SIGABRT),  # type: ignore[union-attr]
        (failed.log.name, 2),  # type: ignore[union-attr]
    ]


def test_a_revoked_run_that_ran_while_its_job_was_paused_is_found() -> None:
    """A revoked occurrence may run again after the resume (a catch-up, same execution id), not
    before it: the 0.14.0 bug, a paused job's run revoked out of its batch and run anyway."""
    events = clean()
    events += [
        {"kind": "paused", "key": KEY, "at_ms": T0 + 3_200},
        {"kind": "resumed", "key": KEY, "at_ms": T0 + 8_500},
    ]
    for s in (5, 6):
        events.append({"kind": "revoked", "execution_id": eid(T0 + s * 1_000), "key": KEY})
    for e in events:  # 6 s ran after the resume (a catch-up); 5 s at its due time, paused
        if e["kind"] == "hit" and e["execution_id"] == eid(T0 + 6_000):
            e["at_ms"] = T0 + 8_700
    report = check(events)
    revoked_ran = [p for p in report.phantom if "revoked" in p]
    why = "revoked, and ran while its job was paused or deleted"
    assert revoked_ran == [f"{eid(T0 + 5_000)}: {why}"]
