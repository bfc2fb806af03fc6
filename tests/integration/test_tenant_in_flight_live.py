"""A tenant's runs in progress, judged per scheduler process, on the real broker: after a real
rebalance each of two scheduler processes counts exactly the runs its partitions' stores hold
(streams/scheduler/tenant_limits.py; the runtime tells it what it owns, `Owning`), and fires
only what its share of the tenant's cap leaves (tests/driver/test_tenant_in_flight.py checks
the same on the in-memory cluster)."""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from kadence.client import KadenceClient, routing_key
from kadence.models import Decision, KafkaTarget, OnceSchedule, ScheduleDefinition
from kadence.partitioning import partition_for
from kadence.provisioning import delete_namespace
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from testkit.scheduler_process import SchedulerProcess, executions, history
from tests.conftest import provisioned

CAP = 12
PARTITIONS = 6
FIRST = 12
"""One-offs the first process fires alone: its whole share of the cap, all of it in progress (no
worker reads them and their timeout is an hour)."""
SECOND = 24
"""One-offs put after the rebalance: each process fires what its share leaves, holds the rest."""
WAITS = re.compile(
    r"the tenant has (\d+) runs in progress on this scheduler process's partitions, "
    r"its share (\d+) "
)


def _one_off(job_id: str, at: datetime) -> ScheduleDefinition:
    return ScheduleDefinition(
        tenant="acme",
        job_id=job_id,
        version=1,
        schedule=OnceSchedule(run_at=at),
        target=KafkaTarget(topic="out"),
        timeout_ms=3_600_000,
    )


def _partition(settings: KadenceSettings, job_id: str) -> int:
    return partition_for(routing_key("acme", job_id, None), settings.partitions)


def _assignment(settings: KadenceSettings, timeout_s: float = 60) -> dict[str, set[int]]:
    """Each scheduler's job partitions (its client id -> the `schedules` partitions it owns),
    once two members share them all."""
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
    group, topic = f"{settings.namespace}.scheduler", Topics(settings).schedules
    deadline = time.monotonic() + timeout_s
    owned: dict[str, set[int]] = {}
    while time.monotonic() < deadline:
        [described] = admin.describe_consumer_groups([group], request_timeout=10).values()
        owned = {
            m.client_id: {tp.partition for tp in m.assignment.topic_partitions if tp.topic == topic}
            for m in described.result().members
        }
        if len(owned) == 2 and all(owned.values()) and sum(map(len, owned.values())) == PARTITIONS:
            return owned
        time.sleep(0.5)
    raise AssertionError(f"the two schedulers did not share the partitions: {owned}")


@pytest.mark.slow
def test_each_scheduler_counts_its_partitions_runs_after_a_rebalance(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = provisioned(kafka_bootstrap, partitions=PARTITIONS).model_copy(
        update={"tenant_max_in_flight": CAP, "dispatch_ahead_ms": 0}
    )
    a = SchedulerProcess(settings, "a", tmp_path / "a").start()
    b: SchedulerProcess | None = None
    try:
        soon = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
        first = [_one_off(f"first-{i}", soon) for i in range(FIRST)]
        with KadenceClient(settings) as client:
            client.put_many(first)
        assert len(executions(settings, expect=FIRST, timeout_s=30)) == FIRST  # a: its cap

        b = SchedulerProcess(settings, "b", tmp_path / "b").start()
        owners = _assignment(settings)
        time.sleep(3)  # both restored and turning (b.start waited for its first restore)
        later = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
        second = [_one_off(f"second-{i}", later) for i in range(SECOND)]
        with KadenceClient(settings) as client:
            client.put_many(second)
        time.sleep((later - datetime.now(UTC)).total_seconds() + 6)

        fired = executions(settings, expect=FIRST + SECOND, timeout_s=5)
        by_id = Counter(e.job_id for e in fired)
        assert all(n == 1 for n in by_id.values()), "a run fired twice"
        holds = [
            h
            for h in history(settings, expect=10_000, timeout_s=5)
            if h.decision is Decision.throttled and h.job_id.startswith("second-")
        ]
        for client_id, parts in owners.items():
            mine = {j.job_id for j in second if _partition(settings, j.job_id) in parts}
            held_before = sum(1 for j in first if _partition(settings, j.job_id) in parts)
            share = math.ceil(CAP * len(parts) / PARTITIONS)
            fired_now = sum(1 for j in mine if j in by_id)
            room = max(0, min(share - held_before, len(mine)))
            assert fired_now == room, (client_id, parts, held_before, share, fired_now)
            told = [WAITS.search(h.reason or "") for h in holds if h.job_id in mine]
            assert len(told) == len(mine) - fired_now, (client_id, len(told))
            for found in told:
                assert found is not None
                # what it counts is what its partitions hold: the runs the other process
                # fired on them before the rebalance, and its own since
                assert (int(found[1]), int(found[2])) == (held_before + fired_now, share)
    finally:
        a.stop()
        if b is not None:
            b.stop()
        delete_namespace(settings)
