"""What a worker may hold: whatever runs end, in whatever order, the rest fits in one lease
snapshot (MAX_HELD_RANGES ranges). `fit` admits claims while ranges + runs <= 2 x the limit,
so a burst on consecutive offsets holds nearly twice the limit and scattered runs the limit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kadence.targets import Stop
from streams.worker.active import ActiveRun, TxnWork
from streams.worker.holding import RangeCache, fit, fits, ranges
from streams.worker.inbox import Item
from tests.worker.test_inbox import ex

LIMIT = 6


def run_at(partition: int, offset: int) -> ActiveRun:
    return ActiveRun(Item(partition, offset, ex(partition * 1_000 + offset, 0), 0), Stop(), 0, 1, 1)


steps = st.lists(
    st.one_of(
        # claim: a burst of consecutive offsets of one partition, and some scattered ones
        st.tuples(
            st.just("claim"),
            st.integers(0, 2),
            st.tuples(st.integers(0, 40), st.integers(0, 20)),
            st.lists(st.integers(0, 60), max_size=10),
        ),
        # end: every run whose offset is a multiple of k, or one run
        st.tuples(st.just("end"), st.integers(1, 4), st.integers(0, 60)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_what_is_held_fits_one_snapshot_however_the_runs_end(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    held: dict[tuple[int, int], ActiveRun] = {}
    cache = RangeCache()  # reuses the ranges listed last time: must not change what is listed
    for op in ops:
        if op[0] == "claim":
            _, partition, (start, count), scattered = op
            offsets = sorted({*range(start, start + count), *scattered})
            new = [run_at(partition, o) for o in offsets if (partition, o) not in held]
            found, dropped = fit(list(held.values()), TxnWork(claims=new), LIMIT, cache=cache)
            kept = [r for r in new if r not in dropped]
            held.update({(r.item.partition, r.item.offset): r for r in kept})
            assert found == ranges(held.values())
            assert fits(found, LIMIT)
        else:
            _, k, one = op
            for key in [key for key in held if key[1] % k == 0 or key[1] == one]:
                del held[key]
        assert len(ranges(held.values())) <= LIMIT  # the invariant: never more than fit


def test_a_burst_on_consecutive_offsets_holds_nearly_twice_the_limit_scattered_runs_the_limit() -> (
    None
):
    burst = [run_at(0, o) for o in range(3 * LIMIT)]
    found, dropped = fit([], TxnWork(ahead=burst), limit=LIMIT)
    assert sum(r.count for r in found) == 2 * LIMIT - 1
    assert [r.item.offset for r in dropped] == list(range(3 * LIMIT - 1, 2 * LIMIT - 2, -1))
    scattered = [run_at(0, 2 * o) for o in range(3 * LIMIT)]
    found, dropped = fit([], TxnWork(claims=scattered), limit=LIMIT)
    assert len(found) == LIMIT and sum(r.count for r in found) == LIMIT
