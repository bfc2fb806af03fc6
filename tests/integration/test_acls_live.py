"""The ACLs of kadence/acls.py on a broker that enforces them (issue 28, item 3): a broker of
its own runs KRaft's StandardAuthorizer with nothing allowed that no ACL allows, and a SCRAM
user per component and per tenant. The administrator applies exactly the generated bindings;
then every component runs as its own user (the scheduler, the reaper and a worker as processes,
the query view as a process, the API in this one) and a job made through the API with a Kafka
target reaches its tenant's consumer, itself authenticated as that tenant. And a tenant is held
to its own: it writes its ingress topics and nothing else, reads its target topics and not
another tenant's nor Kadence's, and cannot join Kadence's consumer groups.

Issue 41, item 6: the ingress makes and writes its tenants' events topics and no other of
theirs (it held Create and Write on every `<ns>.to.*` topic); `kadence acls --apply` grants
nothing for the wildcard tenant `*` (it granted `User:*`, every client), a reserved tenant id
(`kadence-api` is the API's principal) or an override giving a tenant a component's principal;
and an ingress topic made for a reserved tenant brings nothing in."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.cimpl import NewTopic
from fastapi.testclient import TestClient
from pydantic import SecretStr

from apps.api.app import create_app
from apps.api.auth import token_hash
from apps.cli import main
from apps.processes import ChildProcess
from infra.kafka import kafkactl
from infra.kafka.config import Authorizer, BrokerConfig, SecureListener
from kadence.acl_kafka import apply
from kadence.acls import Role, bindings
from kadence.codec import Codec
from kadence.models import KafkaTarget, Rejected, ScheduleDefinition
from kadence.provisioning import provision, provision_ingress
from kadence.sealing import new_key
from kadence.settings import KadenceSettings
from kadence.target_topics import events_topic, ingress_prefix, ingress_topic, target_topic
from kadence.topics import Topics
from testkit.ports import free_ports
from testkit.scheduler_process import SchedulerProcess
from testkit.stack import ReaperProcess, WorkerProcess, execution_settings

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
ADMIN = "admin"
TENANTS = ("acme", "globex")
USERS = (ADMIN, *(f"kadence-{r}" for r in Role), *TENANTS)
TOKEN = "tok-acme-acls"
VIEW_TOKEN = "view-token-acls"
CODEC = Codec()
SECRETS_KEY = new_key()
RESERVED = "kadence-scheduler"
"""A tenant id that is a component's principal: refused wherever a tenant comes in."""


def password(user: str) -> str:
    return f"{user}-secret-4711"


@pytest.fixture(scope="module")
def broker(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerConfig]:
    """A broker of its own that enforces ACLs, with a SASL_PLAINTEXT listener for everyone
    but itself; stopped also when its start fails."""
    tmp = tmp_path_factory.mktemp("acls")
    base = BrokerConfig.from_env()
    cfg = BrokerConfig(
        home=tmp / "broker",
        port=free_ports(5),
        cache_dir=base.cache_dir,
        kafka_home=base.kafka_home,
        kafka_version=base.kafka_version,
        secure=SecureListener(None, tuple((u, password(u)) for u in USERS)),
        authorizer=Authorizer((ADMIN,)),
    )
    try:
        kafkactl.start(cfg, quiet=True)
        yield cfg
    finally:
        kafkactl.stop(cfg, quiet=True)


@dataclass(frozen=True)
class Namespace:
    cfg: BrokerConfig
    name: str
    tmp: Path

    def as_user(self, user: str, **kw: Any) -> KadenceSettings:
        fields: dict[str, Any] = {
            "bootstrap_servers": f"127.0.0.1:{self.cfg.secure_port}",
            "namespace": self.name,
            "partitions": 2,
            "execution_partitions": 2,
            "kafka_security_protocol": "SASL_PLAINTEXT",
            "kafka_sasl_mechanism": "SCRAM-SHA-256",
            "kafka_sasl_username": user,
            "kafka_sasl_password": SecretStr(password(user)),
            "state_dir": self.tmp / "state",
            "view_token": SecretStr(VIEW_TOKEN),
            "secrets_keys": {"k1": SECRETS_KEY},  # the API and the workers read connections
            **kw,
        }
        return execution_settings(KadenceSettings.model_validate(fields))

    def kafka(self, user: str) -> dict[str, Any]:
        return self.as_user(user).kafka_common()


@pytest.fixture(scope="module")
def ns(broker: BrokerConfig, tmp_path_factory: pytest.TempPathFactory) -> Namespace:
    """The generated ACLs applied by the administrator; Kadence's topics and the tenants'
    ingress topics made by the provisioning user alone; globex's target topic made by the
    administrator (so reading it is refused for want of a right, not for want of a topic)."""
    space = Namespace(broker, f"acl-{uuid.uuid4().hex[:8]}", tmp_path_factory.mktemp("ns"))
    admin = AdminClient(space.kafka(ADMIN))
    assert apply(admin, bindings(space.name, TENANTS)) > 100
    provisioning = space.as_user("kadence-provisioning")
    assert provision(provisioning)
    for tenant in TENANTS:
        assert len(provision_ingress(provisioning, tenant)) == 2
    made = [
        NewTopic(target_topic(space.name, "globex", "out"), 1, 1),
        NewTopic(f"{ingress_prefix(space.name)}{RESERVED}.schedules", 1, 1),  # by mistake
    ]
    for future in admin.create_topics(made).values():
        future.result(30)
    return space


def test_every_component_runs_with_exactly_its_rights(ns: Namespace) -> None:
    started: list[ChildProcess] = []
    try:
        processors: list[ChildProcess] = [
            SchedulerProcess(ns.as_user("kadence-scheduler"), "s", ns.tmp / "sched"),
            ReaperProcess(ns.as_user("kadence-reaper"), ns.tmp / "reaper"),
            WorkerProcess(ns.as_user("kadence-worker"), "w0", ns.tmp),
        ]
        for processor in processors:
            started.append(processor)
            processor.start()
        view = ChildProcess(
            "apps.views",
            ns.as_user("kadence-view", instance_id="v", view_port=0),
            log=ns.tmp / "views.log",
        )
        started.append(view)
        port = view.start().listening("view", timeout=60)
        ingress = ChildProcess(  # it asks the view for its tenants' job counts (the quota)
            "apps.ingress",
            ns.as_user("kadence-ingress", instance_id="i", view_url=f"http://127.0.0.1:{port}"),
            log=ns.tmp / "ingress.log",
        )
        started.append(ingress)
        ingress.start().ready_when("ingress reading", timeout=60)
        api = ns.as_user(
            "kadence-api",
            view_port=port,
            view_url=f"http://127.0.0.1:{port}",
            api_tokens={token_hash(TOKEN): "acme"},
        )
        run_at = datetime.now(UTC) + timedelta(seconds=3)
        with TestClient(create_app(api)) as http:
            made = http.post(
                "/v1/jobs/acls",
                json={
                    "schedule": {"kind": "once", "run_at": run_at.isoformat()},
                    "target": {"kind": "kafka", "topic": "out"},
                    "payload": "through every principal",
                },
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert made.status_code == 201, made.text  # api wrote, scheduler and view read
            sealed = http.put(  # the API writes the connections topic and reads it back
                "/v1/connections/acl-conn",
                json={"kind": "bearer", "token": "acl-bearer"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert sealed.status_code == 201, sealed.text
            listed = http.get("/v1/connections", headers={"Authorization": f"Bearer {TOKEN}"})
            assert [c["name"] for c in listed.json()] == ["acl-conn"]
        job = ScheduleDefinition(
            tenant="acme", job_id="by-kafka", version=1, target=KafkaTarget(topic="out"),
            schedule={"kind": "once", "run_at": run_at.isoformat()}, payload=b"through ingress",
        )  # fmt: skip
        producer = Producer(ns.kafka("acme"))  # acme's own pipeline, on its ingress topic
        producer.produce(
            ingress_topic(ns.name, "acme", "schedules"), CODEC.encode(job), key=job.key.encode()
        )
        producer.produce(ingress_topic(ns.name, "acme", "schedules"), b"not a definition")
        assert producer.flush(20) == 0
        sneaked = job.model_copy(update={"tenant": RESERVED, "payload": b"as a component"})
        admin = Producer(ns.kafka(ADMIN))
        reserved_topic = f"{ingress_prefix(ns.name)}{RESERVED}.schedules"
        admin.produce(reserved_topic, CODEC.encode(sneaked), key=sneaked.key.encode())
        assert admin.flush(20) == 0
        payloads = _payloads(ns, {b"through every principal", b"through ingress"})
        assert payloads == {b"through every principal", b"through ingress"}
        told = _first_json(ns, events_topic(ns.name, "acme"), "acme")  # as acme, made by ingress
        assert (told["type"], told["code"]) == ("rejected", "garbage_bytes"), told
        refusal = _rejected_from(ns, reserved_topic)
        assert refusal.code == "not_ingress", refusal
        for proc in started:
            assert "AUTHORIZATION_FAILED" not in proc.output(), proc.module
    finally:
        for proc in reversed(started):
            proc.stop()


def test_the_ingress_makes_and_writes_only_its_tenants_events_topics(ns: Namespace) -> None:
    ingress = ns.kafka("kadence-ingress")
    refused = KafkaError.TOPIC_AUTHORIZATION_FAILED
    wanted = {
        events_topic(ns.name, "globex"): None,
        target_topic(ns.name, "globex", "kadence-events-x"): refused,  # a prefix would cover it
        target_topic(ns.name, "acme", "made-by-ingress"): refused,
        events_topic(ns.name, "initech"): refused,  # a tenant not given to `kadence acls`
    }
    admin = AdminClient(ingress)  # kept: a client gone fails its futures (_DESTROY)
    futures = admin.create_topics([NewTopic(t, 1, 1) for t in wanted])
    assert {t: _error_code(f) for t, f in futures.items()} == wanted
    written = _produce(
        ingress, [events_topic(ns.name, "globex"), target_topic(ns.name, "globex", "out")]
    )
    assert written == {
        events_topic(ns.name, "globex"): None,
        target_topic(ns.name, "globex", "out"): refused,
    }


def test_kadence_acls_grants_nothing_for_a_wildcard_or_colliding_tenant(
    ns: Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "BOOTSTRAP_SERVERS": f"127.0.0.1:{ns.cfg.secure_port}",
        "NAMESPACE": ns.name,
        "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
        "KAFKA_SASL_USERNAME": ADMIN,
        "KAFKA_SASL_PASSWORD": password(ADMIN),
    }.items():
        monkeypatch.setenv(f"KADENCE_{name}", value)
    admin = AdminClient(ns.kafka(ADMIN))
    before = _acls(admin)
    assert main(["acls", "--apply", "--tenant", "*"]) == 3  # it granted User:*
    assert main(["acls", "--apply", "--tenant", "kadence-api"]) == 3  # the API's principal
    assert main(["acls", "--apply", "--tenant", "a' --allow-principal 'User:*"]) == 3
    collide = ["--tenant", "acme", "--principal", "tenant:acme=User:kadence-api"]
    assert main(["acls", "--apply", *collide]) == 3
    after = _acls(admin)
    assert after == before
    assert not {b for b in after if b[0] == "User:*"}
    assert main(["acls", "--apply", "--tenant", "acme"]) == 0  # the same as applied: no change
    assert _acls(admin) == before


def test_the_api_reads_a_dead_letter_back_with_no_refusal(ns: Namespace) -> None:
    """KadenceClient.dead_letter's reader: Read on the topic, Describe on its nominal group
    (without it the first event is GROUP_AUTHORIZATION_FAILED)."""
    topic = Topics(ns.as_user(ADMIN)).dead_letter
    producer = Producer(ns.kafka(ADMIN))
    producer.produce(topic, b"a letter", partition=0)
    producer.flush(10)
    reader = Consumer(
        {**ns.kafka("kadence-api"), "group.id": "kadence-reader", "enable.auto.commit": False}
    )
    try:
        reader.assign([TopicPartition(topic, 0, 0)])
        first = _next_event(reader)
    finally:
        reader.close()
    assert first.error() is None, first.error()
    assert first.value() == b"a letter"


def test_a_tenant_writes_only_its_own_ingress_topics(ns: Namespace) -> None:
    topics = Topics(ns.as_user(ADMIN))
    mine = [ingress_topic(ns.name, "acme", kind) for kind in ("schedules", "commands")]
    theirs = [ingress_topic(ns.name, "globex", kind) for kind in ("schedules", "commands")]
    kadence = [
        topics.schedules,
        topics.commands,
        topics.scheduler_control,
        topics.executions,
        topics.outcomes,
    ]
    results = _produce(ns.kafka("acme"), [*mine, *theirs, *kadence])
    assert {t: results[t] for t in mine} == dict.fromkeys(mine)
    refused = KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert {t: results[t] for t in [*theirs, *kadence]} == dict.fromkeys(
        [*theirs, *kadence], refused
    )


def test_a_tenant_reads_neither_another_tenants_topics_nor_kadences(ns: Namespace) -> None:
    group = f"{ns.name}.to.acme.probe"  # a group acme may use: only the topic is refused
    for topic in (target_topic(ns.name, "globex", "out"), Topics(ns.as_user(ADMIN)).dead_letter):
        event = _read(ns.kafka("acme"), topic, group)
        error = event.error()
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, topic
    joined = _read(ns.kafka("acme"), target_topic(ns.name, "acme", "out"), f"{ns.name}.scheduler")
    error = joined.error()
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def _payloads(ns: Namespace, wanted: set[bytes], timeout_s: float = 60) -> set[bytes]:
    """What of `wanted` acme's consumer (as acme, in a group under its own prefix) finds in
    the executions delivered to its target topic within `timeout_s`; any refusal fails."""
    consumer = Consumer(
        {
            **ns.kafka("acme"),
            "group.id": f"{ns.name}.to.acme.e2e",
            "auto.offset.reset": "earliest",
        }
    )
    found: set[bytes] = set()
    try:
        consumer.subscribe([target_topic(ns.name, "acme", "out")])
        deadline = time.monotonic() + timeout_s
        while found != wanted and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:  # the topic is made by the first run: not there for a moment
                assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, error
                continue
            found |= {w for w in wanted if w in (msg.value() or b"")}
    finally:
        consumer.close()
    return found


def _produce(kafka: dict[str, Any], topics: list[str]) -> dict[str, int | None]:
    """Each topic's delivery result: None when written, else the error code."""
    results: dict[str, int | None] = {}

    def delivered(err: KafkaError | None, msg: Message) -> None:
        results[str(msg.topic())] = None if err is None else err.code()

    producer = Producer({**kafka, "message.timeout.ms": 10_000})
    for topic in topics:
        producer.produce(topic, b"from acme", on_delivery=delivered)
    producer.flush(20)
    return results


def _read(kafka: dict[str, Any], topic: str, group: str, timeout_s: float = 20) -> Message:
    """The first record or error other than an unknown topic that a consumer in `group`
    subscribed to `topic` sees."""
    consumer = Consumer(
        {**kafka, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            return msg
        raise TimeoutError(f"nothing from {topic} in {timeout_s} s")
    finally:
        consumer.close()


def _error_code(future: Any) -> int | None:
    """None when the admin request succeeded, else the broker's error code."""
    try:
        future.result(30)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return None


def _acls(admin: AdminClient) -> set[tuple[str, str, str, str, str]]:
    """Every binding on the broker, as (principal, resource, name, pattern, operation)."""
    anything: Any = None  # the filter's wildcard for a name, principal or host
    everything = AclBindingFilter(
        ResourceType.ANY, anything, ResourcePatternType.ANY, anything, anything,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    found = admin.describe_acls(everything, request_timeout=30).result(30)
    return {
        (b.principal, str(b.restype), b.name, str(b.resource_pattern_type), str(b.operation))
        for b in found
    }


def _first_json(ns: Namespace, topic: str, user: str) -> dict[str, Any]:
    """The first record of `topic`, read as `user` in a group under its own prefix."""
    msg = _read(ns.kafka(user), topic, f"{ns.name}.to.{user}.probe-{uuid.uuid4().hex[:6]}", 60)
    assert msg.error() is None, msg.error()
    doc: dict[str, Any] = json.loads(msg.value() or b"{}")
    return doc


def _rejected_from(ns: Namespace, source: str, timeout_s: float = 60) -> Rejected:
    """The first refusal in `rejected` of a record from `source` (read as the administrator)."""
    consumer = Consumer(
        {
            **ns.kafka(ADMIN),
            "group.id": f"probe-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([Topics(ns.as_user(ADMIN)).rejected])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            refusal = CODEC.decode_as(msg.value() or b"", Rejected)
            if refusal.source_topic == source:
                return refusal
        raise TimeoutError(f"no refusal of a record from {source} in {timeout_s} s")
    finally:
        consumer.close()


def _next_event(consumer: Consumer, timeout_s: float = 20) -> Message:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            return msg
    raise TimeoutError(f"no event in {timeout_s} s")
