"""Worker pools without a broker (docs/execution.md, "Worker pools"): the settings and the
target's `pool` refuse what is malformed or huge; each pool has its executions topic and ACLs;
the API's model, the ingress and the scheduler refuse a pool the deployment does not have; the
scheduler dispatches and revokes on the pool's topic; a pool worker's snapshots name its pool
and the reaper reads expired ones back, and redelivers, there."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from kadence.acls import Operation, Pattern, Resource, Role, role_grants, tenant_grants
from kadence.codec import Codec
from kadence.models import (
    ExecutionBatch,
    ExecutionRequested,
    ExecutionRevoked,
    HandlerTarget,
    HeldRange,
    HttpTarget,
    KafkaTarget,
    LeaseSnapshot,
    Rejected,
    ScheduleDefinition,
    SqsTarget,
)
from kadence.models.base import DEFAULT_POOL
from kadence.partitioning import partition_for
from kadence.pools import pool_topic, unknown_pool
from kadence.settings import KadenceSettings
from kadence.target_topics import ingress_topic
from kadence.topics import Topics, all_topics, workers_group
from streams.ingress.route import Router
from streams.reaper.leases import LEASE_GRACE_MS
from streams.reaper.pool_watch import newly_waiting
from streams.reaper.snapshots import Held, on_snapshot
from streams.runtime.records import InputRecord
from streams.runtime.store import MemoryStore
from streams.scheduler import definitions
from streams.scheduler.config import SchedulerConfig
from streams.scheduler.dispatch import revocation
from streams.scheduler.output import Output
from streams.scheduler.step import Facts, Refused, Sink
from tests.reaper.test_snapshots import TTL, Harness, Reader, execution

CODEC = Codec()
T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
T_MS = int(T.timestamp() * 1000)
GPU = KadenceSettings(pools=["gpu", "onprem"], partitions=4, execution_partitions=4)


def definition(**target: Any) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": "train",
            "version": 1,
            "schedule": {"kind": "cron", "spread_s": 0, "expression": "* * * * *"},
            "target": {"kind": "handler", "name": "train", **target},
        }
    )


@pytest.mark.parametrize(
    "pools",
    [["GPU"], ["g" * 33], ["default"], ["gpu", "gpu"], ["-gpu"], ["a.b"], ["x"] * 65, [""]],
)
def test_malformed_or_huge_pool_settings_are_refused(pools: list[str]) -> None:
    with pytest.raises(ValidationError):
        KadenceSettings(pools=pools)


def test_a_worker_serves_only_a_pool_the_deployment_has() -> None:
    assert KadenceSettings().worker_pool == DEFAULT_POOL
    assert KadenceSettings(pools=["gpu"], worker_pool="gpu").worker_pool == "gpu"
    with pytest.raises(ValidationError, match="worker_pool"):
        KadenceSettings(worker_pool="gpu")  # not in KADENCE_POOLS


def test_pools_come_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KADENCE_POOLS", '["gpu", "onprem"]')
    monkeypatch.setenv("KADENCE_WORKER_POOL", "onprem")
    settings = KadenceSettings()
    assert settings.known_pools == ("default", "gpu", "onprem")
    assert Topics(settings).worker_executions == "kadence.executions.onprem"


@pytest.mark.parametrize("target", [HttpTarget, KafkaTarget, HandlerTarget, SqsTarget])
@pytest.mark.parametrize("pool", ["GPU", "g" * 33, "a/b", "", "gpu\n", "x" * 100_000])
def test_every_target_kind_refuses_a_malformed_or_huge_pool(target: Any, pool: str) -> None:
    bases: dict[Any, dict[str, str]] = {
        HttpTarget: {"url": "https://example.com/"},
        KafkaTarget: {"topic": "t"},
        HandlerTarget: {"name": "h"},
        SqsTarget: {"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q"},
    }
    base = bases[target]
    assert target.model_validate(base).pool is None
    assert target.model_validate({**base, "pool": "gpu"}).pool == "gpu"
    with pytest.raises(ValidationError, match="pool"):
        target.model_validate({**base, "pool": pool})


def test_each_pool_has_its_executions_topic_and_group() -> None:
    topics = Topics(GPU)
    assert topics.executions_of(None) == topics.executions == "kadence.executions"
    assert topics.executions_of("gpu") == "kadence.executions.gpu"
    names = [s.name("kadence") for s in all_topics(GPU)]
    assert "kadence.executions.gpu" in names and "kadence.executions.onprem" in names
    assert topics.spec_of("kadence.executions.gpu").records == (
        ExecutionRequested,
        ExecutionRevoked,
        ExecutionBatch,
    )
    assert workers_group("kadence", "default") == "kadence.workers"  # as before pools
    assert workers_group("kadence", "gpu") == "kadence.workers.gpu"
    assert pool_topic(topics, "retired") == topics.executions  # removed pool: default's


def _prefixed(role: Role, op: Operation) -> set[str]:
    return {
        name
        for g in role_grants(role, "kadence")
        if g.resource is Resource.topic and g.pattern is Pattern.prefixed and op in g.operations
        for name in g.names
    }


def test_acls_let_the_scheduler_and_reaper_write_pool_topics_and_workers_read_them() -> None:
    pools = "kadence.executions."
    assert pools in _prefixed(Role.scheduler, Operation.write)
    assert pools in _prefixed(Role.reaper, Operation.write)
    assert pools in _prefixed(Role.reaper, Operation.read)
    assert pools in _prefixed(Role.worker, Operation.read)
    assert pools not in _prefixed(Role.worker, Operation.write)
    assert pools not in _prefixed(Role.view, Operation.read)
    tenant = {n for g in tenant_grants("kadence", "acme") for n in g.names}
    assert not any(n.startswith("kadence.executions") for n in tenant)
    groups = {
        n
        for g in role_grants(Role.worker, "kadence")
        if g.resource is Resource.group
        for n in g.names
    }
    assert "kadence.workers." in groups


def test_an_unknown_pool_is_refused_with_the_pools_there_are() -> None:
    reason = unknown_pool(HandlerTarget(name="h", pool="tpu"), GPU.known_pools)
    assert reason is not None and "'tpu'" in reason and "default, gpu, onprem" in reason
    assert unknown_pool(HandlerTarget(name="h", pool="gpu"), GPU.known_pools) is None
    assert unknown_pool(HandlerTarget(name="h"), ("default",)) is None


def _cfg(settings: KadenceSettings) -> SchedulerConfig:
    return SchedulerConfig(Topics(settings), 4, 4, "2025b")


def test_the_scheduler_refuses_a_definition_for_a_pool_it_lacks_and_says_so_in_history() -> None:
    d = definition(pool="tpu")
    key = d.key.encode()
    partition = partition_for(d.routing_key, 4)
    facts = Facts(T_MS, CODEC, "2025b")
    with pytest.raises(Refused) as refused:
        definitions.admit(None, d, facts, key=key, partition=partition, cfg=_cfg(GPU))
    assert refused.value.code == "unknown_pool"
    [emit] = refused.value.out
    assert emit.sink is Sink.history and emit.record.decision == "definition_rejected"  # type: ignore[union-attr]
    assert "tpu" in emit.record.reason  # type: ignore[union-attr]
    ok = definition(pool="gpu")
    definitions.admit(None, ok, facts, key=key, partition=partition, cfg=_cfg(GPU))


def test_runs_and_revocations_go_on_their_pools_topic() -> None:
    output = Output(_cfg(GPU), CODEC)
    d = definition(pool="gpu")
    ex = ExecutionRequested(
        execution_id="acme/train@1",
        tenant="acme",
        job_id="train",
        definition_version=1,
        nominal_at=T,
        due_at=T,
        dispatched_at=T,
        target=d.target,
        timeout_ms=1000,
        lease_ttl_ms=1000,
    )
    assert output.encoded(0, Sink.executions, ex)[0] == "kadence.executions.gpu"
    plain = ex.model_copy(update={"target": HandlerTarget(name="train")})
    assert output.encoded(0, Sink.executions, plain)[0] == "kadence.executions"
    facts = Facts(T_MS, CODEC, "2025b")
    state = definitions.apply_definition(None, d, CODEC.encode(d), T_MS, facts).state
    assert state is not None
    emit = revocation(state, facts, "acme/train@1", T_MS, "paused")
    topic = output.encoded(0, emit.sink, emit.record, emit.pool)[0]
    assert topic == "kadence.executions.gpu"  # where its ExecutionRequested went


def test_the_ingress_refuses_a_tenant_definition_for_an_unknown_pool() -> None:
    router = Router(Topics(GPU), 4, CODEC)
    topic = ingress_topic("kadence", "acme", "schedules")
    for pool, refused in (("tpu", True), ("gpu", False), ("x" * 10_000, True)):
        doc = json.loads(definition().model_dump_json())
        doc["target"]["pool"] = pool
        [out] = router.route(InputRecord(topic, 0, 0, None, json.dumps(doc).encode(), [], 0), 0)
        record = CODEC.decode(out.value)
        assert isinstance(record, Rejected) is refused, record
        if pool == "tpu":
            assert isinstance(record, Rejected) and record.code == "unknown_pool"


def test_a_pool_workers_held_entry_keeps_its_pool_and_old_entries_are_default() -> None:
    snap = LeaseSnapshot(
        worker_id="w",
        incarnation="i",
        at=T,
        held=[HeldRange(partition=1, start=5, count=2, ttl_ms=3000)],
        pool="gpu",
    )
    entry = on_snapshot(None, snap, T_MS)
    assert entry.held is not None and entry.held.pool == "gpu"
    assert Held.load(entry.held.dump()).pool == "gpu"
    old = b'{"w":"w","t":1,"h":[[0,1,1,5]],"d":[]}'  # stored before pools
    assert Held.load(old).pool == DEFAULT_POOL
    assert "p" not in json.loads(Held.load(old).dump())


def test_the_reaper_reads_a_pool_workers_expired_run_back_and_redelivers_it_there() -> None:
    h = Harness(MemoryStore())
    topics = Topics(KadenceSettings(partitions=1, pools=["gpu"]))
    h.proc.cfg = replace(h.proc.cfg, topics=topics)
    gpu = Reader()
    h.proc.readers["gpu"] = gpu
    run = execution("train").model_copy(update={"target": HandlerTarget(name="t", pool="gpu")})
    gpu.log = {(1, 5): CODEC.encode(run)}
    h.reader.log = {(1, 5): CODEC.encode(execution("other"))}  # default's offset 5: not it
    snap = LeaseSnapshot(
        worker_id="w",
        incarnation="i",
        at=T,
        held=[HeldRange(partition=1, start=5, count=1, ttl_ms=TTL)],
        pool="gpu",
    )
    h.raw(CODEC.encode(snap), snap.key.encode(), T_MS)
    h.tick(T_MS + TTL + LEASE_GRACE_MS + 1)
    assert gpu.reads == [[(1, 5)]] and h.reader.reads == []
    [again] = [o for o in h.out if o[0].startswith("kadence.executions")]
    assert again[0] == "kadence.executions.gpu"
    redelivered = CODEC.decode(again[3])
    assert isinstance(redelivered, ExecutionRequested) and redelivered.job_id == "train"
    assert redelivered.delivery == 2


def test_runs_waiting_on_a_pool_without_workers_are_reported_once_each() -> None:
    run = execution("train").model_copy(update={"target": HandlerTarget(name="t", pool="gpu")})
    seen: set[str] = set()
    [record] = newly_waiting("gpu", 0, [run], seen, T_MS)
    assert record.decision == "waiting_for_pool" and record.details == {"pool": "gpu"}
    assert record.execution_id == run.execution_id and record.tenant == "acme"
    assert newly_waiting("gpu", 0, [run], seen, T_MS + 5_000) == []  # once
    again = run.model_copy(update={"delivery": 2})  # a redelivery waits again: said again
    assert len(newly_waiting("gpu", 0, [again], seen, T_MS)) == 1
    assert newly_waiting("gpu", 1, [execution("other")], set(), T_MS) == []  # a worker is there
