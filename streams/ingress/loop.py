"""The ingress loop: read every tenant's ingress topics, write what they may say to Kadence's
input topics, exactly once.

One consumer group (`<ns>.ingress`) subscribes to the pattern `^<ns>\\.from\\..*`, so a
tenant's topics are picked up within `TOPIC_REFRESH_MS` of their creation, whatever their
partition count. Each batch is one transaction of the shared session: the routed records and
the batch's input offsets commit together (a crash or a rebalance redoes the batch, never
half of it); a transaction that could not commit rewinds the consumer to the batch's start.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field

from confluent_kafka import TopicPartition

from kadence.clock import Clock
from kadence.codec import Codec
from kadence.settings import KadenceSettings
from kadence.target_topics import ingress_prefix
from kadence.topics import Topics
from streams.ingress.route import Router
from streams.kafkaio.clients import Clients
from streams.kafkaio.ports import MessageLike
from streams.kafkaio.session import Outcome, TransactionalSession
from streams.runtime.records import record_of

log = logging.getLogger(__name__)
TOPIC_REFRESH_MS = 5_000
"""How often the consumer looks for new ingress topics (librdkafka's default is 5 minutes)."""
BATCH = 500


@dataclass
class IngressStats:
    records: int = 0
    routed: int = 0
    rejected: int = 0
    aborts: int = 0


@dataclass
class IngressLoop:
    settings: KadenceSettings
    clients: Clients
    clock: Clock
    stats: IngressStats = field(default_factory=IngressStats)

    def __post_init__(self) -> None:
        ns = self.settings.namespace
        self.topics = Topics(self.settings)
        self.router = Router(self.topics, self.settings.partitions, Codec())
        self.pattern = "^" + re.escape(ingress_prefix(ns)) + ".*"
        client_id = f"{ns}.ingress.{self.settings.instance_id}"
        self.consumer = self.clients.consumer(
            f"{ns}.ingress", client_id, **{"topic.metadata.refresh.interval.ms": TOPIC_REFRESH_MS}
        )
        self.session = TransactionalSession(self.clients, client_id)

    def run(self, stop: threading.Event) -> None:
        self.consumer.subscribe([self.pattern])
        log.info("ingress reading %s", self.pattern)
        try:
            while not stop.is_set():
                self.turn()
        finally:
            self.session.close()
            self.consumer.close()

    def turn(self) -> None:
        """One batch, one transaction."""
        msgs = [m for m in self.consumer.consume(BATCH, timeout=0.2) if m.error() is None]
        if not msgs:
            return
        now = self.clock.now_ms()
        starts: dict[tuple[str, int], int] = {}
        ends: dict[tuple[str, int], int] = {}
        self.session.begin()
        for msg in msgs:
            where = (msg.topic() or "", msg.partition() or 0)
            starts.setdefault(where, msg.offset() or 0)
            ends[where] = (msg.offset() or 0) + 1
            self._route(msg, now)
        offsets = [TopicPartition(t, p, o) for (t, p), o in ends.items()]
        outcome = self.session.commit(offsets, self.consumer.consumer_group_metadata())
        if outcome is not Outcome.committed:
            self.stats.aborts += 1
            log.warning("ingress transaction %s: reading the batch again", outcome.value)
            for (t, p), o in starts.items():
                self.consumer.seek(TopicPartition(t, p, o))

    def _route(self, msg: MessageLike, now: int) -> None:
        self.stats.records += 1
        outs = self.router.route(record_of(msg, now), now)
        for out in outs:
            if out.topic == self.topics.rejected:
                self.stats.rejected += 1
            else:
                self.stats.routed += 1
            self.session.produce(out.topic, out.partition, out.key, out.value, out.headers)


def wire(settings: KadenceSettings, clients: Clients, clock: Clock) -> IngressLoop:
    return IngressLoop(settings, clients, clock)
