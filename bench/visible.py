"""When a tenant sees a run: a read_committed consumer of the tenant topics, stamping each
record as it arrives (the benchmarks' "visible" time: the record readable on the tenant's topic,
what a consumer of a Kafka-topic target experiences)."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

from confluent_kafka import Consumer

from kadence.codec import Codec
from kadence.models import ExecutionRequested
from kadence.settings import KadenceSettings


class Watcher:
    """Subscribes to every `<namespace>.to.*.<topic>` (new topics are found within a second)
    and keeps, per execution id, when its first record arrived; counts every record."""

    def __init__(self, settings: KadenceSettings, topic: str) -> None:
        pattern = f"^{settings.namespace.replace('.', '[.]')}[.]to[.].*[.]{topic}$"
        self.consumer = Consumer(
            {
                "bootstrap.servers": settings.bootstrap_servers,
                "group.id": f"bench-visible-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 1_000,
            }
        )
        self.consumer.subscribe([pattern])
        self.first: dict[str, float] = {}
        """execution id -> when its record was first read (time.time())."""
        self.due: dict[str, float] = {}
        self.records: Counter[tuple[str, int]] = Counter()
        """(execution id, attempt) -> records read."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="visible", daemon=True)
        self.codec = Codec()

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for m in self.consumer.consume(num_messages=5_000, timeout=0.2):
                if m.error() is not None:
                    continue
                now = time.time()
                ex = self.codec.decode(m.value())
                if isinstance(ex, ExecutionRequested):
                    self.first.setdefault(ex.execution_id, now)
                    self.due.setdefault(ex.execution_id, ex.due_at.timestamp())
                    self.records[(ex.execution_id, ex.attempt)] += 1

    def stop(self, settle_s: float = 2.0) -> None:
        time.sleep(settle_s)  # late duplicates
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()

    def lateness(self) -> list[float]:
        """Per execution: its record first readable minus its due time (s)."""
        return [t - self.due[e] for e, t in self.first.items()]

    def duplicates(self) -> int:
        """Records read beyond the first of one attempt."""
        return sum(n - 1 for n in self.records.values())
