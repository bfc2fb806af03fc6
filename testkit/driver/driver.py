"""The test driver: Kadence's loops turn by turn on an in-memory cluster, with a settable clock.

Kafka Streams' TopologyTestDriver in spirit: pipe input records in, turn the loop, read the
output topics; time moves only when the test says. Here the loops are the real ones (the
processor runtime's `Runner`, the `Worker`), built on `MemoryClients`, so their transactions,
rebalances and failures are the production code's, not a stand-in's. A test can also fail any
client call (`driver.cluster.faults`) and crash a loop (`crash`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from kadence.clock import FakeClock
from kadence.codec import Codec
from kadence.headers import headers_for
from kadence.models import WireModel, entries_of
from kadence.settings import KadenceSettings
from kadence.targets import Target
from kadence.topics import Topics, TopicSpec, all_topics, partitions_of
from streams.kafkaio.session import Timeouts
from streams.runtime.config import RunnerConfig
from streams.runtime.loop import Runner
from streams.runtime.processor import Processor
from streams.views.materializer import Materializer
from streams.worker.loop import Worker
from streams.worker.metrics import WorkerMetrics
from testkit.driver.cluster import Cluster
from testkit.driver.log import Headers, MemoryMessage
from testkit.driver.memkafka import MemoryClients

START_MS = 1_796_112_000_000
"""2026-12-01T08:00:00Z: where a driver's clock starts unless told otherwise."""
QUICK = Timeouts(hung_after_s=0.5, give_up_after_s=2.0)
"""Transaction timeouts for tests: a hung call is given up after half a second, not 15 s."""
Loop = Runner | Worker | Materializer
L = TypeVar("L", Runner, Worker, Materializer)


class Driver:
    """One in-memory cluster, its clients, a fake clock, and the loops a test built on them."""

    def __init__(self, *, now_ms: int = START_MS) -> None:
        self.clock = FakeClock(now_ms)
        self.cluster = Cluster(self.clock)
        self.clients = MemoryClients(self.cluster)
        self.codec = Codec()
        self.loops: list[Loop] = []
        self._crashed: list[Loop] = []
        self._input = self.clients.producer("driver")

    # -- topics and time -----------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1) -> str:
        self.cluster.create_topic(name, partitions)
        return name

    def provision(self, settings: KadenceSettings) -> Topics:
        """Every Kadence topic of `settings`' namespace, as `kadence.provisioning.provision` makes
        them (partition counts and configs)."""
        for spec in all_topics(settings):
            name = spec.name(settings.namespace)
            if name not in self.cluster.logs:
                self.cluster.create_topic(name, partitions_of(spec, settings), spec.config())
        return Topics(settings)

    def advance(self, ms: int) -> int:
        return self.clock.advance(ms)

    def now_ms(self) -> int:
        return self.clock.now_ms()

    # -- records in and out ----------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
    ) -> MemoryMessage:
        """Write an input record, committed at once (not transactional); its message back."""
        before = {p: log.high for p, log in enumerate(self.cluster.logs[topic])}
        self._input.produce(
            topic,
            value=value,
            key=key,
            partition=-1 if partition is None else partition,
            headers=headers,
        )
        for p, log in enumerate(self.cluster.logs[topic]):
            if log.high > before[p]:
                return MemoryMessage(topic, p, log.entries[-1])
        raise AssertionError(f"nothing was written to {topic}")

    def send(
        self,
        topic: str,
        record: WireModel,
        *,
        key: str | bytes | None,
        partition: int | None = None,
    ) -> MemoryMessage:
        """Write a Kadence record as Kadence writes it (Avro, with its headers); a batch of
        outcomes has no key."""
        headers = headers_for(record, self.codec.schema_fingerprint(type(record)))
        raw = key.encode() if isinstance(key, str) else key
        return self.produce(
            topic, self.codec.encode(record), key=raw, partition=partition, headers=headers
        )

    def messages(self, topic: str, partition: int | None = None) -> list[MemoryMessage]:
        """What a read_committed reader of `topic` sees now."""
        return self.cluster.messages(topic, partition)

    def records(self, topic: str, spec: TopicSpec) -> list[WireModel]:
        """The committed records of a Kadence topic, decoded (tombstones left out), a batch
        of outcomes as each of its outcomes."""
        return [
            entry
            for m in self.messages(topic)
            if m.value() is not None
            for entry in entries_of(spec.decode(self.codec, m.value()))
        ]

    # -- loops ---------------------------------------------------------------------------------

    def runner(self, cfg: RunnerConfig, processor: Processor) -> Runner:
        """A processor runtime loop, subscribed (it gets its partitions in its first turn)."""
        return self.add(Runner(cfg, processor, self.clock, self.clients))

    def add(self, loop: L) -> L:
        """Take over a loop built on this driver's `clients` and `clock` (the apps' `wire`):
        subscribe it (assign, for the view) with the test timeouts; the driver turns it."""
        if isinstance(loop, Materializer):
            loop.assign()
        else:
            loop.session.timeouts = QUICK
            loop.subscribe()
        self.loops.append(loop)
        return loop

    def worker(
        self,
        settings: KadenceSettings,
        targets: dict[str, Target],
        *,
        instance_id: str | None = None,
    ) -> Worker:
        """A worker loop, subscribed to the executions topic."""
        if instance_id is not None:
            settings = settings.model_copy(update={"instance_id": instance_id})
        return self.add(
            Worker(settings, self.clock, targets, WorkerMetrics(), clients=self.clients)
        )

    def turn(self, *loops: Loop, times: int = 1) -> None:
        """One turn of each loop, in the order given, `times` over (every loop if none given)."""
        for _ in range(times):
            for loop in loops or tuple(self.loops):
                if isinstance(loop, Runner):
                    loop.turn()
                else:
                    loop.turn(poll_s=0)

    def turn_until(
        self, done: Callable[[], bool], *loops: Loop, turns: int = 100, wait_s: float = 5.0
    ) -> None:
        """Turn until `done()`; invocations run on the worker's threads, so this may wait for
        them (in real time, up to `wait_s`), but the clock stays where it is."""
        deadline = time.monotonic() + wait_s
        for _ in range(turns):
            if done():
                return
            self.turn(*loops)
            if time.monotonic() > deadline:
                break
            time.sleep(0.001)
        if not done():
            raise AssertionError(f"not done after {turns} turns: {done}")

    def stop(self, loop: Loop) -> None:
        """Stop a loop as its process does on SIGTERM: a worker first lets its runs finish
        and reports them (`Worker.drain`, which waits in real time); then it closes."""
        self.loops.remove(loop)
        if isinstance(loop, Worker):
            loop.drain()
        self._close(loop)

    def crash(self, loop: Runner | Worker) -> None:
        """The loop's process dies: it never turns again; the group drops it (its session
        times out) and the broker aborts its open transaction (its timeout). Its RocksDB files
        stay on disk, unlocked, for a restarted process."""
        self.loops.remove(loop)
        self._crashed.append(loop)
        consumer: Any = loop.consumer
        with self.cluster.lock:
            group = self.cluster.group(consumer.group_id)
            group.leave(consumer.member_id, self.cluster.partitions)
        self.cluster.expire_transaction(loop.session.transactional_id)
        if isinstance(loop, Runner):
            for task in loop.tasks.values():
                task.store.close()
            loop.tasks.clear()
            copies = loop.standbys.copies if loop.standbys is not None else {}
            for copy in copies.values():  # as they were: a crash completes nothing
                copy.store.close()
            copies.clear()
        else:
            loop.pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Close every loop still running (and release every hung call first)."""
        self.cluster.faults.clear()
        for loop in reversed(self.loops):
            self._close(loop)
        self.loops.clear()

    @staticmethod
    def _close(loop: Loop) -> None:
        if isinstance(loop, Materializer):
            loop.consumer.close()
            loop.store.close()
        else:
            loop.close()
