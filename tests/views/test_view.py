"""The query view without a broker: records applied to the store answer the questions the API
asks (did it run, how late, attempts, the error, why not), and retention drops old history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from kadence.clock import FakeClock, datetime_to_ms
from kadence.models import (
    CronSchedule,
    DeadLetter,
    Decision,
    ExecutionOutcome,
    ExecutionRequested,
    HistoryRecord,
    KafkaTarget,
    ScheduleDefinition,
)
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.timeengine.spread import spread_offset_ms
from streams.views import apply
from streams.views.materializer import Materializer
from streams.views.query import ViewQueries, next_runs
from streams.views.store import ViewStore

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def definition() -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": "tick",
            "version": 1,
            "schedule": {"kind": "cron", "expression": "* * * * *", "spread_s": 0},
            "target": {"kind": "http", "url": "https://example.com/hook"},
        }
    )


def eid(minute: int) -> str:
    return f"acme/tick@{(T0 + timedelta(minutes=minute)).isoformat().replace('+00:00', '.000Z')}"


def outcome(minute: int, status: str, attempt: int = 1, late_s: float = 0.2) -> ExecutionOutcome:
    due = T0 + timedelta(minutes=minute)
    error = None if status == "succeeded" else {"type": "HttpStatus", "message": "503 from target"}
    return ExecutionOutcome.model_validate(
        {
            "execution_id": eid(minute),
            "tenant": "acme",
            "job_id": "tick",
            "attempt": attempt,
            "delivery": 1,
            "worker_id": "w1",
            "status": status,
            "error": error,
            "nominal_at": due,
            "due_at": due,
            "started_at": due + timedelta(seconds=late_s),
            "finished_at": due + timedelta(seconds=late_s + 1),
        }
    )


def decision(minute: int, what: Decision, reason: str = "") -> HistoryRecord:
    at = T0 + timedelta(minutes=minute)
    return HistoryRecord(
        tenant="acme",
        job_id="tick",
        decision=what,
        at=at,
        execution_id=eid(minute),
        nominal_at=at,
        reason=reason,
    )


def _dead_doc() -> dict[str, object]:
    return {
        "execution": ExecutionRequested.model_validate(
            {
                "execution_id": eid(2),
                "tenant": "acme",
                "job_id": "tick",
                "definition_version": 1,
                "attempt": 1,
                "trigger": "schedule",
                "nominal_at": T0 + timedelta(minutes=2),
                "due_at": T0 + timedelta(minutes=2),
                "dispatched_at": T0 + timedelta(minutes=2),
                "target": {"kind": "http", "url": "https://example.com/hook"},
                "timeout_ms": 10_000,
                "lease_ttl_ms": 10_000,
            }
        ),
        "reason": "retries_exhausted",
        "last_error": {"type": "HttpStatus", "message": "503 from target"},
        "dead_lettered_at": T0 + timedelta(minutes=2, seconds=5),
    }


def filled(tmp_path: Path) -> ViewStore:
    store = ViewStore(tmp_path / "view")
    apply.apply_definition(store, b"acme/tick", definition(), "0")
    apply.apply_history(store, decision(0, Decision.fired), "h0")
    apply.apply_outcome(store, outcome(0, "succeeded", late_s=0.25), "o0")
    apply.apply_history(store, decision(1, Decision.skipped_overlap, "run 0 still active"), "h1")
    apply.apply_history(store, decision(2, Decision.fired), "h2")
    apply.apply_outcome(store, outcome(2, "failed"), "o2")
    dead = DeadLetter.model_validate(_dead_doc())
    apply.apply_dead_letter(store, dead, "d2", source="1:42")
    store.flush()
    return store


def test_runs_say_what_happened_to_each_occurrence(tmp_path: Path) -> None:
    q = ViewQueries(filled(tmp_path))
    runs = {r["execution_id"]: r for r in q.runs("acme", "tick")}
    ok, skipped, dead = runs[eid(0)], runs[eid(1)], runs[eid(2)]
    assert (ok["status"], ok["lateness_s"], ok["attempts"]) == ("succeeded", 0.25, 1)
    assert (skipped["status"], skipped["reason"]) == ("not_run", "run 0 still active")
    assert dead["status"] == "dead_lettered"
    assert dead["last_error"]["message"] == "503 from target"
    assert [r["execution_id"] for r in q.runs("acme", "tick")] == [eid(2), eid(1), eid(0)]
    assert q.dead_letters("acme")[0]["state"] == "dead"
    assert q.dead_letters("acme")[0]["source"] == "1:42"  # where a replay reads it back
    assert q.runs("globex", "tick") == []  # keyed by tenant: nothing leaks across


def test_a_run_revoked_ahead_shows_what_was_decided_after(tmp_path: Path) -> None:
    """Revoked by a pause, then skipped at its due time: `not_run`, skipped while paused (it
    stayed `cancelled` before, which hid the skip); revoked by a new version, then fired again:
    `scheduled`."""
    store = ViewStore(tmp_path / "view")
    apply.apply_definition(store, b"acme/tick", definition(), "0")
    revoked = decision(0, Decision.cancelled, "dispatched ahead, revoked: job paused")
    revoked = revoked.model_copy(update={"details": {"revoked": "true"}})
    for minute, seq in ((0, "a"), (1, "b")):
        apply.apply_history(store, decision(minute, Decision.fired), f"{seq}1")
        again = revoked.model_copy(update={"execution_id": eid(minute)})
        apply.apply_history(store, again, f"{seq}2")
    apply.apply_history(store, decision(0, Decision.skipped_paused, "the job is paused"), "a3")
    apply.apply_history(store, decision(1, Decision.fired), "b3")
    store.flush()
    runs = {r["execution_id"]: r for r in ViewQueries(store).runs("acme", "tick")}
    assert (runs[eid(0)]["status"], runs[eid(0)]["reason"]) == ("not_run", "the job is paused")
    assert runs[eid(1)]["status"] == "scheduled"
    assert "revoked_ahead" not in runs[eid(1)]


def test_a_dead_letter_is_marked_replayed_then_succeeded(tmp_path: Path) -> None:
    store = filled(tmp_path)
    apply.apply_history(store, decision(2, Decision.fired), "h2-early")  # before it died: ignored
    store.flush()
    assert ViewQueries(store).dead_letter("acme", eid(2))["state"] == "dead"  # type: ignore[index]
    replay = decision(2, Decision.fired).model_copy(update={"at": T0 + timedelta(minutes=5)})
    apply.apply_history(store, replay, "h-replay")
    store.flush()
    assert ViewQueries(store).dead_letter("acme", eid(2))["state"] == "replayed"  # type: ignore[index]
    later = outcome(2, "succeeded").model_copy(update={"finished_at": T0 + timedelta(minutes=6)})
    apply.apply_outcome(store, later, "o-replay")
    store.flush()
    dead = ViewQueries(store).dead_letter("acme", eid(2))
    assert dead is not None
    assert (dead["state"], dead["replays"], dead["deaths"]) == ("succeeded", 1, 1)


def test_a_replay_that_fails_again_is_dead_again_and_counted(tmp_path: Path) -> None:
    store = filled(tmp_path)
    replay = decision(2, Decision.fired).model_copy(update={"at": T0 + timedelta(minutes=5)})
    apply.apply_history(store, replay, "h-replay")
    store.flush()
    [again] = [e for e in ViewQueries(store).dead_letters("acme")]
    assert again["state"] == "replayed"
    second = DeadLetter.model_validate(
        {**_dead_doc(), "dead_lettered_at": T0 + timedelta(minutes=6)}
    )
    apply.apply_dead_letter(store, second, "d-again")
    store.flush()
    dead = ViewQueries(store).dead_letter("acme", eid(2))
    assert dead is not None
    assert (dead["state"], dead["replays"], dead["deaths"]) == ("dead", 1, 2)


def test_a_deleted_job_s_replay_that_fails_has_ended(tmp_path: Path) -> None:
    """A deleted job's replayed letter runs once and is not retried: its failed outcome ends
    the replay (the letter is `dead` again, so the API lets it be replayed once more); for a
    job that exists a failed attempt may still be retried, and the letter stays `replayed`."""
    store = filled(tmp_path)
    replay = decision(2, Decision.fired).model_copy(update={"at": T0 + timedelta(minutes=5)})
    apply.apply_history(store, replay, "h-replay")
    failed = outcome(2, "failed").model_copy(update={"finished_at": T0 + timedelta(minutes=6)})
    apply.apply_outcome(store, failed, "o-1")
    store.flush()
    assert ViewQueries(store).dead_letter("acme", eid(2))["state"] == "replayed"  # type: ignore[index]
    apply.apply_definition(store, b"acme/tick", None, "del")
    later = failed.model_copy(update={"finished_at": T0 + timedelta(minutes=7)})
    apply.apply_outcome(store, later, "o-2")
    store.flush()
    dead = ViewQueries(store).dead_letter("acme", eid(2))
    assert dead is not None
    assert (dead["state"], dead["replays"], dead["deaths"]) == ("dead", 1, 1)


def test_pause_and_delete_change_the_job(tmp_path: Path) -> None:
    store = filled(tmp_path)
    apply.apply_history(store, decision(3, Decision.paused, "maintenance"), "p")
    store.flush()
    job = ViewQueries(store).job("acme", "tick", datetime_to_ms(T0), 3)
    assert job is not None
    assert (job["state"], job["paused_reason"], job["next_runs"]) == ("paused", "maintenance", [])
    apply.apply_history(store, decision(4, Decision.resumed), "r")
    store.flush()
    job = ViewQueries(store).job("acme", "tick", datetime_to_ms(T0), 3)
    assert job is not None
    assert job["state"] == "active"
    assert job["next_runs"] == [
        "2026-12-01T09:01:00Z",
        "2026-12-01T09:02:00Z",
        "2026-12-01T09:03:00Z",
    ]
    apply.apply_definition(store, b"acme/tick", None, "1")
    store.flush()
    assert ViewQueries(store).job("acme", "tick", 0) is None


def test_next_runs_are_due_times_spread_in_the_minute_by_default() -> None:
    exact = definition()
    assert isinstance(exact.schedule, CronSchedule)
    default = exact.schedule.model_copy(update={"spread_s": None})
    spread = exact.model_copy(update={"schedule": default, "job_id": "tock"})
    offset_ms = spread_offset_ms("acme/tock", 60)
    assert offset_ms % 1000  # shown to the millisecond
    runs = next_runs(spread.model_dump(mode="json"), datetime_to_ms(T0), 2)
    due = [T0 + timedelta(minutes=m, milliseconds=offset_ms) for m in (1, 2)]
    assert runs == [d.isoformat(timespec="milliseconds").replace("+00:00", "Z") for d in due]
    on_time = next_runs(exact.model_dump(mode="json"), datetime_to_ms(T0), 1)
    assert on_time == ["2026-12-01T09:01:00Z"]


def test_retention_drops_only_history_older_than_the_limit(tmp_path: Path) -> None:
    store = filled(tmp_path)
    clock = FakeClock(datetime_to_ms(T0 + timedelta(days=30, minutes=1, seconds=30)))
    settings = KadenceSettings(history_retention_days=30)
    m = Materializer(settings, store, clock)
    before = len(ViewQueries(store).history("acme", "tick"))
    dropped = m.sweep()  # events at minutes 0 and 1 are over 30 days old; minute 2's are not
    after = ViewQueries(store).history("acme", "tick")
    assert dropped == 3
    assert len(after) == before - 3
    assert all(e["at"] >= "2026-12-01T09:02" for e in after)
    assert ViewQueries(store).job("acme", "tick", 0) is not None  # the job itself stays


def test_a_tombstone_deletes_the_job_only_from_the_partition_it_lives_on(tmp_path: Path) -> None:
    """A delete reaches every partition (the SDK writes a tombstone on each, so a job is found
    whatever its concurrency key): the view reads the partitions in no fixed order, so a
    tombstone read late from another partition must not delete the job re-created since."""
    store = ViewStore(tmp_path / "v")
    d = definition()
    parts = 4
    home = partition_for(d.routing_key, parts)
    moved = d.model_copy(update={"concurrency_key": "db"})
    there = partition_for(moved.routing_key, parts)
    assert there != home
    apply.apply_definition(
        store, b"acme/tick", d, "1", partition=home, partitions=parts, source=f"{home}:7"
    )
    apply.apply_definition(
        store, b"acme/tick", None, "2", partition=home, partitions=parts, source=f"{home}:8"
    )
    apply.apply_definition(
        store, b"acme/tick", moved, "3", partition=there, partitions=parts, source=f"{there}:3"
    )
    apply.apply_definition(
        store,
        b"acme/tick",
        None,
        "4",
        partition=(there + 1) % parts,
        partitions=parts,
        source=f"{(there + 1) % parts}:1",
    )
    store.flush()
    job = ViewQueries(store).job("acme", "tick", 0)
    assert job is not None  # the late tombstone of another partition left it alone
    assert job["definition"]["concurrency_key"] == "db"
    apply.apply_definition(
        store, b"acme/tick", None, "5", partition=there, partitions=parts, source=f"{there}:4"
    )
    store.flush()
    assert ViewQueries(store).job("acme", "tick", 0) is None


def test_a_run_waiting_for_its_group_says_so_until_it_starts(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "v")
    apply.apply_definition(store, b"acme/tick", definition(), "0")
    why = "concurrency group db is running a run; this one starts when it ends"
    apply.apply_history(store, decision(0, Decision.buffered, why), "h0")
    store.flush()
    [run] = ViewQueries(store).runs("acme", "tick")
    assert (run["status"], run["reason"]) == ("pending", why)
    apply.apply_history(store, decision(0, Decision.fired), "h1")
    store.flush()
    [run] = ViewQueries(store).runs("acme", "tick")
    assert (run["status"], run["reason"]) == ("scheduled", "")


def test_a_run_waiting_for_its_tenant_s_caps_says_so_then_what_became_of_it(
    tmp_path: Path,
) -> None:
    """Issue 28, item 5: a run held by its tenant's caps shows why it waits; passed over when
    its job caught up (one summary record naming it), it shows as not run, and why."""
    store = ViewStore(tmp_path / "v")
    apply.apply_definition(store, b"acme/tick", definition(), "0")
    why = "waits: the tenant's jobs on this scheduler partition already start 84 runs"
    apply.apply_history(store, decision(0, Decision.throttled, why), "h0")
    store.flush()
    [run] = ViewQueries(store).runs("acme", "tick")
    assert (run["status"], run["reason"]) == ("pending", why)
    summary = "3 occurrences ... fell due while the job waited for its tenant's caps"
    apply.apply_history(store, decision(0, Decision.coalesced, summary), "h1")
    store.flush()
    [run] = ViewQueries(store).runs("acme", "tick")
    assert (run["status"], run["reason"]) == ("not_run", summary)


def test_a_fired_record_for_a_series_shows_each_run_scheduled(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "view")
    apply.apply_definition(store, b"acme/tick", definition(), "0")
    series = decision(0, Decision.fired).model_copy(
        update={
            "due_at": T0,
            "details": {"trigger": "schedule", "runs": "3", "step_ms": "60000"},
        }
    )
    apply.apply_history(store, series, "h0")
    apply.apply_outcome(store, outcome(1, "succeeded"), "o1")
    store.flush()
    runs = {r["execution_id"]: r for r in ViewQueries(store).runs("acme", "tick")}
    assert [runs[eid(m)]["status"] for m in range(3)] == ["scheduled", "succeeded", "scheduled"]
    assert runs[eid(2)]["due_at"] == "2026-12-01T09:02:00Z"


def test_dead_letters_come_a_page_at_a_time_and_filtered(tmp_path: Path) -> None:
    """Issue 31, item 4: paged by execution id (`after`: a page's last), filtered by job,
    state and reason; another tenant's letters are never in a tenant's pages."""
    store = ViewStore(tmp_path / "view")
    base = _dead_doc()
    ex = base["execution"]
    assert isinstance(ex, ExecutionRequested)
    for tenant, job, minute in [("acme", "a", m) for m in range(5)] + [
        ("acme", "b", 0),
        ("globex", "a", 0),
    ]:
        execution_id = f"{tenant}/{job}@2026-12-01T09:{minute:02d}:00.000Z"
        moved = ex.model_copy(
            update={"tenant": tenant, "job_id": job, "execution_id": execution_id}
        )
        letter = DeadLetter.model_validate({**base, "execution": moved})
        apply.apply_dead_letter(store, letter, f"d-{tenant}-{job}-{minute}")
    store.flush()
    q = ViewQueries(store)
    pages, after = [], ""
    while True:
        page = q.dead_letters("acme", limit=2, after=after)
        pages.append([d["execution_id"] for d in page])
        if len(page) < 2:
            break
        after = page[-1]["execution_id"]
    seen = [e for p in pages for e in p]
    assert [len(p) for p in pages] == [2, 2, 2, 0]
    assert seen == sorted(seen) and len(set(seen)) == 6
    assert all(e.startswith("acme/") for e in seen)
    only_b = q.dead_letters("acme", match={"job_id": "b"})
    assert [d["job_id"] for d in only_b] == ["b"]
    assert q.dead_letters("acme", match={"state": "succeeded"}) == []
    assert len(q.dead_letters("acme", match={"reason": "retries_exhausted", "state": "dead"})) == 6
    assert len(q.dead_letters(None, limit=1000)) == 7  # the admin's view: every tenant


def test_history_past_retention_is_rolled_up_per_job_per_day(tmp_path: Path) -> None:
    """Issue 31, item 4: the sweep folds each event it drops into its job's roll-up for its
    day (attempts by status, decisions, dead letters, start lateness), keeps the roll-up, and a
    second sweep counts nothing twice; roll-ups past KADENCE_HISTORY_ROLLUP_DAYS go."""
    store = filled(tmp_path)  # minute 0: fired, succeeded 0.25 s late; 1: skipped; 2: fired,
    # failed 0.2 s late, dead-lettered at 2:05
    clock = FakeClock(datetime_to_ms(T0 + timedelta(days=31)))
    m = Materializer(KadenceSettings(history_retention_days=30), store, clock)
    assert m.sweep() == 6
    assert m.sweep() == 0
    q = ViewQueries(store)
    assert q.history("acme", "tick") == []
    [day] = q.rollups("acme", "tick")
    assert (day["day"], day["events"], day["dead_letters"]) == ("2026-12-01", 6, 1)
    assert day["attempts"] == {"succeeded": 1, "failed": 1}
    assert day["decisions"] == {"fired": 2, "skipped_overlap": 1}
    assert (day["started"], day["lateness_p50_s"], day["lateness_p99_s"]) == (2, 0.25, 0.25)
    assert day["lateness_max_s"] == 0.25
    apply.apply_outcome(store, outcome(3, "succeeded", late_s=40.0), "o3")  # a late one, later
    store.flush()
    clock.set(datetime_to_ms(T0 + timedelta(days=31, minutes=5)))
    assert m.sweep() == 1
    [day] = q.rollups("acme", "tick")
    assert day["attempts"] == {"succeeded": 2, "failed": 1}
    assert (day["started"], day["lateness_p99_s"], day["lateness_max_s"]) == (3, 60, 40.0)
    assert q.rollups("globex", "tick") == []
    keep = KadenceSettings(history_retention_days=30, history_rollup_days=40)
    clock.set(datetime_to_ms(T0 + timedelta(days=41)))
    Materializer(keep, store, clock).sweep()
    assert q.rollups("acme", "tick") == []


def test_a_job_stored_before_the_envelope_check_still_shows_its_next_runs() -> None:
    """Issue 43, item 7: a definition the scheduler accepted before payloads were checked
    against a JSON target's envelope is still a job the view can describe (validating it
    again would answer every read of it with an error)."""
    old = definition().model_copy(
        update={"target": KafkaTarget(topic="out", format="json"), "payload": b"\x01" * 524_288}
    )
    shown = apply.definition_doc(old)
    assert apply.shown_definition(shown).payload == old.payload
    assert next_runs(shown, datetime_to_ms(T0), 1) == ["2026-12-01T09:01:00Z"]
