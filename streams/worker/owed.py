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
        """Every offset `partition` owes, sorted; it owes none after this."""
        self.tenants.pop(partition, None)
        runs = self.runs.pop(partition, None)
        if runs is None:
            return []
        return [o for start, n in runs.runs() for o in range(start, start + n)]

    def forget(self, partition: int) -> None:
        self.runs.pop(partition, None)
        self.tenants.pop(partition, None)

    def __len__(self) -> int:
        return sum(self.count(p) for p in self.runs)
