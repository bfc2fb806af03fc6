"""What `Inbox.shed` lets go: only the held executions of tenants at their cap past their quota,
the earliest due kept, as a scan of every held execution chooses them; and a full inbox of runs
that can always start (leaseless: a Kafka target's) is not looked at item by item."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from kadence.models import ExecutionRequested
from streams.worker.fairness import Fairness
from streams.worker.inbox import Inbox
from streams.worker.item import Item
from tests.worker.test_backlog import CODEC, T_MS, ex

TENANTS = ("a", "b", "c")


def scan_shed(inbox: Inbox) -> int:
    """The rule as a scan of every held execution (what `shed` did before it looked only at
    the tenants that can lose any)."""
    stuck: dict[str, list[Item]] = {}
    for items in inbox._open.values():
        for item in items.values():
            if item.held and inbox.stuck(item):
                stuck.setdefault(item.execution.tenant, []).append(item)
    shed = 0
    for tenant, found in stuck.items():
        found.sort(key=lambda i: (i.due_ms, i.partition, i.offset))
        for item in found[inbox.quota(tenant) :]:
            inbox._unkeep(item)
            inbox._close(item)
            inbox.owed.add(item.partition, item.offset, tenant)
            shed += 1
    if shed:
        inbox._purge()
    return shed


def filled(
    held: list[tuple[int, int, bool, int]],
    caps: Mapping[str, int],
    busy: Mapping[str, int],
    flying: Mapping[str, int],
    async_cap: int,
) -> Inbox:
    """An inbox holding (tenant index, due second, leaseless, partition) executions, told by a
    `due` before any is due that the tenants' runs take `busy` slots and `flying` runs without
    a thread (those of tenant "c" need none)."""
    inbox = Inbox(Fairness(max_running=0, caps=dict(caps), async_cap=async_cap))
    offsets: dict[int, int] = {}
    for n, (tenant, due_s, leaseless, partition) in enumerate(held):
        execution: ExecutionRequested = ex(TENANTS[tenant], n, due_s=60 + due_s)
        offset = offsets[partition] = offsets.get(partition, -1) + 1
        inbox.add(partition, offset, execution, CODEC.encode(execution), leaseless=leaseless)

    def slotless(item: Item) -> bool:
        return item.execution.tenant == "c"

    got = inbox.due(T_MS, 0, busy, slotless=slotless, loose=(0, flying))
    assert got == []  # nothing is due yet: `due` only told it who runs what
    return inbox


def owed(inbox: Inbox) -> set[tuple[int, int]]:
    return {
        (p, o)
        for p, runs in inbox.owed.runs.items()
        for start, n in runs.runs()
        for o in range(start, start + n)
    }


@settings(max_examples=150, deadline=None)
@given(
    held=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 5), st.booleans(), st.integers(0, 1)),
        max_size=40,
    ),
    caps=st.dictionaries(st.sampled_from(TENANTS), st.integers(0, 3)),
    busy=st.dictionaries(st.sampled_from(TENANTS), st.integers(0, 4)),
    flying=st.dictionaries(st.sampled_from(TENANTS), st.integers(0, 4)),
    async_cap=st.integers(0, 3),
)
def test_shed_lets_go_what_a_scan_of_every_held_execution_lets_go(
    held: list[tuple[int, int, bool, int]],
    caps: dict[str, int],
    busy: dict[str, int],
    flying: dict[str, int],
    async_cap: int,
) -> None:
    inbox = filled(held, caps, busy, flying, async_cap)
    reference = copy.deepcopy(inbox)
    assert inbox.shed() == scan_shed(reference)
    assert inbox._by_tenant == reference._by_tenant
    assert inbox.count == reference.count and inbox.size == reference.size
    assert owed(inbox) == owed(reference)
    kept = {(p, o) for p, items in inbox._open.items() for o in items}
    assert kept == {(p, o) for p, items in reference._open.items() for o in items}


def test_a_tenant_at_its_cap_past_its_quota_still_loses_its_latest() -> None:
    inbox = filled([(0, n, False, 0) for n in range(10)], {"a": 2}, {"a": 2}, {}, 0)
    assert inbox.shed() == 6  # twice its cap kept: the four due first
    assert inbox._by_tenant == {"a": 4}
    assert owed(inbox) == {(0, o) for o in range(4, 10)}


def test_a_full_inbox_of_runs_that_can_always_start_is_not_looked_at_run_by_run() -> None:
    """Leaseless runs take no slot, so their tenants are never at their cap."""
    inbox = filled([(n % 3, n % 5, True, n % 2) for n in range(60)], {"a": 1}, {}, {}, 0)
    looked: list[Item] = []
    stuck = inbox.stuck

    def counted(item: Item) -> bool:
        looked.append(item)
        return stuck(item)

    inbox.stuck = counted  # type: ignore[method-assign]
    assert inbox.shed() == 0
    assert looked == [] and inbox.count == 60
