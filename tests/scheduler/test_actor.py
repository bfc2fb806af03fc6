"""Who did it (issue 42, item 8): each history record a command leads to names the command's
actor in its details, `kafka` when the command came without one (written to Kafka directly);
what the scheduler decides by itself names none. The query view shows it on the event, the run
and the job (who paused it, who wrote its versions)."""

from __future__ import annotations

from pathlib import Path

from kadence.models import (
    CancelRun,
    Decision,
    HistoryRecord,
    PauseJob,
    ResumeJob,
    ScheduleDefinition,
    TriggerNow,
)
from kadence.models.records import ACTOR, KAFKA_ACTOR, MAX_DETAILS
from streams.scheduler import commands, firing
from streams.scheduler.step import Effects, Emit, Sink
from streams.views import apply
from streams.views.query import ViewQueries
from streams.views.store import ViewStore
from tests.scheduler.test_domain import MIN, T0, cmd, create, ctx, definition


def history(effects: Effects) -> list[HistoryRecord]:
    return [e.record for e in effects.out if isinstance(e.record, HistoryRecord)]


def test_a_pause_and_a_trigger_name_their_actor_and_a_scheduled_firing_none() -> None:
    job = create()
    paused = commands.apply_command(
        job, cmd(PauseJob, request_id="p1", reason="db migration", actor="token:oncall"), ctx(T0)
    )
    [record] = history(paused)
    assert (record.decision, record.details[ACTOR]) == (Decision.paused, "token:oncall")
    assert paused.state is not None
    resumed = commands.apply_command(
        paused.state, cmd(ResumeJob, request_id="r1", actor="jwt:alice@example.com"), ctx(T0)
    )
    assert {r.details[ACTOR] for r in history(resumed)} == {"jwt:alice@example.com"}
    assert resumed.state is not None
    triggered = commands.apply_command(
        resumed.state, cmd(TriggerNow, request_id="t1", actor="token:ci"), ctx(T0 + 1)
    )
    fired = [r for r in history(triggered) if r.decision is Decision.fired]
    assert fired and all(r.details[ACTOR] == "token:ci" for r in fired)
    assert triggered.state is not None
    due = firing.on_due(triggered.state, ctx(T0 + MIN))
    assert history(due) and all(ACTOR not in r.details for r in history(due))


def test_a_command_without_an_actor_is_shown_as_written_to_kafka() -> None:
    paused = commands.apply_command(create(), cmd(PauseJob, request_id="p1"), ctx(T0))
    assert [r.details[ACTOR] for r in history(paused)] == [KAFKA_ACTOR]


def test_a_cancel_of_nothing_names_its_actor_too() -> None:
    cancel = cmd(CancelRun, request_id="c1", execution_id="acme/job@x", actor="token:ops")
    done = commands.apply_command(create(), cancel, ctx(T0))
    assert [(r.decision, r.details[ACTOR]) for r in history(done)] == [
        (Decision.cancel_requested, "token:ops")
    ]


def test_details_already_full_are_kept_as_they_are() -> None:
    full = _record({f"k{i}": "v" for i in range(MAX_DETAILS)})
    [kept] = commands.signed([Emit(Sink.history, full)], "token:ops")
    assert kept.record is full


def _record(details: dict[str, str] | None = None) -> HistoryRecord:
    return HistoryRecord(
        tenant="acme",
        job_id="job",
        decision=Decision.paused,
        at="2026-12-01T09:00:00Z",
        details=details or {},
    )


def test_the_view_shows_who_paused_and_who_wrote_each_version(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "v")
    first = definition().model_copy(update={"actor": "token:alice"})
    apply.apply_definition(store, b"acme/job", first, "0")
    paused = commands.apply_command(
        create(first), cmd(PauseJob, request_id="p1", actor="token:oncall"), ctx(T0)
    )
    for i, r in enumerate(history(paused)):
        apply.apply_history(store, r, f"h{i}")
    second = ScheduleDefinition.model_validate({**first.model_dump(), "version": 2, "actor": None})
    apply.apply_definition(store, b"acme/job", second, "1")
    store.flush()
    view = ViewQueries(store)
    job = view.job("acme", "job", T0)
    assert job is not None
    assert (job["created_by"], job["updated_by"], job["paused_by"]) == (
        "token:alice",
        KAFKA_ACTOR,  # version 2 came straight from Kafka
        "token:oncall",
    )
    [event] = view.history("acme", "job")
    assert event["actor"] == "token:oncall"


def test_a_triggered_run_names_who_triggered_it(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "v")
    apply.apply_definition(store, b"acme/job", definition(), "0")
    triggered = commands.apply_command(
        create(), cmd(TriggerNow, request_id="t1", actor="token:ci"), ctx(T0)
    )
    for i, r in enumerate(history(triggered)):
        apply.apply_history(store, r, f"h{i}")
    store.flush()
    [run] = ViewQueries(store).runs("acme", "job")
    assert run["actor"] == "token:ci"
