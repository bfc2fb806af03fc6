"""What the processor holds beside the jobs, each on its own: a concurrency group's index and
waiting line (Groups), what a partition says and hears when a job moves (Moves), and a
tenant's breakers and backfill pace (Breakers, BackfillPace). Through the processor:
test_groups.py, test_moving.py, test_breaker.py, test_backfill.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import ExecutionRequested, JobMoved, TenantCircuit
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.runtime.store import MemoryStore
from streams.runtime.task import Task
from streams.scheduler import groups
from streams.scheduler.breaker import Breaker
from streams.scheduler.group_keeping import GONE_PREFIX, GROUP_PREFIX, WAITING_PREFIX, Groups
from streams.scheduler.job_store import JobStore
from streams.scheduler.metrics import SchedulerMetrics
from streams.scheduler.moving import Moves
from streams.scheduler.step import Effects
from streams.scheduler.tenant_keeping import BackfillPace, Breakers
from streams.scheduler.tenant_limits import TenantRuns, TenantUse
from tests.scheduler.test_domain import MIN, T0, create, definition

CODEC = Codec()
ROUTE = "acme/~db"
TOPICS = Topics(KadenceSettings(partitions=3))


def task(partition: int = 0) -> tuple[Task, list[tuple[Any, ...]]]:
    t = Task(partition, MemoryStore(), T0, 60_000)
    t.changelog = "changelog"
    out: list[tuple[Any, ...]] = []
    t._emit = lambda *record: out.append(record)
    return t, out


def group_keeping(t: Task, jobs: dict[str, str]) -> Groups:
    """Groups over a store holding `jobs` (job id -> concurrency key), all in line for `db`."""
    store = JobStore(CODEC, TenantRuns(TenantUse()), 1)
    for job_id, concurrency_key in jobs.items():
        state = create(definition(job_id=job_id, concurrency_key=concurrency_key))
        store.write(t, f"acme/{job_id}".encode(), state, {}, T0)
    line = [f"acme/{job_id}" for job_id in jobs]
    t.put(WAITING_PREFIX + ROUTE.encode(), groups.dump_waiting(line), None)
    return Groups(CODEC, store)


def hold(t: Task, job: str, *runs: str, until: int = T0 + MIN) -> None:
    """`job` holds the group `db` with `runs` until `until`."""
    t.put(GROUP_PREFIX + ROUTE.encode(), groups.dump({job: [[r, until] for r in runs]}), None)


def test_the_line_offers_jobs_in_order_until_one_holds_the_group_again() -> None:
    t, _ = task()
    kept = group_keeping(t, {"a": "db", "b": "db", "c": "db"})
    offered = []
    for key, state in kept.line(t, ROUTE, T0):
        offered.append(key)
        assert state.definition(CODEC).concurrency_key == "db"
        if key == b"acme/b":
            hold(t, "acme/b", "run-b")  # the step written for b started a run
    assert offered == [b"acme/a", b"acme/b"]


def test_a_job_no_longer_in_the_group_leaves_the_line_and_the_next_is_offered() -> None:
    t, _ = task()
    kept = group_keeping(t, {"a": "db", "moved": "other", "c": "db"})
    t.put(b"acme/a", None, None)  # deleted meanwhile
    assert [key for key, _ in kept.line(t, ROUTE, T0)] == [b"acme/c"]
    assert kept.waiting(t, ROUTE) == ["acme/c"]


def test_a_deleted_job_s_runs_hold_its_group_until_the_last_one_ends() -> None:
    t, _ = task()
    kept = group_keeping(t, {})
    t.put(GONE_PREFIX + b"acme/gone", ROUTE.encode(), None)
    hold(t, "acme/gone", "e1", "e2")
    assert kept.gone_run_ended(t, b"acme/gone", "e1", T0) is None  # e2 still holds it
    assert t.get(GONE_PREFIX + b"acme/gone") == ROUTE.encode()
    assert kept.gone_run_ended(t, b"acme/gone", "e2", T0) == ROUTE  # free: its line may start
    assert t.get(GONE_PREFIX + b"acme/gone") is None
    assert t.get(GROUP_PREFIX + ROUTE.encode()) is None
    assert kept.gone_run_ended(t, b"acme/other", "e3", T0) is None  # not a deleted job's run


def test_a_step_keeps_the_group_index_and_says_when_the_group_is_free() -> None:
    t, _ = task()
    kept = group_keeping(t, {"a": "db"})
    d = definition(job_id="a", concurrency_key="db")
    state = create(d)
    assert kept.kept(t, d, state, Effects(state), T0)  # nothing runs
    assert groups.load(t.get(GROUP_PREFIX + ROUTE.encode())) == {}
    hold(t, "acme/b", "run-b")
    assert not kept.kept(t, d, state, Effects(state), T0)  # b's run holds it
    assert kept.standing(t, d, T0) == (T0 + MIN, True)  # held until then; no job waits before a


def moved(version: int, partition: int, *, keeps: bool = False) -> JobMoved:
    return JobMoved(
        tenant="acme",
        job_id="job",
        request_id=f"moved:{version}:{partition}",
        issued_at=ms_to_datetime(T0),
        version=version,
        partition=partition,
        keeps=keeps,
    )


def told(out: list[tuple[Any, ...]]) -> list[tuple[int, JobMoved]]:
    found = []
    for topic, partition, _key, value, _h in out:
        assert topic == TOPICS.scheduler_control
        record = CODEC.decode(value)
        assert isinstance(record, JobMoved)
        found.append((partition, record))
    return found


def test_an_arrived_version_is_told_to_every_other_partition() -> None:
    t, out = task(1)
    Moves(CODEC, TOPICS, 3).arrived(t, b"acme/job", definition(version=2), 1, T0)
    assert [(p, m.version, m.partition, m.keeps) for p, m in told(out)] == [
        (0, 2, 1, False),
        (2, 2, 1, False),
    ]


def test_the_highest_version_keeps_the_job_and_a_tie_goes_to_the_lower_partition() -> None:
    moves = Moves(CODEC, TOPICS, 3)
    v2 = create(definition(version=2))
    t, out = task(1)
    assert moves.heard(t, b"acme/job", moved(3, 0), v2, T0)  # a newer copy: this one goes
    assert moves.heard(t, b"acme/job", moved(2, 0), v2, T0)  # a tie: partition 0 keeps it
    assert not moves.heard(t, b"acme/job", moved(3, 1), v2, T0)  # its own word
    assert out == []
    later = T0 + 1_000
    assert not moves.heard(t, b"acme/job", moved(1, 2), v2, later)  # this copy is newer
    [(to, answer)] = told(out)
    assert (to, answer.version, answer.partition, answer.keeps) == (2, 2, 1, True)
    assert answer.issued_at == ms_to_datetime(T0) + timedelta(seconds=1)


def test_an_answer_is_answered_only_by_a_newer_copy() -> None:
    moves = Moves(CODEC, TOPICS, 3)
    t, out = task(0)
    v2 = create(definition(version=2))
    assert not moves.heard(t, b"acme/job", moved(2, 1, keeps=True), v2, T0)
    assert out == []  # the other copy keeps it too only until it hears it lost: no answer
    assert not moves.heard(t, b"acme/job", moved(1, 1, keeps=True), v2, T0)
    assert [(p, m.version) for p, m in told(out)] == [(1, 2)]


def test_a_tenant_s_backfill_budget_is_what_is_left_of_the_current_second() -> None:
    pace = BackfillPace(per_s=10)
    assert pace.budget("acme", T0) == 10
    pace.used("acme", 4, T0)
    pace.used("acme", 3, T0 + 999)
    assert (pace.budget("acme", T0 + 500), pace.budget("other", T0)) == (3, 10)
    assert pace.budget("acme", T0 + 1_000) == 10  # a new second
    pace.used("acme", 2, T0 + 1_000)
    assert pace.budget("acme", T0 + 1_999) == 8


def test_a_breaker_that_opened_is_kept_decoded_and_told_to_every_partition_itself_included() -> (
    None
):
    t, out = task(1)
    breakers = Breakers(CODEC, TOPICS, 3, SchedulerMetrics())
    assert breakers.get(t, "acme") == Breaker()  # none stored yet: a closed one
    opened = Breaker(window_start_ms=T0, attempts=6, failures=3, open_until_ms=T0 + 10_000)
    breakers.put(t, "acme", opened, "opened")
    assert breakers.get(t, "acme") is opened
    assert Breaker.load(t.get(b"~breaker/acme")) == opened
    told = [(partition, CODEC.decode(value)) for _t, partition, _k, value, _h in out]
    assert [partition for partition, _ in told] == [0, 1, 2]
    for _, circuit in told:
        assert isinstance(circuit, TenantCircuit)
        assert (circuit.partition, circuit.open_until) == (1, ms_to_datetime(T0 + 10_000))
    out.clear()
    breakers.put(t, "acme", opened, None)  # counted, not changed: nothing to tell
    assert out == []


def test_a_circuit_heard_from_another_partition_is_followed_and_its_own_word_ignored() -> None:
    t, _ = task(1)
    breakers = Breakers(CODEC, TOPICS, 3, SchedulerMetrics())
    at = ms_to_datetime(T0)
    until = ms_to_datetime(T0 + 10_000)
    own = TenantCircuit(tenant="acme", partition=1, at=at, open_until=until, reason="r")
    breakers.heard(t, own)
    assert t.get(b"~breaker/acme") is None
    other = own.model_copy(update={"partition": 0})
    breakers.heard(t, other)
    assert breakers.get(t, "acme").open_until_ms == T0 + 10_000
    assert Breaker.load(t.get(b"~breaker/acme")).open_until_ms == T0 + 10_000


def test_dispatch_lateness_counts_a_late_run_s_delay_and_a_run_sent_ahead_as_zero() -> None:
    metrics = SchedulerMetrics()
    due = ms_to_datetime(T0)
    fields: dict[str, Any] = {
        "execution_id": "acme/job@1",
        "tenant": "acme",
        "job_id": "job",
        "definition_version": 1,
        "nominal_at": due,
        "due_at": due,
        "target": {"kind": "handler", "name": "h"},
        "timeout_ms": 1000,
        "lease_ttl_ms": 1000,
    }
    for dispatched in (due + timedelta(milliseconds=2_500), due - timedelta(seconds=30), due):
        metrics.observe(ExecutionRequested.model_validate({**fields, "dispatched_at": dispatched}))
    [metric] = metrics.dispatch_lateness.collect()
    sample = {s.name: s.value for s in metric.samples}
    assert sample["kadence_scheduler_dispatch_lateness_seconds_count"] == 3
    assert sample["kadence_scheduler_dispatch_lateness_seconds_sum"] == 2.5
