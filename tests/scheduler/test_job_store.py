"""The job store: a job's state and definition written and read back, the cache rule, and what
it tells the tenants' caps."""

from __future__ import annotations

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import ExecutionOutcome, OutcomeStatus
from streams.runtime.store import Batch, MemoryStore, Store
from streams.runtime.task import Task
from streams.scheduler import later
from streams.scheduler.job_store import JobStore
from streams.scheduler.state import JobState, dump_state
from streams.scheduler.stored import definition_key
from streams.scheduler.tenant_limits import TenantRuns, TenantUse
from tests.scheduler.test_domain import MIN, T0, create, definition, due

CODEC = Codec()
KEY = b"acme/job"


def job_store(partitions: int = 1, awaiting_limit: int = 20_000, in_flight: int = 0) -> JobStore:
    tenants = TenantRuns(TenantUse(in_flight=in_flight, partitions=partitions))
    return JobStore(CODEC, tenants, partitions, awaiting_limit)


def task(store: Store | None = None) -> Task:
    t = Task(0, store or MemoryStore(), T0, 60_000)
    t.changelog = "changelog"
    return t


def commit(t: Task) -> None:
    t.store.apply(t.batch)
    t.batch = Batch()


def running() -> JobState:
    """A job with one run in progress (fired at its first due time)."""
    state = due(create(), T0 + MIN).state
    assert state is not None and state.running
    return state


def test_a_written_job_reads_back_from_the_store_as_it_was_written(store: Store) -> None:
    jobs, t = job_store(), task(store)
    written = jobs.write(t, KEY, running(), {}, T0 + MIN)
    assert written is not None
    commit(t)
    t.cache.clear()
    loaded = jobs.load(t, KEY)
    assert loaded is not None and loaded is not written
    assert dump_state(loaded) == dump_state(written)
    assert loaded.definition(CODEC) == definition()
    assert [r.execution_id for r in loaded.running] == [r.execution_id for r in written.running]


def test_the_definition_is_written_once_per_version_beside_the_state() -> None:
    jobs, t = job_store(), task()
    state = jobs.write(t, KEY, create(), {}, T0)
    assert state is not None
    assert set(t.batch.values) == {KEY, definition_key(KEY)}
    commit(t)
    again = due(state, T0 + MIN).state  # the same version fires: its state changes
    assert again is not None
    jobs.write(t, KEY, again, {}, T0 + MIN)
    assert set(t.batch.values) == {KEY}
    commit(t)
    newer = create(definition(version=2, description="v2"))
    jobs.write(t, KEY, newer, {}, T0 + MIN)
    assert set(t.batch.values) == {KEY, definition_key(KEY)}


def test_a_deleted_job_leaves_no_state_definition_or_cached_copy() -> None:
    jobs, t = job_store(), task()
    t.loaded_until_ms = T0 + 2 * MIN
    jobs.write(t, KEY, create(), {}, T0)
    assert KEY in t.cache
    assert jobs.write(t, KEY, None, {}, T0) is None
    assert (t.get(KEY), t.get(definition_key(KEY)), KEY in t.cache) == (None, None, False)
    assert jobs.load(t, KEY) is None


def test_a_job_stays_decoded_when_it_fires_soon_and_not_when_it_fires_later() -> None:
    jobs, t = job_store(), task()
    state = create()  # due at T0 + MIN, nothing running
    assert state.wake_ms == T0 + MIN
    t.loaded_until_ms = T0 + MIN - 1  # its wake time is not in the timer window yet
    jobs.write(t, KEY, state, {}, T0)
    assert KEY not in t.cache
    t.loaded_until_ms = T0 + MIN
    jobs.write(t, KEY, state, {}, T0)
    assert t.cache[KEY] is state


def test_a_job_awaiting_an_outcome_stays_decoded_while_the_cache_holds_less_than_its_share() -> (
    None
):
    jobs = job_store(partitions=4, awaiting_limit=8)  # a share of 2 per partition
    assert jobs.awaiting_share == 2
    t = task()
    state = running()
    jobs.write(t, b"acme/a", state, {}, T0 + MIN)
    jobs.write(t, b"acme/b", state, {}, T0 + MIN)
    jobs.write(t, b"acme/c", state, {}, T0 + MIN)
    assert sorted(t.cache) == [b"acme/a", b"acme/b"]
    del t.cache[b"acme/a"]  # room again: a write that awaits takes it
    jobs.write(t, b"acme/c", state, {}, T0 + MIN)
    assert sorted(t.cache) == [b"acme/b", b"acme/c"]


def test_reads_and_writes_are_told_to_the_tenant_s_runs_in_progress() -> None:
    jobs, t = job_store(in_flight=10), task()
    assert jobs.load(t, KEY) is None  # read first, as every step does
    jobs.write(t, KEY, running(), {}, T0 + MIN)
    assert t.get(b"~inflight/acme") == b"1"
    jobs.tenants.begin()
    assert jobs.load(t, KEY) is not None
    jobs.write(t, KEY, None, {}, T0 + MIN)
    assert t.get(b"~inflight/acme") == b"0"


def test_a_quarantined_job_keeps_its_state_but_no_longer_fires() -> None:
    jobs, t = job_store(), task()
    t.loaded_until_ms = T0 + 2 * MIN
    jobs.write(t, KEY, create(), {}, T0)
    jobs.quarantine(t, KEY)
    commit(t)
    assert KEY not in t.cache
    assert jobs.load(t, KEY) is not None
    assert t.due(T0 + MIN, 10) == []


def test_prefetch_keeps_a_stored_job_decoded_and_ignores_a_missing_one() -> None:
    jobs, t = job_store(), task()
    jobs.write(t, KEY, create(), {}, T0)
    commit(t)
    jobs.prefetch(t, KEY)
    jobs.prefetch(t, b"acme/none")
    assert list(t.cache) == [KEY]
    assert isinstance(t.cache[KEY], JobState)


def _waiting(state: JobState) -> later.Waiting:
    """The success of `state`'s run, waiting (later.py)."""
    [run] = state.running
    success = ExecutionOutcome(
        execution_id=run.execution_id,
        tenant="acme",
        job_id="job",
        attempt=run.attempt,
        delivery=1,
        worker_id="w",
        status=OutcomeStatus.succeeded,
        nominal_at=ms_to_datetime(run.nominal_ms),
        due_at=ms_to_datetime(run.nominal_ms),
        started_at=ms_to_datetime(run.nominal_ms),
        finished_at=ms_to_datetime(run.nominal_ms),
    )
    waiting = later.admit(state.evolve(_definition_stored=True), success, T0 + MIN, CODEC)
    assert waiting is not None
    return waiting


def test_a_job_whose_success_waits_is_read_caught_up_and_keeps_its_replay_point() -> None:
    jobs, t = job_store(in_flight=10), task()
    t.replay_topics = ("outcomes",)
    assert jobs.load(t, KEY) is None
    jobs.write(t, KEY, running(), {}, T0 + MIN)
    waiting = _waiting(running())
    jobs.tenants.begin()
    assert jobs.decoded(t, KEY) is not None
    jobs.tenants.ended(t, KEY)
    jobs.wait(t, KEY, waiting, topic="outcomes", offset=7, now_ms=T0 + MIN)
    assert t.get(b"~inflight/acme") == b"0"  # as the write of the run's end would say
    assert jobs.decoded(t, KEY) is waiting
    t.deferred.defer(b"acme/other", "outcomes", 9, T0 + MIN, None)  # a younger wait behind it
    loaded = jobs.load(t, KEY)
    assert loaded == later.caught_up(waiting) and loaded is not None
    assert loaded.running == ()
    assert t.cache[KEY] is loaded and t.deferred_state(KEY) is loaded  # caught up once
    assert t.deferred.points(("outcomes",)) == {"outcomes": 7}  # its place kept


def test_a_waiting_job_is_written_caught_up_when_quarantined() -> None:
    jobs, t = job_store(), task()
    jobs.write(t, KEY, running(), {}, T0 + MIN)
    commit(t)
    waiting = _waiting(running())
    jobs.wait(t, KEY, waiting, topic="outcomes", offset=3, now_ms=T0 + MIN)
    jobs.quarantine(t, KEY)
    commit(t)
    t.cache.clear()
    stored = jobs.load(t, KEY)
    assert stored is not None and stored.running == ()
    assert KEY not in t.deferred
