"""bench.visible stamps a tenant record when it arrives, not when a batch read of it ends:
librdkafka's `consume(n, timeout)` returns only once n records came or the timeout passed
(checked against the broker: one waiting record, `consume(5000, 1.0)` returned after 1.0 s),
which put up to 0.2 s of the benchmark's own waiting into every "visible" figure before."""

from __future__ import annotations

import threading
import time
from collections import deque

from bench.visible import Watcher
from kadence.headers import ATTEMPT, DUE_AT, EXECUTION_ID
from kadence.settings import KadenceSettings


class Record:
    def __init__(self, execution_id: str) -> None:
        self._headers = [
            (EXECUTION_ID, execution_id.encode()),
            (DUE_AT, b"2026-12-02T00:00:00.000Z"),
            (ATTEMPT, b"1"),
        ]

    def error(self) -> None:
        return None

    def headers(self) -> list[tuple[str, bytes]]:
        return self._headers


class BatchingConsumer:
    """As librdkafka: `poll` returns a waiting record at once; `consume(n, timeout)` waits for
    n records or the whole timeout."""

    def __init__(self) -> None:
        self.waiting: deque[Record] = deque()
        self.lock = threading.Lock()

    def arrive(self, record: Record) -> None:
        with self.lock:
            self.waiting.append(record)

    def _take(self, n: int) -> list[Record]:
        with self.lock:
            return [self.waiting.popleft() for _ in range(min(n, len(self.waiting)))]

    def poll(self, timeout: float) -> Record | None:
        end = time.monotonic() + timeout
        while True:
            got = self._take(1)
            if got or time.monotonic() >= end:
                return got[0] if got else None
            time.sleep(0.001)

    def consume(self, num_messages: int, timeout: float) -> list[Record]:
        end = time.monotonic() + timeout
        while len(self.waiting) < num_messages and time.monotonic() < end:
            time.sleep(0.001)
        return self._take(num_messages)

    def subscribe(self, topics: list[str]) -> None:
        self.topics = topics

    def close(self) -> None:
        pass


def test_a_record_is_stamped_as_it_arrives_not_after_a_batch_timeout() -> None:
    consumer = BatchingConsumer()
    watcher = Watcher(KadenceSettings(), "out", consumer=consumer).start()
    try:
        time.sleep(0.05)  # the watcher is waiting for records
        arrived = {}
        for i in range(3):
            arrived[f"t/j@{i}"] = time.time()
            consumer.arrive(Record(f"t/j@{i}"))
            time.sleep(0.3)  # past any batch timeout: each arrives alone
    finally:
        watcher.stop(settle_s=0)
    assert set(watcher.first) == set(arrived)
    for eid, at in arrived.items():
        assert 0 <= watcher.first[eid] - at < 0.1, (eid, watcher.first[eid] - at)
    assert watcher.duplicates() == 0
