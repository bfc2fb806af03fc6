"""Consumer groups of the in-memory cluster: members, generations, assignments, offsets.

A rebalance completes at once on the cluster: the generation moves on and every member's new
share is computed. Each member learns of it in its next `consume()`, where its on_revoke and
on_assign callbacks run (eager protocol: everything it held is revoked, then its new share is
assigned), as librdkafka serves them. Until then it still carries the old generation, and a
transaction that sends offsets with it is refused: that is the zombie KIP-447 fences.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """What `consumer_group_metadata()` hands to `send_offsets_to_transaction`."""

    group_id: str
    generation: int
    member_id: str


@dataclass
class Member:
    member_id: str
    client_id: str
    topics: list[str]
    joined: int
    """Join order: members sort by client id, then by this (a stand-in for Kafka's member id
    order, predictable in a test)."""


@dataclass
class Group:
    name: str
    generation: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    assignment: dict[str, list[TP]] = field(default_factory=dict)
    offsets: dict[TP, tuple[int, str | None]] = field(default_factory=dict)
    """Committed offsets with their metadata."""
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def join(self, client_id: str, topics: list[str], partitions: Callable[[str], int]) -> str:
        n = next(self._ids)
        member_id = f"{client_id}-{n}"
        self.members[member_id] = Member(member_id, client_id, list(topics), n)
        self.rebalance(partitions)
        return member_id

    def leave(self, member_id: str, partitions: Callable[[str], int]) -> None:
        if self.members.pop(member_id, None) is not None:
            self.rebalance(partitions)

    def member_of(self, client_id: str) -> str:
        for member in self.members.values():
            if member.client_id == client_id:
                return member.member_id
        raise KeyError(f"{client_id!r} is not a member of group {self.name!r}")

    def rebalance(self, partitions: Callable[[str], int]) -> None:
        """A new generation; the range strategy's assignment: per topic, contiguous ranges of
        partitions to the members in order, so equal partition counts are co-partitioned."""
        self.generation += 1
        order = sorted(self.members.values(), key=lambda m: (m.client_id, m.joined))
        self.assignment = {m.member_id: [] for m in order}
        topics = sorted({t for m in order for t in m.topics})
        for topic in topics:
            subscribed = [m for m in order if topic in m.topics]
            count = partitions(topic)
            share, extra = divmod(count, len(subscribed))
            start = 0
            for i, member in enumerate(subscribed):
                size = share + (1 if i < extra else 0)
                self.assignment[member.member_id] += [
                    (topic, p) for p in range(start, start + size)
                ]
                start += size

    def accepts(self, metadata: GroupMetadata) -> bool:
        """Offsets sent with this metadata may commit: a current member of the current
        generation, or a consumer outside any group (generation -1, no fencing)."""
        if metadata.generation < 0:
            return True
        return metadata.generation == self.generation and metadata.member_id in self.members
