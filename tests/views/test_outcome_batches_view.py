"""The view reads a worker's batch of outcomes as each outcome on its own: every one is an
event of its job's history, also two of one job that ended at the same millisecond."""

from __future__ import annotations

from pathlib import Path

from kadence.codec import Codec
from kadence.models import ExecutionOutcomes
from kadence.settings import KadenceSettings
from streams.views.materializer import Materializer
from streams.views.query import ViewQueries
from streams.views.store import ViewStore
from tests.hostile.test_view_input import FakeMessage
from tests.views.test_view import definition, eid, outcome

CODEC = Codec()


def test_each_outcome_of_a_batch_is_its_own_event(tmp_path: Path) -> None:
    m = Materializer(KadenceSettings(partitions=1), ViewStore(tmp_path / "view"))
    d = definition()
    m._apply(FakeMessage(m.topics.schedules, 0, d.key.encode(), CODEC.encode(d)))  # type: ignore[arg-type]
    first, retried = outcome(0, "failed"), outcome(0, "succeeded", attempt=2)
    retried = retried.model_copy(update={"finished_at": first.finished_at})  # the same instant
    batch = ExecutionOutcomes(outcomes=[first, retried, outcome(1, "succeeded")])
    m._apply(FakeMessage(m.topics.outcomes, 5, b"", CODEC.encode(batch)))  # type: ignore[arg-type]
    m.store.flush()
    events = ViewQueries(m.store).history("acme", "tick")
    seen = sorted((e["execution_id"], e["attempt"], e["status"]) for e in events)
    assert seen == [(eid(0), 1, "failed"), (eid(0), 2, "succeeded"), (eid(1), 1, "succeeded")]
