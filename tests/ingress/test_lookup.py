"""The ingress's one question per batch to the query view (`POST /jobs-known`), over the view's
real HTTP endpoint on an in-process store: answers, refusals, and the back-off after a failure
that keeps a dead view from costing every batch a timeout."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from kadence.models import ScheduleDefinition
from kadence.partitioning import partition_for
from streams.ingress.lookup import BACKOFF_S, Known, ViewLookup, ViewUnavailableError
from streams.views import apply
from streams.views.access import TOKEN_HEADER, ViewAccess
from streams.views.server import KNOWN_KEYS, serve
from streams.views.store import ViewStore

TOKEN = "view-token"


@pytest.fixture
def view(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    store = ViewStore(tmp_path / "view")
    d = ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": "tick",
            "version": 2,
            "schedule": {"kind": "cron", "expression": "* * * * *"},
            "target": {"kind": "http", "url": "https://example.com/hook"},
        }
    )
    p = partition_for(d.routing_key, 4)
    apply.apply_definition(store, b"acme/tick", d, "0", partition=p, partitions=4, source=f"{p}:0")
    store.flush()
    materializer: Any = SimpleNamespace(
        store=store, clock=None, changed=threading.Condition(), ready=True
    )
    server = serve(0, materializer, access=ViewAccess(TOKEN))
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", materializer
    finally:
        server.shutdown()
        store.close()


def test_the_view_answers_the_batch_in_one_call(view: tuple[str, Any]) -> None:
    url, _ = view
    answer = ViewLookup(url, TOKEN).ask(["acme/tick", "acme/other"], {"acme": 10, "globex": 10})
    home = partition_for("acme/tick", 4)
    assert answer.jobs == {"acme/tick": Known(2, home), "acme/other": None}
    assert answer.counts == {"acme": 1, "globex": 0}


def test_a_view_still_reading_from_the_start_is_unavailable(view: tuple[str, Any]) -> None:
    url, materializer = view
    materializer.ready = False
    with pytest.raises(ViewUnavailableError, match="503"):
        ViewLookup(url, TOKEN).ask(["acme/tick"], {})


def test_without_the_token_the_ingress_asks_nothing(view: tuple[str, Any]) -> None:
    url, _ = view
    with pytest.raises(ViewUnavailableError, match="KADENCE_VIEW_TOKEN"):
        ViewLookup(url, "").ask(["acme/tick"], {})
    with pytest.raises(ViewUnavailableError, match="401"):
        ViewLookup(url, "wrong").ask(["acme/tick"], {})


def test_after_a_failure_the_view_is_not_asked_again_for_a_while(view: tuple[str, Any]) -> None:
    url, materializer = view
    now = [0.0]
    lookup = ViewLookup(url, TOKEN, clock=lambda: now[0])
    materializer.ready = False
    with pytest.raises(ViewUnavailableError):
        lookup.ask(["acme/tick"], {})
    materializer.ready = True
    with pytest.raises(ViewUnavailableError, match="not asked again"):
        lookup.ask(["acme/tick"], {})  # answered at once: no call made
    now[0] = BACKOFF_S
    assert lookup.ask(["acme/tick"], {}).jobs["acme/tick"] is not None


def test_a_malformed_or_oversized_question_is_a_400(view: tuple[str, Any]) -> None:
    url, _ = view
    headers = {TOKEN_HEADER: TOKEN}
    for body in (b"[1]", b"{", b'{"counts": {"acme": "x"}}'):
        r = httpx.post(url + "/jobs-known", content=body, headers=headers, timeout=10)
        assert r.status_code == 400, body
    many = {"jobs": [f"acme/j{i}" for i in range(KNOWN_KEYS + 1)]}
    r = httpx.post(url + "/jobs-known", json=many, headers=headers, timeout=10)
    assert r.status_code == 400
    assert httpx.post(url + "/jobs-known", json={}, timeout=10).status_code == 401
