"""A tenant produces its schedules to Kafka (issue 28, item 1): JSON with kcat, to its own
ingress topic. The ingress process takes the tenant from the topic: the job is scheduled and
runs; the same record naming another tenant is rejected with the reason and schedules nothing;
a null value deletes the tenant's own job."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from apps.processes import ChildProcess
from kadence.codec import Codec
from kadence.models import Rejected
from kadence.provisioning import ingress_topics, provision_ingress
from kadence.topics import Topics
from testkit.topic_reader import read_topic
from tests.api.conftest import Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
CODEC = Codec()


@pytest.fixture(scope="module")
def ingress(api: Api, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChildProcess]:
    provision_ingress(api.settings, "acme")
    log = tmp_path_factory.mktemp("ingress") / "ingress.log"
    proc = ChildProcess("apps.ingress", api.settings.model_copy(update={"instance_id": "i"}), log)
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()


def kcat(bootstrap: str, topic: str, lines: list[str], *flags: str) -> None:
    """`kcat -P -K '|'`, one record a line, as the README shows a tenant doing it."""
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
