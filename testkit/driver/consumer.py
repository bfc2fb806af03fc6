"""A consumer of the in-memory cluster, with confluent_kafka.Consumer's methods.

Options read from its config, librdkafka's names and defaults: `group.id`, `client.id`,
`isolation.level` (read_committed), `auto.offset.reset` (latest), `enable.partition.eof`.
Everything else is accepted and ignored. `consume` never waits: it returns what is there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from streams.kafkaio.ports import RebalanceCallback
from testkit.driver.cluster import Cluster, kafka_error
from testkit.driver.groups import TP, GroupMetadata
from testkit.driver.log import MemoryMessage
from testkit.driver.metadata import cluster_metadata


class MemoryConsumer:
    def __init__(self, cluster: Cluster, config: dict[str, Any]) -> None:
        self.cluster = cluster
        self.config = config
        self.group_id: str = config.get("group.id", "")
        self.client_id: str = config.get("client.id", "rdkafka")
        self.read_committed = config.get("isolation.level", "read_committed") == "read_committed"
        self.reset = str(config.get("auto.offset.reset", "latest"))
        self.partition_eof = bool(config.get("enable.partition.eof", False))
        self.positions: dict[TP, int] = {}
        """The assignment, in order, with each partition's next offset to read."""
        self.topics: list[str] = []
        self.member_id = ""
        self.generation = -1
        """The generation whose assignment this consumer holds (-1: none yet)."""
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._eof_at: dict[TP, int] = {}
        self.paused: set[TP] = set()
        """Partitions `pause`d: `consume` reads nothing of them (a new assignment clears it)."""
        self.closed = False

    def _call(self, method: str) -> KafkaError | None:
        if self.closed:
            raise RuntimeError("Consumer closed")
        return self.cluster.faults.check(method, self.client_id)

    @staticmethod
    def _raise_if(error: KafkaError | None) -> None:
        if error is not None:
            raise KafkaException(error)

    # -- group membership ----------------------------------------------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
    ) -> None:
        self._raise_if(self._call("subscribe"))
        self.topics, self._on_assign, self._on_revoke = list(topics), on_assign, on_revoke
        with self.cluster.lock:
            group = self.cluster.group(self.group_id)
            if self.member_id in group.members:
                group.leave(self.member_id, self.cluster.partitions)
            self.member_id = group.join(self.client_id, self.topics, self.cluster.partitions)

    def _sync(self) -> None:
        """Serve a rebalance that happened since the last call, as librdkafka does inside
        poll: revoke everything held, then assign the new share (rejoining first if the
        group dropped this member)."""
        if not self.topics:
            return
        with self.cluster.lock:
            group = self.cluster.group(self.group_id)
            if self.member_id not in group.members:
                self._revoke()
                self.member_id = group.join(self.client_id, self.topics, self.cluster.partitions)
                group = self.cluster.group(self.group_id)
            if group.generation == self.generation:
                return
            share = list(group.assignment.get(self.member_id, []))
            generation = group.generation
        self._revoke()
        self.generation = generation
        tps = [TopicPartition(t, p) for t, p in share]
        self._assign(tps)
        if self._on_assign is not None:
            self._on_assign(self, tps)

    def _revoke(self) -> None:
        held = [TopicPartition(t, p) for t, p in self.positions]
        if held and self._on_revoke is not None:
            self._on_revoke(self, held)
        self.positions.clear()
        self.generation = -1

    def consumer_group_metadata(self) -> GroupMetadata:
        self._raise_if(self._call("consumer_group_metadata"))
        return GroupMetadata(self.group_id, self.generation, self.member_id)

    # -- assignment and positions ----------------------------------------------------------------

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._raise_if(self._call("assign"))
        self._assign(partitions)

    def _assign(self, partitions: list[TopicPartition]) -> None:
        with self.cluster.lock:
            committed = self.cluster.group(self.group_id).offsets if self.group_id else {}
            self.positions = {}
            for tp in partitions:
                key = (tp.topic, tp.partition)
                log = self.cluster.log(*key)
                if tp.offset >= 0:
                    self.positions[key] = tp.offset
                elif tp.offset == OFFSET_BEGINNING:
                    self.positions[key] = log.low
                elif tp.offset == OFFSET_END:
                    self.positions[key] = log.high
                elif key in committed:
                    self.positions[key] = committed[key][0]
                else:
                    self.positions[key] = log.low if self.reset == "earliest" else log.high
            self._eof_at = {}
            self.paused = set()

    def unassign(self) -> None:
        self.positions = {}

    def assignment(self) -> list[TopicPartition]:
        self._raise_if(self._call("assignment"))
        return [TopicPartition(t, p) for t, p in self.positions]

    def seek(self, partition: TopicPartition) -> None:
        self._raise_if(self._call("seek"))
        key = (partition.topic, partition.partition)
        if key not in self.positions:
            raise kafka_error(KafkaError._STATE, f"{key} is not assigned")
        self.positions[key] = partition.offset
        self._eof_at.pop(key, None)

    def pause(self, partitions: list[TopicPartition]) -> None:
        self._raise_if(self._call("pause"))
        self.paused |= {(tp.topic, tp.partition) for tp in partitions}

    def resume(self, partitions: list[TopicPartition]) -> None:
        self._raise_if(self._call("resume"))
        self.paused -= {(tp.topic, tp.partition) for tp in partitions}

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        self._raise_if(self._call("position"))
        return [
            TopicPartition(
                tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition), OFFSET_INVALID)
            )
            for tp in partitions
        ]

    def committed(
        self, partitions: list[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]:
        self._raise_if(self._call("committed"))
        with self.cluster.lock:
            offsets = self.cluster.group(self.group_id).offsets
            found = []
            for tp in partitions:
                offset, meta = offsets.get((tp.topic, tp.partition), (OFFSET_INVALID, None))
                found.append(
                    TopicPartition(tp.topic, tp.partition, offset, metadata=meta)
                    if meta is not None
                    else TopicPartition(tp.topic, tp.partition, offset)
                )
            return found

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        self._raise_if(self._call("get_watermark_offsets"))
        with self.cluster.lock:
            log = self.cluster.log(partition.topic, partition.partition)
            return log.low, log.high

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self._raise_if(self._call("list_topics"))
        return cluster_metadata(self.cluster, topic)

    # -- reading -------------------------------------------------------------------------------

    def consume(self, num_messages: int = 1, timeout: float = -1) -> Sequence[MemoryMessage]:
        error = self._call("consume")
        if error is not None:
            return [MemoryMessage(None, None, error=error)]
        self._sync()
        found: list[MemoryMessage] = []
        with self.cluster.lock:
            for key, position in list(self.positions.items()):
                if len(found) >= num_messages:
                    break
                if key in self.paused:
                    continue
                log = self.cluster.log(*key)
                entries, after = log.read(position, num_messages - len(found), self.read_committed)
                self.positions[key] = after
                found += [MemoryMessage(key[0], key[1], e) for e in entries]
                if self.partition_eof and after >= log.high and self._eof_at.get(key) != after:
                    self._eof_at[key] = after
                    eof = KafkaError(KafkaError._PARTITION_EOF, f"{key} at end: {after}")
                    found.append(MemoryMessage(key[0], key[1], error=eof))
        return found

    def close(self) -> None:
        """Leave the group (its partitions revoked first, as librdkafka's close does)."""
        if self.closed:
            return
        self._raise_if(self._call("close"))
        if self.topics:
            self._revoke()
            with self.cluster.lock:
                self.cluster.group(self.group_id).leave(self.member_id, self.cluster.partitions)
        self.closed = True
