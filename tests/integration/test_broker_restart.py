"""A broker of its own: idempotent start, and a compacted schedules topic that survives restarts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.kafka import kafkactl
from kadence.client import KadenceClient
from kadence.codec import Codec
from kadence.models import OnceSchedule, ScheduleDefinition
from kadence.models.targets import KafkaTarget
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from testkit.ports import free_ports
from testkit.topic_reader import read_topic
from tests.conftest import provisioned

from .test_sdk_roundtrip import T


@pytest.fixture
def own_broker(kafka_bootstrap: str, tmp_path: Path) -> Iterator[kafkactl.BrokerConfig]:
    """A second broker with its own data dir. Needs the shared one only to know jars exist."""
    base = kafkactl.BrokerConfig.from_env()
    cfg = kafkactl.BrokerConfig(
        home=tmp_path / "broker",
        port=free_ports(3),
        cache_dir=base.cache_dir,
        kafka_home=base.kafka_home,
        kafka_version=base.kafka_version,
    )
    yield cfg
    kafkactl.stop(cfg, quiet=True)


def _job(i: int, version: int) -> ScheduleDefinition:
    return ScheduleDefinition(
        tenant="acme",
        job_id=f"job-{i}",
        version=version,
        schedule=OnceSchedule(run_at=T),
        target=KafkaTarget(topic="out"),
        payload=f"v{version}".encode(),
    )


def _latest_per_key(settings: KadenceSettings, expect: int) -> dict[bytes, bytes | None]:
    msgs = read_topic(settings.bootstrap_servers, Topics(settings).schedules, expect=expect)
    assert len(msgs) == expect
    latest: dict[bytes, bytes | None] = {}
    for m in sorted(msgs, key=lambda m: (m.partition(), m.offset())):
        key = m.key()
        assert key is not None
        latest[key] = m.value()
    return latest


@pytest.mark.parametrize("how", ["clean", "kill-9"])
def test_schedules_survive_a_broker_restart(own_broker: kafkactl.BrokerConfig, how: str) -> None:
    cfg = own_broker
    t0 = time.monotonic()
    bootstrap = kafkactl.start(cfg, quiet=True)
    first_start_s = time.monotonic() - t0
    pid = kafkactl.running_pid(cfg)
    assert kafkactl.start(cfg, quiet=True) == bootstrap  # second start finds it running
    assert kafkactl.running_pid(cfg) == pid

    settings = provisioned(bootstrap)
    with KadenceClient(settings) as client:
        client.put_many([_job(i, 1) for i in range(30)])
        client.put_many([_job(i, 2) for i in range(0, 30, 3)])  # updates
        client.delete("acme", "job-1")  # a tombstone on every partition
    expected: dict[bytes, bytes | None] = {
        f"acme/job-{i}".encode(): Codec().encode(_job(i, 2 if i % 3 == 0 else 1)) for i in range(30)
    }
    expected[b"acme/job-1"] = None
    assert _latest_per_key(settings, expect=40 + settings.partitions) == expected

    if how == "clean":
        assert kafkactl.stop(cfg, quiet=True)
    else:
        assert kafkactl.kill(cfg)
    assert not kafkactl.broker_answers(bootstrap, timeout=1)
    assert (cfg.data_dir / "meta.properties").exists()

    kafkactl.start(cfg, quiet=True)

    assert kafkactl.running_pid(cfg) != pid
    assert _latest_per_key(settings, expect=40 + settings.partitions) == expected
    assert first_start_s < 60
