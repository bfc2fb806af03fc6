"""The processor runtime's settings and counters (streams/runtime/loop.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PRODUCER_OPTIONS: dict[str, Any] = {
    "linger.ms": 100,  # records wait for the commit anyway, which sends at once
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 1_000_000,
    # the changelog's JSON state is ~14x smaller compressed: what the broker keeps and a
    # restore reads (librdkafka's threads compress, not the Python loop)
    "compression.type": "lz4",
}
"""The runtime's transactional producer (executions, history, changelog, ...)."""


@dataclass
class RunnerConfig:
    app: str
    instance_id: str
    input_topics: list[str]
    changelog_topic: str
    state_dir: Path | None
    """None keeps state in memory (tests); it is still changelogged and restored."""
    session_timeout_ms: int = 10_000
    window_ms: int = 60_000
    max_fires_per_turn: int = 5_000
    max_records_per_turn: int = 2_000
    idle_poll_s: float = 0.02
    commit_interval_ms: int = 100
    """An open transaction commits once it is this old (by the runner's clock): the longest a
    produced record waits to become visible, unless a processor asks to commit sooner."""
    commit_max_records: int = 1_000
    """... or once this many input records and timer firings went into it."""
    commit_max_output: int = 5_000
    """... or, at once, when it has produced this many records (changelog included), each
    record held to be coalesced counted as one though a group of them is written as one: so
    a transaction holds 5 000 runs at most, and a refill of many jobs reaches the workers in
    steps (docs/benchmarks-history.md, "Issue 44, seventeenth part": counting a group once
    made runs start 1.2-2.2 s late)."""
    replay_topics: tuple[str, ...] = ()
    """Inputs a processor may defer writes for (streams/runtime/deferred.py): read again from
    the partition's stored replay point after a restore or an abort; the processor must be
    `Replaying`. Empty: every step is written in its transaction."""
    write_behind_ms: int = 20_000
    """A deferred key is written once it has waited this long (bounds what a restore reads
    again: this many seconds of the replay topics)."""
    standby_partitions: int = 0
    """The changelog's partitions: a warm copy of each one this process does not own is kept
    (streams/runtime/standby.py); 0: none."""

    @property
    def client_id(self) -> str:
        """The consumer's client id and the producer's transactional id."""
        return f"{self.app}.{self.instance_id}"


@dataclass
class RunnerStats:
    turns: int = 0
    records: int = 0
    fires: int = 0
    aborts: int = 0
    failures: int = 0
    """Units of work (one input record, one timer, one maintenance step) that raised and were
    undone: the input was refused or the key quarantined, and the loop went on."""
    restores: list[Any] = field(default_factory=list)
