"""When a tenant sees a run: a read_committed consumer of the tenant topics, stamping each
record as it arrives (the benchmarks' "visible" time: the record readable on the tenant's topic,
what a consumer of a Kafka-topic target experiences).

The consumer runs in a process of its own (`Watcher`), not a thread of the benchmark: the
benchmark's main thread reads and keeps every outcome (millions over a long run), and each of
its full collections held the GIL for as long as it walked them (0.5 s by the end of a 60 s run
at 8 000/s, measured with a `gc.callbacks` probe), so a thread stamping records waited that long
and put the benchmark's own pause into "visible" lateness. The process keeps only strings and
floats, which the collector does not track.
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
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import Consumer

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

    def take(self, batch: list[Any], now: float) -> None:
        dues = self._dues
        for m in batch:
            if m.error() is not None:
                continue
            h = dict(m.headers() or ())  # only the three it needs are decoded
            eid = h[EXECUTION_ID].decode()
            if eid not in self.seen:
                raw = h[DUE_AT]
                due = dues.get(raw)
                if due is None:  # the runs of one second share their due time
                    due = dues[raw] = datetime.fromisoformat(raw.decode()).timestamp()
                self.seen[eid] = now - due
            attempt = f"{eid}#{h[ATTEMPT].decode()}"
            if attempt in self._attempts:
                self.duplicates += 1
            else:
                self._attempts.add(attempt)


class Setting(Protocol):
    def set(self) -> None: ...


def watch(consumer: Any, stop: Stopping, stamps: Stamps, reading: Setting | None = None) -> None:
    """Stamp what `consumer` reads until `stop` is set; `reading` is set at the first record."""
    while not stop.is_set():
        # `consume(n, timeout)` returns only once n records came or the timeout passed: a
        # record would be stamped up to that timeout after it arrived. Wait for one, then take
        # what else is there without waiting.
        first = consumer.poll(0.2)
        if first is None:
            continue
        batch = [first, *consumer.consume(num_messages=5_000, timeout=0)]
        stamps.take(batch, time.time())
        if reading is not None:
            reading.set()


def consumer_of(settings: KadenceSettings, topic: str) -> Consumer:
    """A read_committed consumer of every `<namespace>.to.*.<topic>` (new topics are found
    within a second)."""
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
    consumer = consumer_of(KadenceSettings(), topic)
    stamps = Stamps()
    print(READY, flush=True)
    try:
        watch(consumer, stop, stamps, SayOnce(READING))
    finally:
        consumer.close()
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
            self._child.stop()
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
