"""A job with `max_runs` lists only the runs it has left (issue 31): the query view takes the
count from the `fired` records' `runs_done` and lists no occurrence past the last one allowed,
runs sent ahead of their due times included."""

from __future__ import annotations

from pathlib import Path

from kadence.clock import datetime_to_ms
from kadence.models import Decision, HistoryRecord, ScheduleDefinition
from streams.views import apply
from streams.views.query import ViewQueries
from streams.views.store import ViewStore
from tests.views.test_view import T0, decision, definition

MIN = 60_000


def limited(store: ViewStore, max_runs: int) -> None:
    d = definition().model_copy(update={"max_runs": max_runs})
    apply.apply_definition(store, b"acme/tick", ScheduleDefinition.model_validate(d), "0")


def fired(minute: int, runs_done: int) -> HistoryRecord:
    return decision(minute, Decision.fired).model_copy(
        update={"details": {"trigger": "schedule", "runs_done": str(runs_done)}}
    )


def listed(q: ViewQueries, at_minute: float, n: int = 10) -> list[int]:
    now = datetime_to_ms(T0) + int(at_minute * MIN)
    job = q.job("acme", "tick", now, preview=n)
    assert job is not None
    return [
        (datetime_to_ms(T0.fromisoformat(t.replace("Z", "+00:00"))) - datetime_to_ms(T0)) // MIN
        for t in job["next_runs"]
    ]


def test_only_the_runs_max_runs_leaves_are_listed(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "view")
    q = ViewQueries(store)
    limited(store, 3)
    assert listed(q, 0.5) == [1, 2, 3]  # none sent yet: three
    apply.apply_history(store, fired(1, 1), "h1")
    assert listed(q, 1.5) == [2, 3]
    apply.apply_history(store, fired(3, 3), "h3")  # runs 2 and 3 sent, 3 ahead of its time
    assert listed(q, 2.5) == [3]  # the one sent ahead is still to come
    assert listed(q, 3.5) == []
    unlimited = ViewStore(tmp_path / "other")
    apply.apply_definition(unlimited, b"acme/tick", definition(), "0")
    assert len(listed(ViewQueries(unlimited), 0.5, n=5)) == 5
    store.close()
    unlimited.close()


def test_a_new_version_with_more_runs_lists_more(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "view")
    q = ViewQueries(store)
    limited(store, 2)
    apply.apply_history(store, fired(2, 2), "h2")
    assert listed(q, 2.5) == []
    more = definition().model_copy(update={"max_runs": 4, "version": 2})
    apply.apply_definition(store, b"acme/tick", ScheduleDefinition.model_validate(more), "1")
    assert listed(q, 2.5) == [3, 4]
    store.close()
