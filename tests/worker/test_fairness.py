"""Tenant fairness in the worker's inbox: weighted deficit round robin over the tenants' due
executions, with a per-tenant running cap (by default half the slots); a flood never starves a
small tenant, not even one whose runs hang."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.processes import settings_env
from kadence.settings import KadenceSettings
from streams.worker.fairness import Fairness, default_max_running
from streams.worker.inbox import Inbox
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


def hanging_turns(fairness: Fairness, slots: int, turns: int) -> Counter[str]:
    """The worker loop's claims (loop.Worker.turn: free slots, runs per tenant) when no run
    ever finishes: tenant `flood` has 1 000 executions due at T, `small` one due a minute later.
    What each tenant holds at the end."""
    inbox = Inbox(fairness)
    for n in range(1_000):
        inbox.add(0, n, tenant_ex("flood", n))
    inbox.add(0, 1_000, tenant_ex("small", 0, due_s=60))
    running: Counter[str] = Counter()
    for turn in range(turns):
        now = T_MS + turn * 1_000
        for item in inbox.due(now, slots - sum(running.values()), running):
            running[item.execution.tenant] += 1
    return running


def test_by_default_a_tenant_with_hanging_runs_leaves_slots_to_the_others() -> None:
    settings = KadenceSettings(worker_concurrency=8)  # the cap is not configured
    held = hanging_turns(Fairness.of(settings), 8, turns=120)
    assert held == {"flood": 4, "small": 1}  # without a default cap: {"flood": 8}


def test_without_a_cap_hanging_runs_take_every_slot() -> None:
    """What 0 (explicitly no cap) means, and what the default was before."""
    settings = KadenceSettings(worker_concurrency=8, worker_tenant_max_running=0)
    assert hanging_turns(Fairness.of(settings), 8, turns=120) == {"flood": 8}


def test_the_default_cap_is_a_share_of_the_slots_and_an_explicit_number_wins() -> None:
    def cap(**kw: object) -> int:
        return default_max_running(KadenceSettings.model_validate(kw))

    assert cap() == 32  # 64 slots
    assert cap(worker_concurrency=8) == 4
    assert cap(worker_concurrency=3) == 1
    assert cap(worker_concurrency=2) == 1
    assert cap(worker_concurrency=1) == 0  # one slot: nothing to keep (0 = the whole worker)
    assert cap(worker_concurrency=10, worker_tenant_max_share=0.3) == 3
    assert cap(worker_concurrency=10, worker_tenant_max_share=0.01) == 1
    assert cap(worker_concurrency=10, worker_tenant_max_share=1) == 0
    assert cap(worker_concurrency=10, worker_tenant_max_running=7) == 7
    assert cap(worker_concurrency=10, worker_tenant_max_running=0) == 0


def test_a_tenant_named_in_the_overrides_gets_its_own_cap() -> None:
    settings = KadenceSettings(
        worker_concurrency=8, worker_tenant_max_running_by_tenant={"flood": 2, "big": 0}
    )
    fairness = Fairness.of(settings)
    assert (fairness.cap("flood"), fairness.cap("big"), fairness.cap("other")) == (2, 0, 4)
    assert hanging_turns(fairness, 8, turns=120) == {"flood": 2, "small": 1}


def test_a_child_process_gets_the_same_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Processes pass their settings to children through the environment: unset stays unset
    (the share applies), and overrides keep their tenants."""
    for parent in (
        KadenceSettings(),
        KadenceSettings(worker_tenant_max_running=0),
        KadenceSettings(worker_tenant_max_running=3, worker_tenant_max_running_by_tenant={"a": 1}),
    ):
        for name, value in settings_env(parent).items():
            if name.startswith("KADENCE_WORKER_TENANT"):
                monkeypatch.setenv(name, value)
        child = KadenceSettings()
        assert Fairness.of(child) == Fairness.of(parent)


def test_runs_that_need_no_slot_pass_the_slots_and_the_cap_but_not_the_room() -> None:
    """A Kafka produce awaiting its ack holds no thread: the slots and a tenant's cap bound
    only runs on the pool, while `room` (what the lease snapshot can list) bounds them all."""
    inbox = Inbox(Fairness(max_running=1))
    flooded(inbox, flood=50, small=2)
    slotless = lambda item: item.execution.tenant == "flood"  # noqa: E731
    got = inbox.due(T_MS, 1, running={"small0": 0}, room=30, slotless=slotless)
    by_tenant = Counter(i.execution.tenant for i in got)
    assert by_tenant == {"flood": 29, "small0": 1}  # one slot for a small one, room 30 in all
    assert inbox.due(T_MS, 0, room=0, slotless=slotless) == []  # no room: nothing more
    rest = inbox.due(T_MS, 0, room=100, slotless=slotless)  # no slot: the pooled one waits
    assert Counter(i.execution.tenant for i in rest) == {"flood": 21}
    assert [i.execution.tenant for i in inbox.due(T_MS, 1, room=100)] == ["small1"]


def test_a_claim_ahead_starting_takes_a_slot_but_no_room() -> None:
    """An execution claimed ahead is held already: starting it needs no room, only (if its run
    needs a thread) a slot."""
    inbox = Inbox()
    for n in range(3):
        inbox.add(0, n, tenant_ex("a", n))
    for item in inbox.upcoming(T_MS, 2, lambda _item: True):
        inbox.claim(item)
    assert [i.offset for i in inbox.due(T_MS, 2, room=0)] == [0, 1]  # the two claimed
    assert inbox.due(T_MS, 2, room=0) == []  # the unclaimed one needs room
    assert [i.offset for i in inbox.due(T_MS, 0, room=1, slotless=lambda _i: True)] == [2]


def test_runs_without_a_thread_stop_at_the_async_bound_and_a_tenant_at_its_share() -> None:
    """HTTP runs on the event loop take no slot, but `worker_async_max_in_flight` bounds them
    (`loose`: how many may still start, and each tenant's in flight), a tenant at most its
    share of it (`async_cap`); past either they wait in the inbox, not lost."""
    inbox = Inbox(Fairness(async_cap=10))
    flooded(inbox, flood=50, small=2)
    every = lambda _item: True  # noqa: E731
    got = inbox.due(T_MS, 0, room=1_000, slotless=every, loose=(12, {}))
    assert Counter(i.execution.tenant for i in got) == {"flood": 10, "small0": 1, "small1": 1}
    assert inbox.due(T_MS, 0, room=1_000, slotless=every, loose=(100, {"flood": 10})) == []
    more = inbox.due(T_MS, 0, room=1_000, slotless=every, loose=(100, {"flood": 5}))
    assert len(more) == 5
    assert inbox.due(T_MS, 0, room=1_000, slotless=every, loose=(0, {})) == []
    assert len(inbox.due(T_MS, 0, room=1_000, slotless=every, loose=(3, {}))) == 3
    assert len(inbox.due(T_MS, 0, room=1_000, slotless=every, loose=(1_000, {}))) == 10
    rest = [inbox.due(T_MS, 0, room=1_000, slotless=every, loose=(1_000, {})) for _ in range(3)]
    assert [len(r) for r in rest] == [10, 10, 2]  # every one of the 50 came out once


def test_the_async_cap_is_the_tenant_share_of_the_bound() -> None:
    settings = KadenceSettings(worker_async_max_in_flight=1_000)
    assert Fairness.of(settings).async_cap == 500
    assert Fairness.of(settings.model_copy(update={"worker_tenant_max_share": 1.0})).async_cap == 0
