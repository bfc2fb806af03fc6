"""Issue 41, item 1, live: one tenant's hostile records on its own ingress topics stop nothing.

A definition with `"version": 2^63` used to pass pydantic and fail Avro encoding with an
uncaught OverflowError: the ingress died, and read the same record again on every restart (no
tenant's Kafka way in worked). Here a tenant writes that record and a dozen more a reader must
survive (values no wire holds, a CRLF content type, a control character in a header, bytes that
are not UTF-8, 900 000-character strings, nesting 100 000 deep, NaN, truncated and forged
Avro, a payload a JSON target's envelope cannot hold) to `<ns>.from.acme.schedules` and
`.commands`; then a good job of the same tenant and one of another tenant, each through its
own ingress topic. Both run (their target gets their requests), every hostile record is on
`rejected` with a code and the reason, and the ingress process is still running."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import fastavro
import pytest
from confluent_kafka import Producer

from apps.processes import ChildProcess
from kadence.codec import MAGIC, Codec, _to_avro
from kadence.models import (
    MAX_PAYLOAD_BYTES,
    DeliveryFormat,
    KafkaTarget,
    Rejected,
    ScheduleDefinition,
)
from kadence.provisioning import ingress_topics, provision_ingress
from kadence.topics import Topics
from testkit.topic_reader import read_topic
from tests.api.conftest import Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
CODEC = Codec()
CONTROL = b"\x01" * MAX_PAYLOAD_BYTES
"""512 KiB of control characters: 3 MiB as the JSON string of a json-format target's envelope."""
AVRO_TARGET = KafkaTarget(topic="out", format=DeliveryFormat.avro)
JSON_TARGET = KafkaTarget(topic="out", format=DeliveryFormat.json)


@pytest.fixture(scope="module")
def ingress(api: Api, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChildProcess]:
    for tenant in ("acme", "globex"):
        provision_ingress(api.settings, tenant)
    log = tmp_path_factory.mktemp("ingress") / "ingress.log"
    proc = ChildProcess("apps.ingress", api.settings.model_copy(update={"instance_id": "h"}), log)
    try:
        proc.start()
        api.wait(lambda: "ingress assigned" in proc.output(), 60, "the ingress assigned")
        yield proc
    finally:
        proc.stop()


def definition(api: Api, tenant: str, job_id: str, **changes: Any) -> dict[str, Any]:
    return {"tenant": tenant, "job_id": job_id, "version": 1, **api.job(), **changes}


def _forged(good: dict[str, Any], **changes: Any) -> bytes:
    """Avro a producer without Kadence's models can write: values the schema holds and the
    model refuses."""
    record = ScheduleDefinition.model_validate(good).model_copy(update=changes)
    parsed, fp = CODEC.schemas.current[ScheduleDefinition.avro_fullname()]
    buf = io.BytesIO()
    buf.write(MAGIC + fp)
    fastavro.schemaless_writer(buf, parsed, _to_avro(record))
    return buf.getvalue()


def hostile_definitions(api: Api) -> dict[str, bytes]:
    """Name -> value, each for the key `acme/<name>`."""

    def doc(name: str, **changes: Any) -> dict[str, Any]:
        return definition(api, "acme", name, **changes)

    def text(name: str, **changes: Any) -> bytes:
        return json.dumps(doc(name, **changes)).encode()

    good_avro = CODEC.encode(ScheduleDefinition.model_validate(doc("truncated")))
    header = {"kind": "http", "url": api.target.url + "/ok", "headers": {"X-A": "a\x01b"}}
    retry = '"retry": {"max_attempts": 1, "multiplier": NaN}'
    return {
        "version-2-63": text("version-2-63", version=2**63),
        "version-minus": text("version-minus", version=-(2**63) - 1),
        "crlf-content-type": text("crlf-content-type", content_type="text/plain\r\nX-Evil: 1"),
        "control-header": text("control-header", target=header),
        "lone-surrogate": text("lone-surrogate", description="\ud800"),
        "not-utf8": text("not-utf8", description="PLACE").replace(b"PLACE", b"\xff\xfe\xc3("),
        "huge-string": text("huge-string", description="x" * 900_000),
        "deep-nesting": text("deep-nesting", payload="DEEP").replace(
            b'"DEEP"', b"[" * 100_000 + b"]" * 100_000
        ),
        "nan": text("nan").replace(b'"retry": {"max_attempts": 1}', retry.encode()),
        "year-9999": text(
            "year-9999", schedule={"kind": "once", "run_at": "9999-12-31T23:59:59.9999Z"}
        ),
        "unknown-field": text("unknown-field", colour="red"),
        "truncated-avro": good_avro[: len(good_avro) // 2],
        "forged-avro": _forged(doc("forged-avro"), version=2**63 - 1, timeout_ms=-5),
        "json-envelope-3-mib": _forged(
            doc("json-envelope-3-mib", target=AVRO_TARGET), target=JSON_TARGET, payload=CONTROL
        ),
    }


def hostile_commands() -> dict[str, bytes]:
    common = {"tenant": "acme", "request_id": "r-1", "issued_at": "2026-12-01T09:00:00Z"}
    return {
        "year-1-east": json.dumps(
            {
                **common,
                "type": "TriggerNow",
                "job_id": "year-1-east",
                "issued_at": "0001-01-01T00:00:00+01:00",
            }
        ).encode(),
        "backfill-2-64": json.dumps(
            {
                **common,
                "type": "Backfill",
                "job_id": "backfill-2-64",
                "start": "2026-11-01T00:00:00Z",
                "end": "2026-12-01T00:00:00Z",
                "max_occurrences": 2**64,
            }
        ).encode(),
        "garbage": b"\x00\xff garbage",
    }


def test_hostile_records_stop_no_tenant_and_each_is_rejected_with_its_reason(
    api: Api, ingress: ChildProcess
) -> None:
    schedules_in, commands_in = ingress_topics(api.settings, "acme")
    producer = Producer({"bootstrap.servers": api.settings.bootstrap_servers})
    definitions, commands = hostile_definitions(api), hostile_commands()
    for name, value in definitions.items():
        producer.produce(schedules_in, value, f"acme/{name}".encode())
    for name, value in commands.items():
        producer.produce(commands_in, value, f"acme/{name}".encode())
    assert producer.flush(30) == 0
    run_at = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
    once = {"kind": "once", "run_at": run_at}
    for tenant in ("acme", "globex"):
        good = definition(api, tenant, "after-hostile", schedule=once)
        producer.produce(
            ingress_topics(api.settings, tenant)[0],
            json.dumps(good).encode(),
            f"{tenant}/after-hostile".encode(),
        )
    assert producer.flush(30) == 0

    def ran() -> set[str]:
        keys = {h.headers["idempotency-key"].split("@")[0] for h in api.target.seen()}
        return keys & {"acme/after-hostile", "globex/after-hostile"}

    api.wait(lambda: len(ran()) == 2, 90, "the good job of each tenant run")
    topics = Topics(api.settings)
    expected = {*(f"acme/{n}" for n in definitions), *(f"acme/{n}" for n in commands)}

    def refused() -> dict[str, Rejected]:
        found = {}
        for m in read_topic(api.settings.bootstrap_servers, topics.rejected, 100_000, 2):
            key = (m.key() or b"").decode(errors="replace")
            if key in expected:
                found[key] = CODEC.decode_as(m.value(), Rejected)
        return found if len(found) == len(expected) else {}

    got = api.wait(refused, 60, "a rejected record for each hostile record")
    for key, refusal in got.items():
        assert refusal.processor == "ingress", key
        assert refusal.source_topic in (schedules_in, commands_in), key
        assert refusal.code and refusal.reason, key
    why = {k.removeprefix("acme/"): (r.code, r.reason) for k, r in got.items()}
    assert why["version-2-63"][0] == "invalid_record" and "version" in why["version-2-63"][1]
    assert "content_type" in why["crlf-content-type"][1]
    assert "X-A" in why["control-header"][1] and "control character" in why["control-header"][1]
    assert "description" in why["lone-surrogate"][1] and "unicode" in why["lone-surrogate"][1]
    assert why["deep-nesting"][0] == "garbage_bytes"
    assert why["truncated-avro"][0] == "truncated_record"
    assert "version" in why["forged-avro"][1] and "timeout_ms" in why["forged-avro"][1]
    assert "issued_at" in why["year-1-east"][1]
    assert "max_occurrences" in why["backfill-2-64"][1]
    code, reason = why["json-envelope-3-mib"]
    assert code == "invalid_record" and "payload" in reason and "3145730 bytes" in reason
    # the same payload to an Avro target is a job like any other
    avro = _forged(definition(api, "acme", "avro-control", target=AVRO_TARGET), payload=CONTROL)
    producer.produce(schedules_in, avro, b"acme/avro-control")
    assert producer.flush(30) == 0
    job = "/v1/jobs/avro-control"
    api.wait(lambda: api.http.get(job, headers=api.as_("acme")).status_code == 200, 60, job)
    assert ingress.running, ingress.output()[-2000:]
    assert "Traceback" not in ingress.output()
