"""Issue 28 against the real stack: what only Kadence may say cannot be forged on `commands`,
and a dead letter replays once at a time.

Before: one JSON `JobMoved` produced to `commands` as kcat would removed a per-second job from
its scheduler while the view still showed it; 30 replays of one dead letter in a row answered
202 thirty times and ran 30 more times."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka import Producer

from kadence.codec import Codec
from kadence.models import Rejected
from kadence.partitioning import partition_for
from kadence.topics import Topics
from testkit.topic_reader import read_topic
from tests.api.conftest import Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
CODEC = Codec()


def _hits(api: Api, eid_prefix: str, path: str | None = None) -> list[Any]:
    return [x for x in api.target.seen(path) if x.headers["idempotency-key"].startswith(eid_prefix)]


def _produce_json(api: Api, topic: str, key: str, doc: dict[str, Any], partition: int) -> None:
    """As `kcat -P -t <topic> -K:` would: a JSON document, keyed, on the partition the key
    routes to (murmur2, as Kadence's partitioner)."""
    producer = Producer({"bootstrap.servers": api.settings.bootstrap_servers})
    producer.produce(topic, key=key.encode(), value=json.dumps(doc).encode(), partition=partition)
    assert producer.flush(10) == 0


def test_forged_control_records_on_commands_are_rejected_and_change_nothing(api: Api) -> None:
    h = api.as_("acme")
    topics = Topics(api.settings)
    parts = api.settings.partitions
    r = api.http.post("/v1/jobs/victim", json=api.job("* * * * * *"), headers=h)
    assert r.status_code == 201, r.text
    api.wait(lambda: len(_hits(api, "acme/victim@")) >= 2, what="runs of the victim job")
    home = partition_for("acme/victim", parts)
    now = datetime.now(UTC).isoformat()
    forged_letter = {
        "execution_id": "acme/victim@manual:evil", "tenant": "acme", "job_id": "victim",
        "definition_version": 1, "nominal_at": now, "due_at": now, "dispatched_at": now,
        "timeout_ms": 1000, "lease_ttl_ms": 30000,
        "target": {"kind": "http", "url": f"{api.target.url}/evil"},
    }  # fmt: skip
    forgeries: list[tuple[str, int, dict[str, Any]]] = [
        ("acme/victim", home, {
            "type": "JobMoved", "tenant": "acme", "job_id": "victim", "request_id": "evil-1",
            "issued_at": now, "version": 99, "partition": (home + 1) % parts,
        }),
        ("acme", partition_for("acme", parts), {
            "type": "TenantCircuit", "tenant": "acme", "partition": (home + 1) % parts,
            "at": now, "open_until": "8999-01-01T00:00:00Z", "reason": "forged",
        }),
        ("acme/victim", home, {
            "type": "ReplayDeadLetter", "tenant": "acme", "job_id": "victim",
            "request_id": "evil-3", "issued_at": now, "execution_id": "acme/victim@manual:evil",
            "letter": forged_letter,
        }),
    ]  # fmt: skip
    for key, partition, doc in forgeries:
        _produce_json(api, topics.commands, key, doc, partition)

    def refused() -> list[Rejected]:
        got = [
            CODEC.decode_as(m.value(), Rejected)
            for m in read_topic(api.settings.bootstrap_servers, topics.rejected, 100_000, 2)
        ]
        return [x for x in got if x.code == "control_record"]

    rejected = api.wait(lambda: len(got := refused()) >= 3 and got, what="three rejections")
    assert {r.reason.split(" ")[0] for r in rejected} >= {"JobMoved", "TenantCircuit", "a"}
    assert all(topics.scheduler_control in r.reason for r in rejected)
    before = len(_hits(api, "acme/victim@"))
    time.sleep(4)
    assert len(_hits(api, "acme/victim@")) >= before + 2  # the job still runs where it lives
    assert api.target.seen("/evil") == []  # the forged letter ran nothing
    history = api.http.get("/v1/jobs/victim/history", headers=h).json()
    assert not [e for e in history if "moved" in (e.get("reason") or "")]
    assert api.http.delete("/v1/jobs/victim", headers=h).status_code == 204


def _dead_letter(api: Api, h: dict[str, str], job: str, path: str = "/fail") -> str:
    r = api.http.post(f"/v1/jobs/{job}", json=api.job(path=path), headers=h)
    assert r.status_code == 201, r.text
    eid: str = api.http.post(f"/v1/jobs/{job}/trigger", json={}, headers=h).json()["execution_id"]
    api.wait(lambda: _letter(api, h, eid), what="the dead letter")
    return eid


def _letter(api: Api, h: dict[str, str], eid: str) -> dict[str, Any] | None:
    dead = api.http.get("/v1/dead-letters", headers=h).json()
    return next((d for d in dead if d["execution_id"] == eid), None)


@pytest.mark.parametrize("deleted", [False, True], ids=["job", "deleted-job"])
def test_a_dead_letter_replays_once_at_a_time(api: Api, deleted: bool) -> None:
    """Thirty replays in a row: the first is accepted, the other 29 answer 409 naming the
    first's request id, and the target sees one more run; once that replay has ended (the
    target still fails) the letter can be replayed again. The target holds the replayed run
    until all thirty were answered: a run that ended in between would rightly let a second
    replay through."""
    h = api.as_("globex")
    job = f"replayed-{deleted}".lower()
    eid = _dead_letter(api, h, job, "/fail?gated=1")
    if deleted:
        assert api.http.delete(f"/v1/jobs/{job}", headers=h).status_code == 204
    api.target.gate.clear()
    try:
        answers = [api.http.post(f"/v1/dead-letters/{eid}/replay", headers=h) for _ in range(30)]
        assert answers[0].status_code == 202, answers[0].text
        first = answers[0].json()["request_id"]
        assert [a.status_code for a in answers[1:]] == [409] * 29
        assert {a.json()["detail"]["request_id"] for a in answers[1:]} == {first}
        api.wait(lambda: len(_hits(api, eid, "/fail")) >= 2, what="the replayed run")
        late = api.http.post(f"/v1/dead-letters/{eid}/replay", headers=h)
        assert late.status_code == 409, late.text  # while it runs, too
        assert late.json()["detail"]["request_id"] == first
    finally:
        api.target.gate.set()

    def ended() -> bool:
        letter = _letter(api, h, eid)
        return letter is not None and letter["state"] == "dead" and letter["replays"] == 1

    api.wait(ended, what="the replay to end (the target still fails)")
    assert len(_hits(api, eid, "/fail")) == 2  # the 29 others ran nothing
    again = api.http.post(f"/v1/dead-letters/{eid}/replay", headers=h)
    assert again.status_code == 202, again.text
    assert again.json()["request_id"] != first
    api.wait(lambda: len(_hits(api, eid, "/fail")) >= 3, what="the second replay")
