"""The delivery formats on a real broker, read with the kcat recipes docs/execution.md gives
(issue 18, item 6): the recipes are taken from the docs and run as written."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from connectors.kafka_topic import KafkaTopicCaller
from kadence.codec import Codec
from kadence.examples import examples
from kadence.models import DeliveryFormat, ExecutionRequested, KafkaTarget
from kadence.targets import Stop
from tests.conftest import provisioned

pytestmark = [pytest.mark.kafka]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "execution.md"


def recipes() -> list[str]:
    """The kcat command lines of the docs' recipe block."""
    text = DOCS.read_text()
    block = re.search(r"<!-- kcat-recipes -->(.*?)<!-- /kcat-recipes -->", text, re.S)
    assert block is not None, "docs/execution.md lost its kcat recipes"
    return [line for line in block.group(1).splitlines() if line.startswith("kcat ")]


def kcat(recipe: str, bootstrap: str, topic: str) -> str:
    if shutil.which("kcat") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kcat is not installed (.ci/run installs it)")
        pytest.skip("kcat is not installed")
    env = {**os.environ, "B": bootstrap, "T": topic}
    out = subprocess.run(["sh", "-c", recipe], env=env, capture_output=True, timeout=60, check=True)
    return out.stdout.decode(errors="replace")


def send(caller: KafkaTopicCaller, fmt: DeliveryFormat, payload: bytes) -> ExecutionRequested:
    ex = examples()["ExecutionRequested"]
    assert isinstance(ex, ExecutionRequested)
    ex = ex.model_copy(
        update={"target": KafkaTarget(topic=f"orders-{fmt.value}", format=fmt), "payload": payload}
    )
    result = caller(ex, Stop(), time.monotonic() + 30)
    assert result.status.value == "succeeded", result
    return ex


def test_each_format_reads_as_the_docs_say_with_kcat(kafka_bootstrap: str) -> None:
    settings = provisioned(kafka_bootstrap)
    caller = KafkaTopicCaller(kafka_bootstrap, settings.namespace, 1, Codec())
    try:
        as_json = send(caller, DeliveryFormat.json, b'{"order": 42}')
        as_payload = send(caller, DeliveryFormat.payload, b"ship order 42")
    finally:
        caller.close()
    with_headers, message_only, ids_only = recipes()
    line = kcat(with_headers, kafka_bootstrap, caller.topic_for(as_json)).strip()
    doc = json.loads(line[line.index(" {") + 1 :])
    assert (doc["execution_id"], doc["payload"]) == (as_json.execution_id, '{"order": 42}')
    assert "content-type=application/json" in line
    out = kcat(message_only, kafka_bootstrap, caller.topic_for(as_payload))
    assert out.splitlines() == ["ship order 42"]
    headers = kcat(ids_only, kafka_bootstrap, caller.topic_for(as_payload))
    assert f"kadence-execution-id={as_payload.execution_id}" in headers
