"""A tenant produces its schedules to Kafka (issue 28, item 1): JSON with kcat, to its own
ingress topic. The ingress process takes the tenant from the topic: the job is scheduled and
runs; the same record naming another tenant is rejected with the reason and schedules nothing;
a null value deletes the tenant's own job."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from apps.processes import ChildProcess
from kadence.codec import Codec
from kadence.models import Rejected
from kadence.provisioning import ingress_topics, provision_ingress
from kadence.target_topics import events_topic
from kadence.topics import Topics
from testkit.topic_reader import read_topic
from tests.api.conftest import Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
CODEC = Codec()


def _assigned(proc: ChildProcess, times: int = 1) -> None:
    """Wait until the ingress has its partitions (the event sources start at their end)."""
    deadline = time.monotonic() + 60
    while proc.output().count("ingress assigned") < times:
        assert proc.running and time.monotonic() < deadline, proc.output()[-2000:]
        time.sleep(0.2)


@pytest.fixture(scope="module")
def ingress(api: Api, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChildProcess]:
    provision_ingress(api.settings, "acme")
    log = tmp_path_factory.mktemp("ingress") / "ingress.log"
    proc = ChildProcess("apps.ingress", api.settings.model_copy(update={"instance_id": "i"}), log)
    try:
        proc.start()
        _assigned(proc)
        yield proc
    finally:
        proc.stop()


def kcat(bootstrap: str, topic: str, lines: list[str], *flags: str) -> None:
    """`kcat -P -K '|'`, one record a line, as docs/kafka.md shows a tenant doing it."""
    if shutil.which("kcat") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kcat is not installed (.ci/run installs it)")
        pytest.skip("kcat is not installed")
    cmd = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", "|", *flags]
    subprocess.run(cmd, input="\n".join(lines).encode() + b"\n", check=True, timeout=60)


def job(api: Api, tenant: str, job_id: str) -> dict[str, Any]:
    return {"tenant": tenant, "job_id": job_id, "version": 1, **api.job("* * * * * *")}


def test_a_tenant_schedules_with_kcat_and_cannot_write_for_another(
    api: Api, ingress: ChildProcess
) -> None:
    bootstrap = api.settings.bootstrap_servers
    schedules_in, _commands_in = ingress_topics(api.settings, "acme")
    mine = json.dumps(job(api, "acme", "from-kafka"))
    forged = json.dumps(job(api, "globex", "planted"))
    kcat(bootstrap, schedules_in, [f"acme/from-kafka|{mine}", f"globex/planted|{forged}"])
    api.wait(
        lambda: any(
            x.headers["idempotency-key"].startswith("acme/from-kafka@") for x in api.target.seen()
        ),
        timeout_s=60,
        what="a run of the job acme produced to Kafka",
    )
    r = api.http.get("/v1/jobs/from-kafka", headers=api.as_("acme"))
    assert r.status_code == 200, r.text
    topics = Topics(api.settings)

    def refusal() -> Rejected | None:
        for m in read_topic(bootstrap, topics.rejected, 100_000, 2):
            got = CODEC.decode_as(m.value(), Rejected)
            if got.code == "foreign_tenant" and got.source_topic == schedules_in:
                return got
        return None

    why = api.wait(refusal, what="the foreign record rejected")
    assert "'globex'" in why.reason and "'acme'" in why.reason
    assert api.http.get("/v1/jobs/planted", headers=api.as_("globex")).status_code == 404
    assert not [x for x in api.target.seen() if "globex/planted@" in x.headers["idempotency-key"]]
    kcat(bootstrap, schedules_in, ["acme/from-kafka|"], "-Z")  # -Z: an empty value is a delete
    api.wait(
        lambda: api.http.get("/v1/jobs/from-kafka", headers=api.as_("acme")).status_code == 404,
        what="the job deleted through the ingress",
    )
    assert ingress.running
    told = api.wait(lambda: _events(api, "acme", "rejected"), what="acme told of the refusal")
    assert told[0]["code"] == "foreign_tenant" and told[0]["source_topic"] == schedules_in
    assert not _events(api, "globex", "rejected", wait_s=1)  # globex is told nothing of it


def test_a_tenant_is_told_of_its_dead_letters_on_its_events_topic(
    api: Api, ingress: ChildProcess
) -> None:
    h = api.as_("acme")
    r = api.http.post("/v1/jobs/doomed-events", json=api.job(path="/fail"), headers=h)
    assert r.status_code == 201, r.text
    eid = api.http.post("/v1/jobs/doomed-events/trigger", json={}, headers=h).json()
    dead = api.wait(
        lambda: [e for e in _events(api, "acme", "dead_letter") if e["job_id"] == "doomed-events"],
        what="acme told of its dead letter",
    )
    assert dead[0]["execution_id"] == eid["execution_id"]
    assert "503" in str(dead[0]["error"])


def _events(api: Api, tenant: str, kind: str, wait_s: float = 2) -> list[dict[str, Any]]:
    """The tenant's events of `kind`, read with kcat's eyes: JSON values on its events topic."""
    topic = events_topic(api.settings.namespace, tenant)
    try:
        got = read_topic(api.settings.bootstrap_servers, topic, 100_000, wait_s)
    except KeyError:  # not made yet: nothing told
        return []
    docs = [json.loads(m.value() or b"null") for m in got]
    return [d for d in docs if d["type"] == kind and d["tenant"] == tenant]


def test_an_ingress_killed_mid_stream_loses_and_doubles_nothing(
    api: Api, ingress: ChildProcess, tmp_path: Path
) -> None:
    """kill -9 of one of two ingress processes while a tenant writes 2 000 definitions: the
    other takes its partitions over, and `schedules` holds each definition exactly once
    (the killed one's open transaction is aborted, its input read again from the offsets it
    committed with its output)."""
    settings = api.settings.model_copy(update={"instance_id": "doomed", "session_timeout_ms": 6000})
    doomed = ChildProcess("apps.ingress", settings, tmp_path / "doomed.log")
    try:
        doomed.start()
        _assigned(doomed)
        _assigned(ingress, 2)  # the group has rebalanced over both
        schedules_in, _ = ingress_topics(api.settings, "acme")
        producer = Producer({"bootstrap.servers": api.settings.bootstrap_servers})
        for i in range(2_000):
            doc = {"tenant": "acme", "job_id": f"k-{i}", "version": 1,
                   **api.job("0 0 1 1 *")}  # fmt: skip
            producer.produce(schedules_in, json.dumps(doc).encode(), f"acme/k-{i}".encode())
            if i == 600:
                producer.flush(10)
                doomed.signal(signal.SIGKILL)  # mid-stream: it was routing what came before
        assert producer.flush(10) == 0
    finally:
        doomed.stop()
    topic = Topics(api.settings).schedules

    def routed() -> list[bytes]:
        got = read_topic(api.settings.bootstrap_servers, topic, 100_000, 3)
        return [m.key() or b"" for m in got if (m.key() or b"").startswith(b"acme/k-")]

    keys = api.wait(lambda: len(got := routed()) >= 2_000 and got, 90, "every definition routed")
    time.sleep(2)
    keys = routed()
    assert len(keys) == 2_000, f"{len(keys) - len(set(keys))} doubled"
    assert set(keys) == {f"acme/k-{i}".encode() for i in range(2_000)}
