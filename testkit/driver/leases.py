"""The leases topic read as lease events, whatever the workers wrote: tests of claims, renewals
and releases then hold for both lease formats.

A snapshot stands for an `acquired` of each execution it lists first, a `renewed` of each one
it lists again, and a `released` of each one its worker's previous snapshot listed and it does
not (a lease lost is never released: its worker stops listing it, so the reaper redelivers it
from the last snapshot that did, and this reads it as released too; tests of a lost lease
look at `snapshots` instead).
"""

from __future__ import annotations

from kadence.batches import executions_in
from kadence.clock import datetime_to_ms
from kadence.codec import Codec
from kadence.models import ExecutionRequested, LeaseEvent, LeaseEventKind, LeaseSnapshot
from kadence.topics import EXECUTIONS, LEASES, Topics
from testkit.driver.cluster import Cluster

LeaseFact = tuple[LeaseEventKind, str, int]
"""(kind, execution id, delivery)."""


def snapshots(cluster: Cluster, topics: Topics) -> list[LeaseSnapshot]:
    codec = Codec()
    found = [LEASES.decode(codec, m.value()) for m in cluster.messages(topics.leases)]
    return sorted((r for r in found if isinstance(r, LeaseSnapshot)), key=lambda s: s.at)


def lease_facts(cluster: Cluster, topics: Topics) -> list[LeaseFact]:
    """Every lease event, or what the snapshots stand for, in time order."""
    codec = Codec()
    refs: dict[tuple[int, int], list[ExecutionRequested]] = {}
    for m in cluster.messages(topics.executions):
        found = executions_in(codec, EXECUTIONS.decode(codec, m.value()))
        if found:  # a batch's executions are held by one reference, its offset
            refs[(m.partition() or 0, m.offset() or 0)] = found
    timed: list[tuple[int, LeaseFact]] = []
    previous: dict[str, set[tuple[int, int]]] = {}
    for m in cluster.messages(topics.leases):
        record = LEASES.decode(codec, m.value())
        assert isinstance(record, LeaseEvent | LeaseSnapshot)
        at = datetime_to_ms(record.at)
        if isinstance(record, LeaseEvent):
            timed.append((at, (record.event, record.execution_id, record.delivery)))
            continue
        held = {(r.partition, o) for r in record.held for o in range(r.start, r.start + r.count)}
        before = previous.get(record.key, set())
        previous[record.key] = held
        for ref in sorted(held | before):
            kind = (
                LeaseEventKind.released
                if ref not in held
                else LeaseEventKind.renewed
                if ref in before
                else LeaseEventKind.acquired
            )
            timed += [(at, (kind, ex.execution_id, ex.delivery)) for ex in refs[ref]]
    return [fact for _, fact in sorted(timed, key=lambda t: t[0])]
