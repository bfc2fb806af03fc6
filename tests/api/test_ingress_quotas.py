"""Issue 41, item 5, live: the ingress under the API's quotas, and deletes that do not multiply
into one record per partition without need. A tenant producing to its own ingress topics gets
`quota_exceeded` past its triggers and jobs quotas while another tenant's records pass; an
update is never a create; a delete through the ingress (or the API) is one tombstone where
the job has only ever lived, and a tombstone on every partition for a job whose concurrency
key moved it, which is deleted all the same."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from apps.api.view_client import ViewClient
from apps.processes import ChildProcess
from kadence.codec import Codec
from kadence.models import Rejected
from kadence.partitioning import partition_for
from kadence.provisioning import ingress_topics, provision_ingress
from kadence.topics import Topics
from testkit.topic_reader import read_topic
from tests.api.conftest import VIEW_TOKEN, Api
from tests.api.test_ingress import _assigned

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
CODEC = Codec()
NOW = "2026-12-01T09:00:00Z"
TENANTS = ("tq", "tr", "jq", "dl", "acme")


@pytest.fixture(scope="module")
def ingress(api: Api, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChildProcess]:
    """An ingress whose settings give tenant `tq` 2 triggers a minute and `jq` 2 jobs."""
    for tenant in TENANTS:
        provision_ingress(api.settings, tenant)
    settings = api.settings.model_copy(
        update={
            "instance_id": "iq",
            "api_quota_triggers_per_minute_by_tenant": {"tq": 2},
            "api_quota_jobs_by_tenant": {"jq": 2},
        }
    )
    log = tmp_path_factory.mktemp("ingress") / "ingress.log"
    proc = ChildProcess("apps.ingress", settings, log)
    try:
        proc.start()
        _assigned(proc)
        yield proc
    finally:
        proc.stop()


def produce(api: Api, tenant: str, kind: str, records: list[tuple[str, Any]]) -> None:
    """(key, JSON document or None for a delete) records to the tenant's ingress topic."""
    schedules_in, commands_in = ingress_topics(api.settings, tenant)
    producer = Producer({"bootstrap.servers": api.settings.bootstrap_servers})
    for key, doc in records:
        value = None if doc is None else json.dumps(doc).encode()
        producer.produce(schedules_in if kind == "schedules" else commands_in, value, key.encode())
    assert producer.flush(10) == 0


def definition(api: Api, tenant: str, job_id: str, version: int = 1, **kw: Any) -> dict[str, Any]:
    return {"tenant": tenant, "job_id": job_id, "version": version, **api.job(), **kw}


def trigger(tenant: str, i: int) -> dict[str, Any]:
    return {"type": "TriggerNow", "tenant": tenant, "job_id": "j", "request_id": f"r{i}",
            "issued_at": NOW}  # fmt: skip


def view(api: Api) -> ViewClient:
    return ViewClient(api.settings.view_url, VIEW_TOKEN)


def rejected(api: Api, tenant: str, kind: str) -> list[Rejected]:
    topic = ingress_topics(api.settings, tenant)[0 if kind == "schedules" else 1]
    got = read_topic(api.settings.bootstrap_servers, Topics(api.settings).rejected, 100_000, 2)
    out = [CODEC.decode_as(m.value(), Rejected) for m in got]
    return [r for r in out if r.source_topic == topic]


def records(api: Api, topic: str, key: str) -> list[bytes | None]:
    """The values of `key`'s records on `topic` (None: a tombstone)."""
    got = read_topic(api.settings.bootstrap_servers, topic, 100_000, 2)
    return [m.value() for m in got if m.key() == key.encode()]


def deleted(api: Api, tenant: str, job_id: str) -> bool:
    """The view no longer shows the job, and its scheduler recorded the delete."""
    if view(api).maybe(f"/jobs/{tenant}/{job_id}") is not None:
        return False
    history = view(api).get(f"/jobs/{tenant}/{job_id}/history")
    return any(e["decision"] == "deleted" and "job deleted" in e["reason"] for e in history)


def test_triggers_past_the_quota_are_rejected_while_another_tenant_s_pass(
    api: Api, ingress: ChildProcess
) -> None:
    produce(api, "tq", "commands", [("tq/j", trigger("tq", i)) for i in range(5)])
    produce(api, "tr", "commands", [("tr/j", trigger("tr", i)) for i in range(5)])
    refused = api.wait(
        lambda: len(got := rejected(api, "tq", "commands")) >= 3 and got,
        what="tq's triggers past its quota rejected",
    )
    assert len(refused) == 3
    assert all(r.code == "quota_exceeded" for r in refused)
    assert "triggers_per_minute" in refused[0].reason and "2 triggers" in refused[0].reason
    commands = Topics(api.settings).commands
    assert len(records(api, commands, "tq/j")) == 2
    assert len(records(api, commands, "tr/j")) == 5  # the other tenant's all pass
    assert not rejected(api, "tr", "commands")


def test_a_tenant_at_its_jobs_quota_cannot_create_one_more_but_can_update(
    api: Api, ingress: ChildProcess
) -> None:
    produce(api, "jq", "schedules", [(f"jq/{j}", definition(api, "jq", j)) for j in "ab"])
    api.wait(lambda: all(view(api).maybe(f"/jobs/jq/{j}") for j in "ab"), what="jq's 2 jobs")
    produce(
        api,
        "jq",
        "schedules",
        [("jq/c", definition(api, "jq", "c")), ("jq/a", definition(api, "jq", "a", 2))],
    )
    api.wait(lambda: (view(api).maybe("/jobs/jq/a") or {}).get("version") == 2, what="a's update")
    [why] = api.wait(lambda: rejected(api, "jq", "schedules"), what="c's create refused")
    assert why.code == "quota_exceeded" and "jobs_per_tenant" in why.reason
    assert "2 jobs" in why.reason and "delete one" in why.reason
    assert view(api).maybe("/jobs/jq/c") is None


def test_a_delete_through_the_ingress_is_one_tombstone_and_the_job_is_gone(
    api: Api, ingress: ChildProcess
) -> None:
    produce(api, "dl", "schedules", [("dl/one", definition(api, "dl", "one"))])
    job = api.wait(lambda: view(api).maybe("/jobs/dl/one"), what="dl/one in the view")
    assert job["home"] == partition_for("dl/one", api.settings.partitions)
    produce(api, "dl", "schedules", [("dl/one", None)])
    api.wait(lambda: deleted(api, "dl", "one"), what="dl/one deleted")
    assert records(api, Topics(api.settings).schedules, "dl/one").count(None) == 1


def _moving_keys(partitions: int) -> tuple[str, str]:
    first = partition_for("dl/~k0", partitions)
    return "k0", next(
        f"k{i}" for i in range(1, 99) if partition_for(f"dl/~k{i}", partitions) != first
    )


def test_a_delete_of_a_job_whose_concurrency_key_moved_it_is_still_applied(
    api: Api, ingress: ChildProcess
) -> None:
    a, b = _moving_keys(api.settings.partitions)
    produce(
        api, "dl", "schedules", [("dl/moved", definition(api, "dl", "moved", concurrency_key=a))]
    )
    api.wait(lambda: view(api).maybe("/jobs/dl/moved"), what="dl/moved in the view")
    produce(
        api, "dl", "schedules", [("dl/moved", definition(api, "dl", "moved", 2, concurrency_key=b))]
    )
    job = api.wait(
        lambda: (j := view(api).maybe("/jobs/dl/moved")) and j["version"] == 2 and j,
        what="the move in the view",
    )
    assert job["home"] is None  # it has been on two partitions
    produce(api, "dl", "schedules", [("dl/moved", None)])
    api.wait(lambda: deleted(api, "dl", "moved"), what="dl/moved deleted")
    tombstones = records(api, Topics(api.settings).schedules, "dl/moved").count(None)
    assert tombstones == api.settings.partitions


def test_the_api_deletes_with_one_tombstone_unless_the_job_moved(api: Api) -> None:
    h = api.as_("acme")
    schedules = Topics(api.settings).schedules
    assert api.http.post("/v1/jobs/stays", json=api.job(), headers=h).status_code == 201
    assert api.http.delete("/v1/jobs/stays", headers=h).status_code == 204
    api.wait(lambda: deleted(api, "acme", "stays"), what="acme/stays deleted")
    assert records(api, schedules, "acme/stays").count(None) == 1
    first = partition_for("acme/~k0", api.settings.partitions)
    b = next(
        f"k{i}"
        for i in range(1, 99)
        if partition_for(f"acme/~k{i}", api.settings.partitions) != first
    )
    r = api.http.post("/v1/jobs/moves", json=api.job(concurrency_key="k0"), headers=h)
    assert r.status_code == 201, r.text
    r = api.http.put("/v1/jobs/moves", json=api.job(concurrency_key=b), headers=h)
    assert r.status_code == 200, r.text
    assert api.http.delete("/v1/jobs/moves", headers=h).status_code == 204
    api.wait(lambda: deleted(api, "acme", "moves"), what="acme/moves deleted")
    assert records(api, schedules, "acme/moves").count(None) == api.settings.partitions
