"""Where what the scheduler decided is written: executions on their tenant's executions
partition (by its route: tenant, or tenant and shard for wide tenants), everything else on
the job's own partition of its topic."""

from __future__ import annotations

from datetime import datetime
from functools import partial

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.execution_bytes import Templates
from kadence.headers import Headers, headers_for
from kadence.models import ExecutionRequested, WireModel
from kadence.partitioning import execution_route, partition_for
from kadence.pools import pool_topic
from streams.runtime.context import HeadersLater
from streams.scheduler.config import SchedulerConfig
from streams.scheduler.requested import SeriesRun
from streams.scheduler.step import Delete, Routed, Sink

ROUTES_KEPT = 100_000
"""Routes (tenants, or tenant shards) whose executions partition is kept computed."""


class Output:
    def __init__(self, cfg: SchedulerConfig, codec: Codec) -> None:
        self.cfg = cfg
        self.codec = codec
        self.topics = {
            Sink.executions: cfg.topics.executions,
            Sink.history: cfg.topics.history,
            Sink.dead_letter: cfg.topics.dead_letter,
            Sink.schedules: cfg.topics.schedules,
            Sink.control: cfg.topics.scheduler_control,
        }
        self.templates = Templates(codec)
        """The runs of a job's wake encoded from the first one's parts (execution_bytes.py)."""
        self._partitions: dict[str, int] = {}
        """The executions partition of each route seen (murmur2 in Python, at every run)."""
        self._fingerprint = codec.schema_fingerprint(ExecutionRequested)

    def encoded(
        self,
        partition: int,
        sink: Sink,
        record: WireModel | Delete | Routed,
        pool: str | None = None,
        *,
        later: bool = False,
    ) -> tuple[str, int, bytes, bytes | None, Headers | HeadersLater]:
        """(topic, partition, key, value, headers) of `record`, decided on job partition
        `partition`; a `Delete` is a tombstone there; a `Routed` command goes to its job's
        partition, which its route decides; an execution goes on its worker pool's topic
        (`pool_topic`). `later`: an execution's headers as the function that makes them (it
        goes in a group, and needs them only if it is written alone)."""
        if isinstance(record, Delete):
            return self.topics[Sink.schedules], partition, record.key.encode(), None, []
        if isinstance(record, Routed):
            to = partition_for(record.route, self.cfg.job_partitions)
            return self.encoded(to, sink, record.record)
        headers: Headers | HeadersLater
        if type(record) is ExecutionRequested:
            value = self.templates.encode(record)
            fingerprint = self._fingerprint
            if later:
                headers = partial(headers_for, record, fingerprint)
            else:
                headers = headers_for(record, fingerprint)
        else:
            value = self.codec.encode(record)
            headers = headers_for(record, self.codec.schema_fingerprint(type(record)))
        if sink is Sink.executions:
            tenant = getattr(record, "tenant", "")
            route = execution_route(tenant, getattr(record, "job_id", ""), self.cfg.tenant_shards)
            to = self._partition(route)
            if isinstance(record, ExecutionRequested):
                pool = record.target.pool
            return pool_topic(self.cfg.topics, pool), to, tenant.encode(), value, headers
        key = getattr(record, "key", "")
        return self.topics[sink], partition, str(key).encode(), value, headers

    def series(
        self, partition: int, run: SeriesRun
    ) -> tuple[str, int, bytes, bytes, HeadersLater, datetime] | None:
        """(topic, partition, key, value, headers later, group) of a series' run to a Kafka
        topic (written in its due instant's group, as `group_of` groups its record), its bytes
        from the series' template and where it goes from the series' first run: the record is
        made only for the first run, one the template does not write, and for its headers if
        it is written alone. None: not such a run (`encoded` writes its record)."""
        runs = run.runs
        if not runs.kafka:
            return None
        where = runs.where
        value = None if where is None else runs.value(run.shot)
        if where is not None and value is not None:
            topic, to, key = where
        else:
            record = run.record
            topic, to, key, value, _ = self.encoded(partition, Sink.executions, record, later=True)
            assert value is not None
            if where is None:
                runs.where = topic, to, key
                runs.template = self.templates.cut(record, value)
        headers = partial(_headers_alone, run, self._fingerprint)
        return topic, to, key, value, headers, ms_to_datetime(run.shot.due_ms)

    def _partition(self, route: str) -> int:
        to = self._partitions.get(route)
        if to is None:
            if len(self._partitions) >= ROUTES_KEPT:  # routes seen long ago are hashed again
                self._partitions.clear()
            to = self._partitions[route] = partition_for(route, self.cfg.execution_partitions)
        return to


def _headers_alone(run: SeriesRun, fingerprint: bytes) -> Headers:
    """A series' run's headers, when it is written alone (its record made then)."""
    return headers_for(run.record, fingerprint)
