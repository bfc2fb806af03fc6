"""The query view on the driver: wired as apps/views.py wires it, it materializes jobs, their
runs and dead letters from the topics the scheduler, reaper and workers wrote, and a restart
resumes from the offsets in its RocksDB without applying anything twice."""

from __future__ import annotations

from pathlib import Path

from streams.views.query import ViewQueries
from testkit.driver import Driver
from testkit.driver.stack import DriverStack
from tests.driver.stack_helpers import once, settings_for


def test_the_view_shows_jobs_runs_and_dead_letters_from_the_topics(
    driver: Driver, tmp_path: Path
) -> None:
    stack = DriverStack(driver, settings_for(tmp_path / "state"))
    try:
        stack.scheduler()
        stack.reaper()
        stack.worker()
        view = stack.views()
        stack.target.failing("down")
        stack.put(
            once("fine", in_s=2),
            once("broken", in_s=2, handler="down", retry={"max_attempts": 1}),
        )
        stack.run_for(4_000)
        q = ViewQueries(view.store)
        assert view.caught_up
        assert view.failed == view.skipped == 0
        jobs = {j["job_id"]: j for j in q.jobs("acme", driver.now_ms())}
        assert sorted(jobs) == ["broken", "fine"]
        [fine] = q.runs("acme", "fine")
        assert (fine["status"], fine["attempts"], fine["deliveries"]) == ("succeeded", 1, 1)
        assert jobs["fine"]["last_run"]["status"] == "succeeded"
        [broken] = q.runs("acme", "broken")
        # the reason, not the status: outcome and dead letter share one millisecond on the
        # driver's clock, and the view folds same-millisecond events by topic letter
        assert broken["reason"] == "dead-lettered: retries_exhausted"
        [dead] = q.dead_letters("acme")
        assert dead["execution_id"] == broken["execution_id"]
        applied = view.applied
        driver.stop(view)

        again = stack.views()  # same instance, same RocksDB: resumes from its offsets
        stack.settle()
        assert again.applied == 0  # nothing read twice
        assert again.caught_up  # ready: past the commit markers ending the scheduler's partitions
        assert ViewQueries(again.store).runs("acme", "fine") == [fine]
        assert applied > 0
    finally:
        stack.close()
