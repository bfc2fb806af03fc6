"""The ingress loop: Kadence's door to tenants on Kafka, both ways. In: every tenant's
ingress topics, written to Kadence's input topics as the tenant may say it. Out: what each
tenant is told on its events topic (streams/ingress/events.py). Exactly once.

One consumer group (`<ns>.ingress`) subscribes to the pattern `^<ns>\\.from\\..*` (a tenant's
topics are picked up within `TOPIC_REFRESH_MS` of their creation, read from their start) and to
`dead-letter`, `scheduler-control` and `rejected` (read from their end the first time: a new
deployment does not replay 180 days of dead letters). Each batch is one transaction of the
shared session: the records written and the batch's input offsets commit together (a crash or a
rebalance redoes the batch, never half of it); a transaction that could not commit rewinds the
consumer to the batch's start. A tenant's events topic is created at its first event.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter as Tally
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

from kadence.clock import Clock
from kadence.codec import Codec
from kadence.errors import KadenceError
from kadence.metrics import LagTracker
from kadence.provisioning import provision_events
from kadence.quotas import Quotas
from kadence.settings import KadenceSettings
from kadence.target_topics import events_topic, ingress_prefix, ingress_tenant
from kadence.topics import Topics
from streams.ingress.admission import Admission
from streams.ingress.events import Events
from streams.ingress.lookup import ViewLookup
from streams.ingress.metrics import ACCEPTED, REJECTED, TOLD, UNTOLD, IngressMetrics
from streams.ingress.placement import Placement
from streams.ingress.quotas import IngressQuotas
from streams.ingress.route import Router
from streams.kafkaio.clients import Clients
from streams.kafkaio.ports import ConsumerLike, MessageLike
from streams.kafkaio.reading import ready
from streams.kafkaio.retry import retrying
from streams.kafkaio.session import Outcome, TransactionalSession
from streams.runtime.records import InputRecord, record_of

log = logging.getLogger(__name__)
TOPIC_REFRESH_MS = 5_000
"""How often the consumer looks for new ingress topics (librdkafka's default is 5 minutes)."""
BATCH = 500
UNMADE_RETRY_MS = 60_000
UNMADE_KEPT = 10_000


@dataclass
class IngressStats:
    records: int = 0
    routed: int = 0
    rejected: int = 0
    told: int = 0
    untold: int = 0
    aborts: int = 0


@dataclass
class IngressLoop:
    settings: KadenceSettings
    clients: Clients
    clock: Clock
    stats: IngressStats = field(default_factory=IngressStats)
    metrics: IngressMetrics = field(default_factory=IngressMetrics)

    def __post_init__(self) -> None:
        ns = self.settings.namespace
        self.topics = Topics(self.settings)
        codec = Codec()
        self.router = Router(
            self.topics, self.settings.partitions, codec, admission(self.settings, codec)
        )
        self.events = Events(self.topics, self.router.codec)
        self._known: set[str] = set()
        """Tenants whose events topic this process made sure of."""
        self._unmade: dict[str, int] = {}
        """Tenants whose events topic could not be made (ACLs grant the ingress only the listed
        tenants'), and until when (epoch ms) it is not tried again: one admin request and one
        log line per tenant per UNMADE_RETRY_MS, not per event."""
        self.pattern = "^" + re.escape(ingress_prefix(ns)) + ".*"
        client_id = f"{ns}.ingress.{self.settings.instance_id}"
        self.consumer = self.clients.consumer(
            f"{ns}.ingress", client_id, **{"topic.metadata.refresh.interval.ms": TOPIC_REFRESH_MS}
        )
        self.session = TransactionalSession(self.clients, client_id)
        self.lag = LagTracker(f"{ns}.ingress")
        self._records: Tally[tuple[str, str]] = Tally()
        self._events: Tally[str] = Tally()
        """The open batch's counts (streams/ingress/metrics.py), added once it committed."""

    def run(self, stop: threading.Event) -> None:
        self.consumer.subscribe([self.pattern, *self.events.sources], on_assign=self._assigned)
        log.info("ingress reading %s and %s", self.pattern, ", ".join(self.events.sources))
        try:
            while not stop.is_set():
                self.turn()
        finally:
            self.session.close()
            self.consumer.close()

    def turn(self) -> None:
        """One batch, one transaction."""
        msgs = [m for m in ready(self.consumer, BATCH, 0.2) if m.error() is None]
        self.lag.update(self.consumer)
        if not msgs:
            return
        now = self.clock.now_ms()
        if self.router.admission is not None:  # the batch's one question to the query view
            self.router.admission.prepare([(m.topic() or "", m.key(), m.value()) for m in msgs])
        starts: dict[tuple[str, int], int] = {}
        ends: dict[tuple[str, int], int] = {}
        self.session.begin()
        self._records.clear()
        self._events.clear()
        for msg in msgs:
            where = (msg.topic() or "", msg.partition() or 0)
            starts.setdefault(where, msg.offset() or 0)
            ends[where] = (msg.offset() or 0) + 1
            self._route(msg, now)
        offsets = [TopicPartition(t, p, o) for (t, p), o in ends.items()]
        outcome = self.session.commit(offsets, self.consumer.consumer_group_metadata())
        if outcome is Outcome.committed:
            self.metrics.committed(self._records, self._events)
        else:
            self.stats.aborts += 1
            self.metrics.aborts.inc()
            log.warning("ingress transaction %s: reading the batch again", outcome.value)
            for (t, p), o in starts.items():
                self.consumer.seek(TopicPartition(t, p, o))

    def _assigned(self, consumer: ConsumerLike, partitions: list[TopicPartition]) -> None:
        """The event sources start at their end where this group has no offset yet."""
        sources = [tp for tp in partitions if tp.topic in self.events.sources]
        fresh: set[tuple[str, int]] = set()
        if sources:  # through a broker's passing trouble, as the runtime reads its offsets
            committed = retrying(lambda: consumer.committed(sources, timeout=30), "offsets")
            fresh = {(tp.topic, tp.partition) for tp in committed if tp.offset < 0}
        for tp in partitions:
            if (tp.topic, tp.partition) in fresh:
                tp.offset = OFFSET_END
        consumer.assign(partitions)
        log.info("ingress assigned %d partitions", len(partitions))

    def _route(self, msg: MessageLike, now: int) -> None:
        self.stats.records += 1
        record = record_of(msg, now)
        if record.topic in self.events.sources:
            self._tell(record)
            return
        outs = self.router.route(record, now)
        named = ingress_tenant(self.settings.namespace, record.topic)
        refused = any(out.topic == self.topics.rejected for out in outs)
        self._records[named[0] if named else "", REJECTED if refused else ACCEPTED] += 1
        for out in outs:
            if out.topic == self.topics.rejected:
                self.stats.rejected += 1
            else:
                self.stats.routed += 1
            self.session.produce(out.topic, out.partition, out.key, out.value, out.headers)

    def _tell(self, record: InputRecord) -> None:
        event = self.events.of(record)
        if event is None:
            return
        if event.tenant not in self._known:
            now = self.clock.now_ms()
            if self._unmade.get(event.tenant, 0) > now:  # refused lately: not asked again yet
                self.stats.untold += 1
                self._events[UNTOLD] += 1
                return
            try:
                provision_events(self.settings, event.tenant)
            except (KadenceError, KafkaException) as exc:  # told in the log, never a stop
                log.error(
                    "tenant %s: no events topic, its events not told for %d s: %s",
                    event.tenant,
                    UNMADE_RETRY_MS // 1000,
                    exc,
                )
                self.stats.untold += 1
                self._events[UNTOLD] += 1
                if len(self._unmade) >= UNMADE_KEPT:
                    self._unmade = {t: u for t, u in self._unmade.items() if u > now}
                self._unmade[event.tenant] = now + UNMADE_RETRY_MS
                return
            self._known.add(event.tenant)
        topic = events_topic(self.settings.namespace, event.tenant)
        self.session.produce(topic, None, event.key, event.value, [])
        self.stats.told += 1
        self._events[TOLD] += 1


def admission(settings: KadenceSettings, codec: Codec) -> Admission:
    """The API's quotas, and deletes placed by the query view's answers (streams/ingress/)."""
    return Admission(
        settings.namespace,
        codec,
        IngressQuotas(Quotas.of(settings)),
        Placement(settings.partitions),
        ViewLookup(settings.view_url, settings.view_token.get_secret_value()),
    )


def wire(settings: KadenceSettings, clients: Clients, clock: Clock) -> IngressLoop:
    return IngressLoop(settings, clients, clock)
