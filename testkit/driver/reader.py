"""The reaper's `ExecutionReader` on the in-memory cluster: committed records straight from the
log (what a read_committed consumer would find there, without one)."""

from __future__ import annotations

from collections.abc import Sequence

from testkit.driver.cluster import Cluster


class LogReader:
    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.reads: list[list[tuple[int, int]]] = []
        """Every batch of refs asked for, in order (a test can count them)."""

    def read(self, refs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes | None]:
        self.reads.append(list(refs))
        found: dict[tuple[int, int], bytes | None] = {}
        with self.cluster.lock:
            for p, o in refs:
                log = self.cluster.log(self.topic, p)
                if o >= log.last_stable():
                    continue  # not readable yet: no answer (ExecutionReader.read)
                found[(p, o)] = None
                if o < log.low:
                    continue
                entries, _ = log.read(o, 1, committed_only=True)
                if entries and entries[0].offset == o:
                    found[(p, o)] = entries[0].value
        return found
