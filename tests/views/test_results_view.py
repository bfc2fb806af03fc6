"""Issue 42, item 4: the query view shows what each attempt returned, in the job's history and
as the latest attempt's result on its run; a binary body as base64; only to the job's tenant."""

from __future__ import annotations

import base64
from pathlib import Path

from kadence.models import Decision, RunResult
from streams.views import apply
from streams.views.query import ViewQueries
from streams.views.store import ViewStore
from tests.views.test_view import decision, definition, eid, outcome


def test_each_attempt_shows_its_result_and_the_run_its_latest(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "view")
    apply.apply_definition(store, b"acme/tick", definition(), "0")
    apply.apply_history(store, decision(0, Decision.fired), "h0")
    first = outcome(0, "failed").model_copy(
        update={"result": RunResult(status_code=503, body=bytes([0xFF, 0x00, 0x81]))}
    )
    second = outcome(0, "succeeded", attempt=2).model_copy(
        update={"result": RunResult(status_code=201, headers={"etag": "v2"}, body=b'{"id": 7}')}
    )
    apply.apply_outcome(store, first, "o1")
    apply.apply_outcome(store, second, "o2")
    apply.apply_outcome(store, outcome(1, "succeeded"), "o3")  # no result: none shown
    store.flush()
    q = ViewQueries(store)
    attempts = [e for e in q.history("acme", "tick") if e["kind"] == "outcome"]
    by_attempt = {(e["execution_id"], e["attempt"]): e for e in attempts}
    assert by_attempt[(eid(0), 1)]["result"] == {
        "status_code": 503,
        "body": base64.b64encode(b"\xff\x00\x81").decode(),
        "body_encoding": "base64",
    }
    assert by_attempt[(eid(0), 2)]["result"] == {
        "status_code": 201,
        "headers": {"etag": "v2"},
        "body": '{"id": 7}',
    }
    assert "result" not in by_attempt[(eid(1), 1)]
    runs = {r["execution_id"]: r for r in q.runs("acme", "tick")}
    assert runs[eid(0)]["result"]["status_code"] == 201  # the latest attempt's
    assert runs[eid(1)]["result"] is None
    assert q.runs("globex", "tick") == []  # another tenant sees none of it
