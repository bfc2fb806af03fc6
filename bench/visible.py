"""When a tenant sees a run: a read_committed consumer of the tenant topics, stamping each
record as it arrives (the benchmarks' "visible" time: the record readable on the tenant's topic,
what a consumer of a Kafka-topic target experiences)."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from datetime import datetime
from typing import Any

from confluent_kafka import Consumer, Message

from kadence.headers import ATTEMPT, DUE_AT, EXECUTION_ID
from kadence.settings import KadenceSettings


class Watcher:
    """Subscribes to every `<namespace>.to.*.<topic>` (new topics are found within a second)
    and keeps, per execution id, when its first record arrived; counts every record. Reads the
    Kadence headers only (decoding each record would take the CPU being measured)."""

    def __init__(self, settings: KadenceSettings, topic: str, consumer: Any = None) -> None:
        pattern = f"^{settings.namespace.replace('.', '[.]')}[.]to[.].*[.]{topic}$"
        self.consumer = consumer or Consumer(
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

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            # `consume(n, timeout)` returns only once n records came or the timeout passed: a
            # record would be stamped up to that timeout after it arrived. Wait for one, then
            # take what else is there without waiting.
            first = self.consumer.poll(0.2)
            if first is None:
                continue
            batch = [first, *self.consumer.consume(num_messages=5_000, timeout=0)]
            now = time.time()
            for m in batch:
                if m.error() is not None:
                    continue
                h = _headers(m)
                eid = h[EXECUTION_ID]
                if eid not in self.due:
                    due = datetime.fromisoformat(h[DUE_AT].replace("Z", "+00:00"))
                    self.first[eid] = now
                    self.due[eid] = due.timestamp()
                self.records[(eid, int(h[ATTEMPT]))] += 1

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


def _headers(m: Message) -> dict[str, str]:
    raw = m.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    return {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in pairs if v is not None}
