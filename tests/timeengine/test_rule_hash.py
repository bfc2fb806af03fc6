"""`CronRule`'s hash is computed once and agrees with its equality: the search cache is keyed
by (rule, cursor), so equal rules share results and different ones never do."""

from __future__ import annotations

from dataclasses import replace

from kadence.models import CronSchedule, DstFoldPolicy, DstGapPolicy
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.engine import CronRule


def rule(expression: str = "0 2 * * *", zone: str = "Europe/Paris", **kw: object) -> CronRule:
    compiled = compile_schedule(CronSchedule(expression=expression, timezone=zone, **kw), "t/j")
    assert compiled.rule is not None
    return compiled.rule


def test_equal_rules_hash_alike_and_different_ones_compare_different() -> None:
    a = rule()
    b = replace(a)  # an equal rule, another object
    assert a is not b and a == b and hash(a) == hash(b)
    others = [
        rule("0 3 * * *"),
        rule(zone="America/New_York"),
        rule(dst_gap=DstGapPolicy.skip),
        rule(dst_fold=DstFoldPolicy.both),
        replace(a, start_ms=1),
        replace(a, end_ms=10**12),
    ]
    for other in others:
        assert other != a
    assert len({a, b, *others}) == 1 + len(others)


def test_a_copy_with_a_change_gets_the_hash_of_what_it_now_holds() -> None:
    a = rule()
    moved = replace(a, start_ms=5)
    assert hash(replace(moved, start_ms=a.start_ms)) == hash(a)
    assert {a: 1}[replace(moved, start_ms=a.start_ms)] == 1


def test_jobs_with_equal_schedules_share_one_rule() -> None:
    """Built once per distinct rule (compile_schedule's cache), not once per job."""
    assert rule() is rule()
    assert rule("0 4 * * *") is not rule()
