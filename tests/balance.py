"""The order in which pytest-xdist hands tests to its workers: longest first.

`make test` runs the suite on a few workers (`PYTEST_WORKERS`). Most of its time goes to a few
dozen live tests that wait on a broker and on child processes for 10 to 100 seconds each; if one
of them starts last, every other worker idles until it ends. Handing out the longest tests first
(LPT scheduling) leaves only short ones for the end. The weights are rough seconds of a serial
run on 2 cores; a test missing from the table counts by its markers. Only the order changes,
never which tests run, and only under xdist: a serial run keeps pytest's collection order.

The tests of a module under tests/api/ share a module-scoped fixture that starts a whole stack
(`api`): they go to one worker together. Spread over workers, each would start its own stack,
and a worker that alternated modules would start it again and again. xdist's own way to say so
(`xdist_group` marks with `--dist loadgroup`) does not group on pytest 9.2 (xdist 3.8 renames
`item._nodeid`, which pytest no longer reads), so tests/xdist_scheduling.py gives `loadgroup`
these groups itself, by path: the controller that schedules sees node ids only.
"""

from __future__ import annotations

import pytest

WEIGHTS: dict[str, float] = {
    "tests/chaos/test_scenarios.py": 65,
    "tests/chaos/test_scenarios.py::test_chaos_scenario_finds_nothing[worker-kill]": 105,
    "tests/integration/test_bench_smoke.py": 45,
    "tests/integration/test_deploy_walkthrough.py": 145,  # three brokers of its own, 7 processes
    "tests/integration/test_bench_smoke.py::test_noisy_neighbour_benchmark_smoke": 75,
    "tests/integration/test_scheduler_live.py": 30,
    "tests/integration/test_scheduler_live.py::test_a_job_every_second_for_a_minute[at-due]": 65,
    "tests/integration/test_execution_live.py": 20,
    "tests/integration/test_upgrade.py": 95,  # a 0.9.0 stack, then this release's, for a minute
    "tests/integration/test_broker_restart.py": 23,  # a broker of its own, started and restarted
    "tests/integration/test_scheduler_control.py": 10,
    "tests/integration/test_make_run.py": 15,
    "tests/timeengine/test_oracle.py": 23,
    "tests/api/test_schemathesis.py::test_no_operation_answers_with_a_server_error": 23,
    "tests/timeengine/test_burst_sharing.py": 8,
    "tests/hostile/test_tenant_secrets.py": 15,
    "tests/hostile/test_oversized_records.py": 12,
    "tests/hostile/test_worker_slots.py": 11,
    "tests/integration/test_metrics_live.py": 11,
    "tests/integration/test_sqs_live.py": 5,  # its module starts ElasticMQ once
}
"""Rough seconds by node id prefix (a file, or one test); the longest matching prefix wins."""

SLOW_S = 8.0
"""A test marked `slow` that the table does not name."""
LIVE_S = 3.0
"""A test that needs the broker (marked `kafka` or taking `kafka_bootstrap`) not named above."""

GROUPED_DIRS = (
    "tests/api/",
    "tests/integration/test_sqs_live.py",
    "tests/integration/test_examples.py",
)
"""Folders (or modules) whose test modules each run on one worker (their module fixture starts
a stack, or a server: ElasticMQ)."""


def _fixtures(item: pytest.Item) -> frozenset[str]:
    """The fixtures `item` uses (a pytest.Function knows them; other items use none)."""
    return frozenset(getattr(item, "fixturenames", ()))


def weight(item: pytest.Item) -> float:
    """Rough seconds `item` takes (see WEIGHTS); 0 for a fast unit test."""
    prefixes = [p for p in WEIGHTS if item.nodeid == p or item.nodeid.startswith(p + "::")]
    if prefixes:
        return WEIGHTS[max(prefixes, key=len)]
    if item.get_closest_marker("slow") is not None:
        return SLOW_S
    if item.get_closest_marker("kafka") is not None or "kafka_bootstrap" in _fixtures(item):
        return LIVE_S
    return 0.0


def group_of(nodeid: str) -> str | None:
    """The group (its module) the test `nodeid` must share a worker with, if any."""
    module = nodeid.split("::", 1)[0]
    return module if module.startswith(GROUPED_DIRS) else None


def longest_first(items: list[pytest.Item]) -> None:
    """Sort `items` in place, longest first; a group counts as the sum of its tests and keeps
    them together in collection order. Ties keep collection order."""
    group_weight: dict[str, float] = {}
    first_index: dict[str, int] = {}
    for index, item in enumerate(items):
        key = group_of(item.nodeid) or item.nodeid
        group_weight[key] = group_weight.get(key, 0.0) + weight(item)
        first_index.setdefault(key, index)
    position = {id(item): index for index, item in enumerate(items)}

    def order(item: pytest.Item) -> tuple[float, int, int]:
        key = group_of(item.nodeid) or item.nodeid
        return (-group_weight[key], first_index[key], position[id(item)])

    items.sort(key=order)
