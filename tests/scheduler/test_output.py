"""Where the scheduler's executions go: the partition their route (tenant, or tenant and shard)
hashes to, the same however often the route was seen before (output.py keeps it computed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import ExecutionRequested, HandlerTarget
from kadence.partitioning import execution_route, partition_for
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.scheduler import output as output_module
from streams.scheduler.config import SchedulerConfig
from streams.scheduler.output import Output
from streams.scheduler.step import Sink
from tests.scheduler.test_domain import T0

CODEC = Codec()
names = st.sampled_from(["acme", "globex", "initech", "umbrella", "t1"])


def _run(tenant: str, job_id: str) -> ExecutionRequested:
    at = ms_to_datetime(T0)
    return ExecutionRequested(
        execution_id=f"{tenant}/{job_id}@1",
        tenant=tenant,
        job_id=job_id,
        definition_version=1,
        nominal_at=at,
        due_at=at,
        dispatched_at=at,
        target=HandlerTarget(name="h"),
        timeout_ms=1000,
        lease_ttl_ms=1000,
    )


@given(
    runs=st.lists(st.tuples(names, st.sampled_from(["a", "b", "c", "d"])), max_size=30),
    shards=st.dictionaries(names, st.integers(1, 5), max_size=3),
    partitions=st.integers(1, 12),
    kept=st.integers(1, 4),
)
@hsettings(max_examples=200, deadline=None)
def test_each_execution_goes_where_its_route_hashes(
    runs: list[tuple[str, str]], shards: dict[str, int], partitions: int, kept: int
) -> None:
    settings = KadenceSettings(partitions=1, execution_partitions=partitions)
    cfg = SchedulerConfig(Topics(settings), 1, partitions, "2025b", tenant_shards=shards)
    output = Output(cfg, CODEC)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(output_module, "ROUTES_KEPT", kept)  # forgotten and hashed again
        for tenant, job_id in runs:
            _topic, to, key, _value, _headers = output.encoded(
                0, Sink.executions, _run(tenant, job_id)
            )
            assert to == partition_for(execution_route(tenant, job_id, shards), partitions)
            assert key == tenant.encode()
            assert len(output._partitions) <= kept  # bounded
