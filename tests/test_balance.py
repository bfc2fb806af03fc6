"""How `make test` splits the suite over xdist workers (tests/balance.py)."""

from __future__ import annotations

from tests.xdist_scheduling import BalancedGroupScheduling


def test_an_api_module_is_one_unit_of_work_and_any_other_test_its_own() -> None:
    sched = object.__new__(BalancedGroupScheduling)  # _split_scope reads no state
    api = ["tests/api/test_jobs.py::test_a", "tests/api/test_jobs.py::test_b[x]"]
    assert {sched._split_scope(n) for n in api} == {"tests/api/test_jobs.py"}
    other = "tests/integration/test_scheduler_live.py::test_a_job_every_second_for_a_minute[at-due]"
    assert sched._split_scope(other) == other
    assert sched._split_scope("tests/test_clock.py::test_x@g") == "g"  # xdist_group still counts
