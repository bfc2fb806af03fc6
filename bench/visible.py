"""When a tenant sees a run: a read_committed consumer of the tenant topics, stamping each
record as it arrives (the benchmarks' "visible" time: the record readable on the tenant's topic,
what a consumer of a Kafka-topic target experiences).

The consumer runs in a process of its own (`Watcher`), not a thread of the benchmark: the
benchmark's main thread reads and keeps every outcome (millions over a long run), and each of
its full collections held the GIL for as long as it walked them (0.5 s by the end of a 60 s run
at 8 000/s, measured with a `gc.callbacks` probe), so a thread stamping records waited that long
and put the benchmark's own pause into "visible" lateness. The process keeps only strings and
floats, which the collector does not track.

While it watches, it notes only how far each partition had been read at each instant
(`Marks`: a batch's last offset per partition and when it was read); once stopped, it reads the
topics again from their start and gives each record the instant its offset was first read
(`restamp`). Reading each record's headers as it came (what `Stamps` needs) took 5-6 µs of CPU a
record, most of the watcher's, on the same two cores as the stack being measured (0.4 of a core
during a 100 000 burst); noting offsets takes well under one. The instants are the same.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from bisect import bisect_left
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from apps.processes import ChildProcess
from kadence.headers import ATTEMPT, DUE_AT, EXECUTION_ID
from kadence.settings import KadenceSettings

READY_S = 60.0
"""How long `Watcher.start` waits for the watching process to subscribe."""
READY = "visible watcher subscribed"
READING = "visible watcher reading"
"""What the watching process prints once subscribed, and at its first record."""


class Stopping(Protocol):
    def is_set(self) -> bool: ...


class Stamps:
    """Per execution id, how late its first record was read (the read instant minus its due
    time, s); and the records read beyond the first of an (execution, attempt)."""

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}
        self.duplicates = 0
        self._attempts: set[str] = set()
        self._dues: dict[bytes, float] = {}

    def take_one(self, headers: Iterable[tuple[str, bytes]] | None, now: float) -> None:
        """One record, by its headers, first read at `now`."""
        h = dict(headers or ())  # only the three it needs are decoded
        eid = h[EXECUTION_ID].decode()
        raw = h[DUE_AT]
        due = self._dues.get(raw)
        if due is None:  # the runs of one second share their due time
            due = self._dues[raw] = datetime.fromisoformat(raw.decode()).timestamp()
        first = self.seen.get(eid)
        if first is None or now - due < first:  # (restamped, partitions come in any order)
            self.seen[eid] = now - due
        attempt = f"{eid}#{h[ATTEMPT].decode()}"
        if attempt in self._attempts:
            self.duplicates += 1
        else:
            self._attempts.add(attempt)


class Marks:
    """How far each partition had been read, and when: per (topic, partition), the last offset
    of each batch read and the instant it was read. A partition is read in order, so a record
    was first read at the first instant whose offset is at or past its own (`when`)."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], tuple[list[int], list[float]]] = {}

    def take(self, batch: list[Any], now: float) -> None:
        last: dict[tuple[str, int], int] = {}
        for m in batch:
            if m.error() is None:
                last[(m.topic(), m.partition())] = m.offset()
        for tp, offset in last.items():
            marks = self.partitions.get(tp)
            if marks is None:
                marks = self.partitions[tp] = ([], [])
            if not marks[0] or offset > marks[0][-1]:  # (a rebalance may read some again)
                marks[0].append(offset)
                marks[1].append(now)

    def when(self, topic: str, partition: int, offset: int) -> float | None:
        """When the record at `offset` was first read; None if it was not read."""
        marks = self.partitions.get((topic, partition))
        if marks is None:
            return None
        i = bisect_left(marks[0], offset)
        return marks[1][i] if i < len(marks[0]) else None

    def ends(self) -> dict[tuple[str, int], int]:
        """The last offset read of each partition."""
        return {tp: offsets[-1] for tp, (offsets, _) in self.partitions.items()}


class Setting(Protocol):
    def set(self) -> None: ...


def watch(consumer: Any, stop: Stopping, marks: Marks, reading: Setting | None = None) -> None:
    """Mark what `consumer` reads until `stop` is set (`restamp` reads the records after);
    `reading` is set at the first record."""
    while not stop.is_set():
        # `consume(n, timeout)` returns only once n records came or the timeout passed: a
        # record would be stamped up to that timeout after it arrived. Wait for one, then take
        # what else is there without waiting.
        first = consumer.poll(0.2)
        if first is None:
            continue
        batch = [first, *consumer.consume(num_messages=5_000, timeout=0)]
        marks.take(batch, time.time())
        if reading is not None:
            reading.set()


RESTAMP_WAIT_S = 600.0
"""How long `Watcher.stop` waits for the process to read the topics again (about 8 s a
million records)."""
RESTAMP_QUIET_S = 30.0
"""How long `restamp` waits for a record before it gives up on the rest (and says so)."""


def restamp(consumer: Any, marks: Marks, stamps: Stamps, quiet_s: float = RESTAMP_QUIET_S) -> int:
    """Read every marked partition again from its start (`consumer`: assigned by this call) up
    to its last marked offset, giving each record the instant `marks` says it was first read.
    Returns the records stamped."""
    ends = marks.ends()
    if not ends:
        return 0
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for (t, p) in ends])
    left, stamped = dict(ends), 0
    last_read = time.monotonic()
    while left and time.monotonic() - last_read < quiet_s:
        batch = consumer.consume(num_messages=10_000, timeout=1.0)
        if batch:
            last_read = time.monotonic()
        for m in batch:
            if m.error() is not None:
                continue
            tp, offset = (m.topic(), m.partition()), m.offset()
            now = marks.when(tp[0], tp[1], offset)
            if now is not None:
                stamps.take_one(m.headers(), now)
                stamped += 1
            if tp in left and offset >= left[tp]:
                del left[tp]
    if left:
        print(f"visible watcher: {len(left)} partitions not read again to their end", flush=True)
    return stamped


def consumer_of(settings: KadenceSettings, topic: str, *, subscribe: bool = True) -> Consumer:
    """A read_committed consumer of every `<namespace>.to.*.<topic>` (new topics are found
    within a second); not subscribed: for `restamp` to assign."""
    pattern = f"^{settings.namespace.replace('.', '[.]')}[.]to[.].*[.]{topic}$"
    consumer = Consumer(
        {
            "bootstrap.servers": settings.bootstrap_servers,
            "group.id": f"bench-visible-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1_000,
        }
    )
    if subscribe:
        consumer.subscribe([pattern])
    return consumer


class SayOnce:
    """A `reading` for `watch` that prints its line the first time it is set."""

    def __init__(self, line: str) -> None:
        self.line, self.said = line, False

    def set(self) -> None:
        if not self.said:
            print(self.line, flush=True)
            self.said = True


def main() -> None:
    """`python -m bench.visible` (by `Watcher`): watches KADENCE_BENCH_VISIBLE_TOPIC until
    SIGTERM, then writes what it stamped to KADENCE_BENCH_VISIBLE_OUT (JSON: `seen`, the
    lateness by execution id, and `duplicates`)."""
    topic = os.environ["KADENCE_BENCH_VISIBLE_TOPIC"]
    out = Path(os.environ["KADENCE_BENCH_VISIBLE_OUT"])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    settings = KadenceSettings()
    consumer = consumer_of(settings, topic)
    marks, stamps = Marks(), Stamps()
    print(READY, flush=True)
    try:
        watch(consumer, stop, marks, SayOnce(READING))
    finally:
        consumer.close()
        again = consumer_of(settings, topic, subscribe=False)
        try:
            restamp(again, marks, stamps)
        finally:
            again.close()
        part = out.with_suffix(".part")
        with part.open("w") as f:
            json.dump({"seen": stamps.seen, "duplicates": stamps.duplicates}, f)
        part.replace(out)


class Watcher:
    """Stamps every record of `<namespace>.to.*.<topic>` from a process of its own
    (`python -m bench.visible`), from `start` to `stop`; then `seen` (execution id -> lateness
    of its first record, s) and `duplicates` hold what it read. Reads the Kadence headers only
    (decoding each record would take the CPU being measured)."""

    def __init__(self, settings: KadenceSettings, topic: str) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="kadence-bench-visible-"))
        self._out = self._folder / "stamps"
        self._child = ChildProcess(
            "bench.visible",
            settings,
            BENCH_VISIBLE_TOPIC=topic,
            BENCH_VISIBLE_OUT=str(self._out),
        )
        self.seen: dict[str, float] = {}
        self.duplicates = 0

    def start(self) -> Watcher:
        try:
            self._child.start().ready_when(READY, READY_S)
        except BaseException:
            self.close()
            raise
        return self

    def wait_reading(self, timeout_s: float) -> bool:
        """Whether a first record was read within `timeout_s` (the consumer has partitions)."""
        try:
            self._child.wait_for(READING, timeout_s)
        except (TimeoutError, RuntimeError):
            return False
        return True

    @property
    def pid(self) -> int | None:
        """The watching process (its CPU is the benchmark's, not the stack's)."""
        return None if self._child.proc is None else self._child.proc.pid

    def stop(self, settle_s: float = 2.0) -> None:
        time.sleep(settle_s)  # late duplicates
        try:
            self._child.stop(timeout=RESTAMP_WAIT_S)  # it reads the topics again first
            if not self._out.exists():
                code = None if self._child.proc is None else self._child.proc.returncode
                raise RuntimeError(f"the visible watcher wrote nothing (exit code {code})")
            with self._out.open() as f:
                got = json.load(f)
            self.seen, self.duplicates = got["seen"], got["duplicates"]
        finally:
            self.close()

    def close(self) -> None:
        """Stop the watching process (`stop` first keeps what it read) and remove its file."""
        self._child.stop()
        shutil.rmtree(self._folder, ignore_errors=True)

    def lateness(self) -> list[float]:
        """Per execution: its record first readable minus its due time (s)."""
        return list(self.seen.values())


if __name__ == "__main__":
    main()
