"""Executions a worker read and let go without claiming them, to read again later (`backlog`).

Per partition, their offsets as runs: the offset commit never passes one (`Inbox.offsets` lists
them with the held ones), and the re-read takes only them. A revocation read in a partition
that owes an earlier offset is owed too: the re-read must meet it after the execution it
revokes (both are on the same partition, in that order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streams.worker.offsets import HeldRuns


@dataclass
class Owed:
    runs: dict[int, HeldRuns] = field(default_factory=dict)
    """partition -> offsets read and let go."""
    tenants: dict[int, set[str]] = field(default_factory=dict)
    """partition -> tenants with executions among them."""
    rereading: dict[int, set[str]] = field(default_factory=dict)
    """partition -> the tenants it owed when the worker began reading it again."""
    abandoned: set[int] = field(default_factory=set)
    """Partitions whose reading again stops (`Inbox.abandon`): nobody owed wants more now."""

    def add(self, partition: int, offset: int, tenant: str) -> None:
        self.runs.setdefault(partition, HeldRuns()).add(offset)
        self.tenants.setdefault(partition, set()).add(tenant)

    def before(self, partition: int, offset: int) -> bool:
        """Whether `partition` owes an offset before `offset`."""
        runs = self.runs.get(partition)
        return runs is not None and bool(runs.starts) and runs.starts[0] < offset

    def count(self, partition: int) -> int:
        runs = self.runs.get(partition)
        return sum(n for _start, n in runs.runs()) if runs is not None else 0

    def take(self, partition: int) -> list[int]:
        """Every offset `partition` owes, sorted, to read again; it owes none after this."""
        tenants = self.tenants.pop(partition, set())
        runs = self.runs.pop(partition, None)
        if runs is None:
            return []
        self.rereading[partition] = tenants
        return [o for start, n in runs.runs() for o in range(start, start + n)]

    def restore(self, partition: int, offsets: frozenset[int], after: int) -> None:
        """Reading `partition` again stopped at `after`: it owes the offsets past it still."""
        tenants = self.rereading.pop(partition, set())
        self.abandoned.discard(partition)
        left = sorted(o for o in offsets if o >= after)
        for o in left:
            self.runs.setdefault(partition, HeldRuns()).add(o)
        if left:
            self.tenants.setdefault(partition, set()).update(tenants)

    def forget(self, partition: int) -> None:
        self.runs.pop(partition, None)
        self.tenants.pop(partition, None)
        self.rereading.pop(partition, None)
        self.abandoned.discard(partition)

    def __len__(self) -> int:
        return sum(self.count(p) for p in self.runs)
