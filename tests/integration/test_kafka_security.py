"""Kadence against a broker that only lets authenticated TLS clients in (issue 18, item 1): a
second local broker with a SASL_SSL listener whose certificates the test makes (openssl) and
whose SCRAM users the broker's own storage tool creates. The scheduler, the reaper, a worker
(with its Kafka target's producer and admin), provisioning, the SDK and the CLI all connect
through it from the settings alone; a wrong password is a clear error at start-up."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from apps.processes import settings_env
from infra.kafka import kafkactl
from infra.kafka.config import BrokerConfig, SecureListener
from kadence.client import KadenceClient
from kadence.errors import TopicError
from kadence.models import KafkaTarget, ScheduleDefinition
from kadence.provisioning import provision
from kadence.settings import KadenceSettings
from kadence.topics import Topics, target_topic
from testkit.ports import free_ports
from testkit.stack import Stack, execution_settings
from testkit.tls import Certificates, make_certificates
from testkit.topic_reader import read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
USER, PASSWORD = "alice", "alice-secret-4711"


@pytest.fixture(scope="module")
def secure(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerConfig, Certificates]]:
    """A broker of its own with a SASL_SSL listener; stopped also when its start fails."""
    tmp = tmp_path_factory.mktemp("secure")
    certs = make_certificates(tmp / "certs")
    base = BrokerConfig.from_env()
    cfg = BrokerConfig(
        home=tmp / "broker",
        port=free_ports(5),
        cache_dir=base.cache_dir,
        kafka_home=base.kafka_home,
        kafka_version=base.kafka_version,
        secure=SecureListener(certs.keystore, ((USER, PASSWORD),)),
    )
    try:
        kafkactl.start(cfg, quiet=True)
        yield cfg, certs
    finally:
        kafkactl.stop(cfg, quiet=True)


def secured(cfg: BrokerConfig, certs: Certificates, **kw: Any) -> KadenceSettings:
    fields: dict[str, Any] = {
        "bootstrap_servers": f"127.0.0.1:{cfg.secure_port}",
        "namespace": f"sec-{uuid.uuid4().hex[:8]}",
        "partitions": 2,
        "execution_partitions": 2,
        "kafka_security_protocol": "SASL_SSL",
        "kafka_sasl_mechanism": "SCRAM-SHA-256",
        "kafka_sasl_username": USER,
        "kafka_sasl_password": SecretStr(PASSWORD),
        "kafka_ssl_ca_location": certs.ca,
        **kw,
    }
    return KadenceSettings.model_validate(fields)


def test_every_process_and_tool_runs_over_sasl_ssl(
    secure: tuple[BrokerConfig, Certificates], tmp_path: Path
) -> None:
    cfg, certs = secure
    settings = execution_settings(secured(cfg, certs))
    assert provision(settings)  # the admin client, over SCRAM-SHA-256 and TLS
    stack = Stack.start(settings, tmp_path)
    try:
        run_at = datetime.now(UTC) + timedelta(seconds=3)
        job = ScheduleDefinition(
            tenant="acme", job_id="secure", version=1, target=KafkaTarget(topic="out"),
            schedule={"kind": "once", "run_at": run_at.isoformat()}, payload=b"over tls",
        )  # fmt: skip
        with KadenceClient(settings) as client:
            client.put(job)
        out = target_topic(settings.namespace, "acme", "out")
        deadline = time.monotonic() + 60
        got: list[Any] = []
        while not got and time.monotonic() < deadline:  # read on the plaintext listener
            try:
                got = read_topic(cfg.bootstrap, out, expect=1, timeout_s=2)
            except Exception:  # the topic is created by the worker's first run
                time.sleep(0.5)
        assert len(got) == 1, "the run never reached its Kafka target through SASL_SSL"
        cli = subprocess.run(
            [sys.executable, "-m", "apps.cli", "tail", "history", "--from-beginning", "-n", "1"],
            env=settings_env(settings),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert cli.returncode == 0, cli.stderr
        assert "acme/secure" in cli.stdout
    finally:
        stack.stop()
    history = read_topic(cfg.bootstrap, Topics(settings).history, expect=1, timeout_s=10)
    assert len(history) >= 1  # `fired`: the scheduler wrote it
    done = read_topic(cfg.bootstrap, Topics(settings).outcomes, expect=1, timeout_s=10)
    assert len(done) >= 1  # the worker wrote the outcome


def test_plain_works_too_and_a_wrong_password_is_a_clear_error_at_once(
    secure: tuple[BrokerConfig, Certificates],
) -> None:
    cfg, certs = secure
    plain = secured(cfg, certs, kafka_sasl_mechanism="PLAIN")
    assert provision(plain)
    wrong = secured(cfg, certs, kafka_sasl_password=SecretStr("not-the-password"))
    started = time.monotonic()
    with pytest.raises(TopicError, match="refused the connection") as refused:
        provision(wrong)
    assert time.monotonic() - started < 10  # before: the 30 s timeout, then "transport failure"
    message = str(refused.value)
    assert "Authentication failed" in message
    assert "KADENCE_KAFKA_SASL_" in message
    assert "not-the-password" not in message
    with pytest.raises(TopicError, match="refused the connection"):
        KadenceClient(wrong).partitions(Topics(wrong).schedules)
    proc = subprocess.run(
        [sys.executable, "-m", "apps.scheduler"],
        env=settings_env(wrong),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "refused the connection" in proc.stderr
    assert "not-the-password" not in proc.stdout + proc.stderr


def test_an_untrusted_broker_certificate_is_a_clear_error(
    secure: tuple[BrokerConfig, Certificates], tmp_path: Path
) -> None:
    cfg, certs = secure
    other = make_certificates(tmp_path / "other")  # a CA that did not sign the broker's
    with pytest.raises(TopicError, match=r"refused the connection .*KADENCE_KAFKA_SSL_CA"):
        provision(secured(cfg, certs, kafka_ssl_ca_location=other.ca))
