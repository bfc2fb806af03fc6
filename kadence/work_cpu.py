"""Where a process's loop spends its CPU, by kind of work: `kadence_work_cpu_seconds_total{work}`.

The loop says what it starts doing at its boundaries (`switch`: a run of one input topic's
records, the timers, the commit); a switch to another kind reads the thread's CPU clock once
and charges what the thread used since the previous switch to the kind it leaves, so every
nanosecond of the loop thread is charged to one kind. A switch to the kind already under way
costs no clock read: a loop may say it per record. The clock is `time.thread_time_ns`, a
system call, which is why it is read per kind and not per record: on a 2-vCPU AMD EPYC VM a
switch costs 0.73-0.76 µs of CPU with the read and 0.04 µs without, and B2's shape on the
driver made 0.19-0.21 reads and 2.1-2.3 calls per execution (`python -m bench.loop_accounting`).

Only the loop's thread is counted: librdkafka's threads (fetching, compressing, sending), the
metrics server and a worker's invocation pool are in the process's CPU, not here. A kind's
last stretch is charged at the next switch (each turn switches at least once).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

OTHER = "other"
"""The label of an input topic the loop was not configured with (none, normally)."""


def topic_work(topic: str) -> str:
    """The kind of work of processing a topic's records: its name's last part (the
    `<namespace>.outcomes` topic: `outcomes`)."""
    return topic.rsplit(".", 1)[-1]


class WorkCpu(Collector):
    """CPU seconds of the thread that calls `switch` (the loop's, and only it), by kind."""

    def __init__(self, topics: Iterable[str] = ()) -> None:
        self.topics = {t: topic_work(t) for t in topics}
        """Input topic -> its kind (`topic`): a bounded set of labels."""
        self.current: str | None = None
        """The kind under way; None until the first switch (nothing is charged before)."""
        self._since = 0
        self._ns: dict[str, int] = {}

    def switch(self, work: str) -> None:
        """From now on the loop does `work`: charge the time since the last switch to the kind
        it was doing (nothing when it is the same kind)."""
        if work == self.current:
            return
        now = time.thread_time_ns()
        if self.current is not None:
            self._ns[self.current] = self._ns.get(self.current, 0) + now - self._since
        self.current, self._since = work, now

    @contextmanager
    def during(self, work: str) -> Iterator[None]:
        """Do `work` within another kind (a commit in the middle of a batch), then go back to
        that kind."""
        before = self.current
        self.switch(work)
        try:
            yield
        finally:
            if before is not None:
                self.switch(before)

    def topic(self, topic: str) -> None:
        """From now on the loop processes `topic`'s records."""
        self.switch(self.topics.get(topic, OTHER))

    def seconds(self) -> dict[str, float]:
        """CPU seconds charged so far, by kind (a copy: another thread may read it)."""
        return {work: ns / 1e9 for work, ns in list(self._ns.items())}

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "kadence_work_cpu_seconds",
            "CPU time of the process's loop thread, by kind of work",
            labels=["work"],
        )
        for work, seconds in sorted(self.seconds().items()):
            family.add_metric([work], seconds)
        yield family
