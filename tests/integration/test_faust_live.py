"""A real faust-streaming agent as a tenant's consumer (issue 18, item 5): it reads the
tenant's execution topic on the real broker (Kafka 4.x) through `connectors.consumer.executions`,
runs each execution once (a redelivered duplicate is dropped) and never another tenant's."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from apps.processes import settings_env
from connectors.kafka_topic import KafkaTopicCaller
from kadence.codec import Codec
from kadence.examples import examples
from kadence.models import ExecutionRequested, KafkaTarget
from kadence.targets import Stop
from tests.conftest import provisioned

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
CODEC = Codec()


def test_a_faust_agent_runs_each_of_the_tenant_s_executions_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = provisioned(kafka_bootstrap)
    caller = KafkaTopicCaller(kafka_bootstrap, settings.namespace, 1, Codec())
    base = examples()["ExecutionRequested"]
    assert isinstance(base, ExecutionRequested)
    ids = []
    try:
        for i in range(3):
            ex = base.model_copy(
                update={
                    "execution_id": f"acme/nightly-report@2026-12-01T09:0{i}:00.000Z",
                    "target": KafkaTarget(topic="orders"),
                }
            )
            ids.append(ex.execution_id)
            assert caller(ex, Stop(), time.monotonic() + 30).status.value == "succeeded"
        again = base.model_copy(
            update={"execution_id": ids[0], "delivery": 2, "target": KafkaTarget(topic="orders")}
        )
        assert caller(again, Stop(), time.monotonic() + 30).status.value == "succeeded"
        topic = caller.topic_for(again)
    finally:
        caller.close()
    foreign = base.model_copy(
        update={"tenant": "globex", "execution_id": "globex/x@2026-12-01T09:00:00.000Z"}
    )
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, CODEC.encode(foreign), b"globex/x")  # not Kadence's writing
    assert producer.flush(10) == 0
    seen = tmp_path / "seen"
    env = settings_env(settings)
    env.update(
        KADENCE_FAUST_BOOTSTRAP=kafka_bootstrap,
        KADENCE_FAUST_TOPIC=topic,
        KADENCE_FAUST_TENANT="acme",
        KADENCE_FAUST_OUT=str(seen),
    )
    log = (tmp_path / "faust.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "testkit.faust_app", "worker", "-l", "warn"],
        env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if seen.exists() and len(seen.read_text().split()) >= len(ids):
                break
            time.sleep(0.5)
        time.sleep(2)  # a duplicate or a foreign record would arrive right after
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
    output = (tmp_path / "faust.log").read_text()[-3000:]
    assert seen.exists(), f"the faust agent ran nothing:\n{output}"
    assert seen.read_text().split() == ids, output
