"""Tenant fairness in the worker's inbox: weighted deficit round robin over the tenants' due
executions, with a per-tenant running cap; a flood never starves a small tenant."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from kadence.worker.inbox import Fairness, Inbox
from tests.worker.test_inbox import T_MS, ex


def tenant_ex(tenant: str, n: int, due_s: int = 0):  # type: ignore[no-untyped-def]
    e = ex(n, due_s)
    return e.model_copy(
        update={
            "tenant": tenant,
            "execution_id": f"{tenant}/j{n}@x",
            "job_id": f"j{n}",
        }
    )


def flooded(inbox: Inbox, flood: int = 10_000, small: int = 3) -> None:
    """A flood tenant's executions first on the partition, then each small tenant's, all due
    at the same instant (the order a shared partition can deliver them in)."""
    offset = 0
    for n in range(flood):
        inbox.add(0, offset, tenant_ex("flood", n))
        offset += 1
    for t in range(small):
        inbox.add(0, offset, tenant_ex(f"small{t}", t))
        offset += 1


def test_a_small_tenant_behind_a_flood_goes_in_the_first_round() -> None:
    inbox = Inbox()
    flooded(inbox)
    first = [i.execution.tenant for i in inbox.due(T_MS, 4)]
    assert sorted(first) == ["flood", "small0", "small1", "small2"]
    assert len(inbox) == 10_000 - 1  # the rest of the flood still held, in order
    rest = inbox.due(T_MS, 100_000)
    assert {i.execution.tenant for i in rest} == {"flood"}
    assert [i.offset for i in rest] == sorted(i.offset for i in rest)  # oldest first


def test_weights_share_the_starts_in_proportion() -> None:
    inbox = Inbox(Fairness(weights={"gold": 3, "bronze": 0.5}))
    for n in range(600):
        for t in ("gold", "silver", "bronze"):
            inbox.add(0, n * 3 + ("gold", "silver", "bronze").index(t), tenant_ex(t, n))
    started = Counter(i.execution.tenant for i in inbox.due(T_MS, 450))
    assert started["gold"] == 6 * started["bronze"]
    assert started["silver"] == 2 * started["bronze"]


def test_the_running_cap_leaves_room_for_other_tenants() -> None:
    inbox = Inbox(Fairness(max_running=2))
    flooded(inbox, flood=100, small=1)
    first = inbox.due(T_MS, 10, running={"flood": 1})
    assert Counter(i.execution.tenant for i in first) == {"flood": 1, "small0": 1}
    assert inbox.due(T_MS, 10, running={"flood": 2}) == []  # capped, the small one is done
    assert len(inbox.due(T_MS, 10, running={"flood": 0})) == 2


def test_revoked_and_not_yet_due_executions_are_not_handed_out() -> None:
    inbox = Inbox()
    inbox.add(0, 0, tenant_ex("a", 1, due_s=0))
    inbox.add(0, 1, tenant_ex("a", 2, due_s=60))
    inbox.forget({0})  # the partition moved to another worker
    assert inbox.due(T_MS + 120_000, 10) == []
    assert inbox.next_due_ms() is None


@given(
    st.lists(st.tuples(st.sampled_from("abcde"), st.integers(0, 5)), min_size=1, max_size=200),
    st.integers(1, 20),
)
def test_every_due_execution_comes_out_once_and_none_early(
    adds: list[tuple[str, int]], batch: int
) -> None:
    inbox = Inbox(Fairness(weights={"a": 2.5, "b": 0.3}))
    for offset, (tenant, due_s) in enumerate(adds):
        inbox.add(0, offset, tenant_ex(tenant, offset, due_s))
    seen: list[int] = []
    for now_s in range(7):
        while out := inbox.due(T_MS + now_s * 1000, batch):
            assert all(i.due_ms <= T_MS + now_s * 1000 for i in out)
            seen += [i.offset for i in out]
    assert sorted(seen) == list(range(len(adds)))
    assert inbox.next_due_ms() is None


def test_fifo_serves_in_due_order_so_the_flood_goes_first() -> None:
    inbox = Inbox(Fairness(by_tenant=False))
    flooded(inbox, flood=100, small=2)
    assert {i.execution.tenant for i in inbox.due(T_MS, 100)} == {"flood"}
    assert [i.execution.tenant for i in inbox.due(T_MS, 100)] == ["small0", "small1"]
