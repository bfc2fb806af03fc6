"""ExecutionBatch records on the in-memory cluster (streams/worker/inbox.py `add_batch`,
streams/worker/delivering.py `route_batch`): a batch's executions move together. They are
delivered in one transaction with their outcomes and the offset that passes the batch, or all
claimed under one lease reference (the batch's offset); so a read_committed reader of the
tenant's topic sees each once whatever happens to the worker, and a partition's next owner
never reads a batch that is half done."""

from __future__ import annotations

import threading
from datetime import timedelta

from kadence.codec import Codec
from kadence.models import (
    ExecutionBatch,
    ExecutionRequested,
    HttpTarget,
    OutcomeStatus,
    RateLimit,
)
from kadence.settings import KadenceSettings
from kadence.topics import REJECTED, Topics
from streams.worker.delivering import TOPIC_WAIT_MS
from streams.worker.loop import OFFSET_COMMIT_INTERVAL_MS, Worker
from streams.worker.offsets import encode_metadata
from testkit.driver import Driver, abort_error
from testkit.driver.leases import lease_facts, snapshots
from testkit.outcomes import revocation_of
from tests.driver.test_worker_delivery import (  # the same target, fixtures and helpers
    GROUP,
    Topic,
    delivered,
    execution,
    outcomes,
    settings,
    topics,
)

__all__ = ["settings", "topics"]  # fixtures
CODEC = Codec()


def batch(*executions: ExecutionRequested) -> ExecutionBatch:
    first = executions[0]
    return ExecutionBatch(
        tenant=first.tenant,
        due_at=first.due_at,
        executions=[CODEC.encode(ex) for ex in executions],
    )


def send_batch(
    driver: Driver, topics: Topics, *executions: ExecutionRequested, partition: int = 0
) -> list[bytes]:
    """The batch on `partition`; each execution's bytes as the batch carries them."""
    record = batch(*executions)
    driver.send(topics.executions, record, key=record.tenant, partition=partition)
    return list(record.executions)


def jobs(n: int, *, due_in_ms: int = 0, first: int = 0) -> list[ExecutionRequested]:
    return [execution(f"j{i}", due_in_ms=due_in_ms) for i in range(first, first + n)]


def batch_and_revocation(driver: Driver, topics: Topics, due_in_ms: int) -> list[bytes]:
    """j0-j2 in one batch due in `due_in_ms`, then a revocation of j1 written now: the bytes of
    the batch's executions."""
    exs = jobs(3, due_in_ms=due_in_ms)
    values = send_batch(driver, topics, *exs)
    revoked = revocation_of(exs[1], at=exs[1].due_at - timedelta(milliseconds=due_in_ms))
    driver.send(topics.executions, revoked, key="acme", partition=0)
    return values


def read_and_committed(driver: Driver, worker: Worker) -> None:
    """`worker` reads what is there, then commits its offsets (their interval passed)."""
    driver.turn(worker)
    driver.advance(OFFSET_COMMIT_INTERVAL_MS)
    driver.turn(worker)


def test_a_batch_is_delivered_in_one_transaction_with_its_outcomes_and_offset(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    worker = driver.worker(settings, {"kafka": Topic()})
    values = send_batch(driver, topics, *jobs(3))
    driver.turn(worker)
    assert delivered(driver) == values  # each execution's own bytes, in order
    assert sorted(o.job_id for o in outcomes(driver, topics)) == ["j0", "j1", "j2"]
    assert {o.status for o in outcomes(driver, topics)} == {OutcomeStatus.succeeded}
    assert driver.cluster.committed(GROUP)[(topics.executions, 0)] == 1
    assert lease_facts(driver.cluster, topics) == []
    assert len(worker.inbox) == 0


def test_a_batch_read_ahead_waits_whole_and_is_never_early(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    target = Topic()
    worker = driver.worker(settings, {"kafka": target})
    send_batch(driver, topics, *jobs(4, due_in_ms=1_000))
    driver.turn(worker, times=2)
    assert (delivered(driver), worker.holdings.claimed) == ([], {})
    assert len(worker.inbox) == 4  # the inbox bound counts executions, not records
    assert target.built == 4  # each record built while it waits
    driver.advance(999)
    driver.turn(worker)
    assert delivered(driver) == []
    driver.advance(1)
    driver.turn(worker)
    assert len(delivered(driver)) == 4
    assert target.calls == []


def test_a_revoked_execution_leaves_its_batch_and_the_rest_run(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    worker = driver.worker(settings, {"kafka": Topic()})
    values = batch_and_revocation(driver, topics, 1_000)
    driver.turn(worker)
    assert len(worker.inbox) == 2
    driver.advance(1_000)
    driver.turn(worker)
    assert delivered(driver) == [values[0], values[2]]
    assert sorted(o.job_id for o in outcomes(driver, topics)) == ["j0", "j2"]
    assert driver.cluster.committed(GROUP)[(topics.executions, 0)] == 2


def test_a_worker_killed_mid_commit_leaves_nothing_and_the_next_owner_delivers_each_once(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    w1 = driver.worker(settings, {"kafka": Topic()}, instance_id="w1")
    hang = driver.cluster.faults.hang("commit_transaction", client=w1.worker_id)
    values = send_batch(driver, topics, *jobs(5))
    turning = threading.Thread(target=driver.turn, args=(w1,), daemon=True)
    turning.start()
    hang.entered.wait(5)
    driver.crash(w1)
    w2 = driver.worker(settings, {"kafka": Topic()}, instance_id="w2")
    driver.turn(w2, times=3)
    assert delivered(driver) == values
    hang.release()
    turning.join(5)
    assert delivered(driver) == values
    assert {o.worker_id for o in outcomes(driver, topics)} == {w2.worker_id}


def test_a_takeover_delivers_a_held_batch_once_and_not_the_ones_passed(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """w1 delivers the batches due now and holds the one due later; after its death the next
    owner delivers only that one (the offset commit named it held, the others passed)."""
    w1 = driver.worker(settings, {"kafka": Topic()}, instance_id="w1")
    send_batch(driver, topics, *jobs(3))
    later = send_batch(driver, topics, *jobs(3, due_in_ms=5_000, first=3))
    send_batch(driver, topics, *jobs(3, first=6))
    driver.turn(w1, times=2)
    assert len(delivered(driver)) == 6
    driver.crash(w1)
    w2 = driver.worker(settings, {"kafka": Topic()}, instance_id="w2")
    driver.advance(5_000)
    driver.turn(w2, times=3)
    values = delivered(driver)
    assert len(values) == 9 and len(set(values)) == 9
    assert values[6:] == later
    assert {o.worker_id for o in outcomes(driver, topics) if o.job_id in {"j3", "j4", "j5"}} == {
        w2.worker_id
    }


def test_an_aborted_commit_puts_the_whole_batch_back_and_the_next_delivers_it_once(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    worker = driver.worker(settings, {"kafka": Topic()})
    values = send_batch(driver, topics, *jobs(3))
    driver.cluster.faults.fail("commit_transaction", abort_error())
    driver.turn(worker)
    assert (delivered(driver), outcomes(driver, topics)) == ([], [])
    assert len(worker.inbox) == 3
    driver.turn(worker)
    assert delivered(driver) == values
    assert len(outcomes(driver, topics)) == 3


def test_a_batch_goes_whole_past_the_transactions_bound(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    small = settings.model_copy(update={"worker_deliveries_per_transaction": 2})
    worker = driver.worker(small, {"kafka": Topic()})
    values = send_batch(driver, topics, *jobs(5))
    driver.turn(worker)
    assert delivered(driver) == values


def test_a_refused_record_fails_its_run_and_the_rest_of_the_batch_is_delivered(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    worker = driver.worker(settings, {"kafka": Topic()})
    exs = [execution("j0"), execution("j1", topic="gone"), execution("j2")]
    values = send_batch(driver, topics, *exs)
    driver.turn(worker, times=2)
    assert delivered(driver) == [values[0], values[2]]
    by_job = {o.job_id: o for o in outcomes(driver, topics)}
    assert by_job["j1"].status is OutcomeStatus.failed and by_job["j1"].retryable
    assert by_job["j0"].status is by_job["j2"].status is OutcomeStatus.succeeded


def test_one_topic_not_known_holds_the_batch_then_all_of_it_is_claimed_together(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """Its executions move together: none goes while one waits for its topic, and once that
    one must take the claimed path, all do, under one lease reference (the batch's offset)."""
    target = Topic(known=False)
    worker = driver.worker(settings, {"kafka": target})
    exs = jobs(3)
    send_batch(driver, topics, *exs)
    driver.turn(worker, times=2)
    assert (delivered(driver), target.calls) == ([], [])
    driver.advance(TOPIC_WAIT_MS)
    driver.turn_until(lambda: len(target.calls) == 3, worker)
    assert sorted(target.calls) == sorted(e.execution_id for e in exs)
    acquired = {f[1] for f in lease_facts(driver.cluster, topics) if f[0].value == "acquired"}
    assert acquired == {e.execution_id for e in exs}
    if settings.lease_format == "snapshot":
        snaps = [s for s in snapshots(driver.cluster, topics) if s.held]
        assert {(r.partition, r.start, r.count) for s in snaps for r in s.held} == {(0, 0, 1)}


def test_an_entry_that_is_not_an_execution_of_the_batch_is_rejected_alone(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    worker = driver.worker(settings, {"kafka": Topic()})
    good = execution("j0")
    limited = execution("j2").model_copy(
        update={"target": HttpTarget(url="https://example.com", rate_limit=RateLimit(per_second=1))}
    )
    record = batch(good, good).model_copy(
        update={
            "executions": [
                CODEC.encode(good),
                b"\xc3\x01junk",
                CODEC.encode(limited),
                CODEC.encode(good),  # a forged repeat: delivered once
            ]
        }
    )
    driver.send(topics.executions, record, key="acme", partition=0)
    driver.turn(worker, times=2)
    assert delivered(driver) == [CODEC.encode(good)]
    rejected = driver.records(topics.rejected, REJECTED)
    reasons = sorted(getattr(r, "reason", "") for r in rejected)
    assert len(reasons) == 3
    assert [r[:7] for r in reasons] == ["entry 1", "entry 2", "entry 3"]
    assert "rate limit" in reasons[1] and "repeats" in reasons[2]


def test_without_exactly_once_a_batch_is_claimed_together_at_its_due_time(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    target = Topic()
    off = settings.model_copy(update={"worker_kafka_exactly_once": False})
    worker = driver.worker(off, {"kafka": target})
    exs = jobs(3, due_in_ms=1_000)
    send_batch(driver, topics, *exs)
    driver.turn(worker, times=2)
    assert (target.calls, worker.holdings.claimed) == ([], {})  # never claimed ahead
    driver.advance(1_000)
    driver.turn_until(lambda: len(target.calls) == 3, worker)
    assert delivered(driver) == []
    assert driver.cluster.committed(GROUP)[(topics.executions, 0)] == 1


def test_the_batchs_due_instant_is_its_executions(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """An entry due at another instant than its batch is refused by name (a batch moves at one
    due time); the rest is taken."""
    worker = driver.worker(settings, {"kafka": Topic()})
    now, later = execution("j0"), execution("j1", due_in_ms=1_000)
    record = batch(now, now).model_copy(
        update={"executions": [CODEC.encode(now), CODEC.encode(later)]}
    )
    driver.send(topics.executions, record, key="acme", partition=0)
    driver.turn(worker, times=2)
    assert delivered(driver) == [CODEC.encode(now)]
    [rejected] = driver.records(topics.rejected, REJECTED)
    assert "entry 1" in getattr(rejected, "reason", "")


def test_a_run_revoked_out_of_a_batch_stays_revoked_when_the_worker_dies_before_its_due_time(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """w1 reads a batch due later and a revocation of one of its runs, and commits; after its
    death, the next owner reads the batch again, and the revocation with it (the commit held
    its offset open with the batch's), and delivers the other runs only. Caught by the upgrade
    test in 0.14.0: a paused job's run, batched with another job's, ran after a restart."""
    w1 = driver.worker(settings, {"kafka": Topic()}, instance_id="w1")
    values = batch_and_revocation(driver, topics, 5_000)
    read_and_committed(driver, w1)  # the batch and the revocation held
    assert driver.cluster.committed(GROUP)[(topics.executions, 0)] == 0
    driver.crash(w1)
    w2 = driver.worker(settings, {"kafka": Topic()}, instance_id="w2")
    driver.advance(5_000)
    driver.turn(w2, times=3)
    assert delivered(driver) == [values[0], values[2]]
    assert sorted(o.job_id for o in outcomes(driver, topics)) == ["j0", "j2"]
    assert driver.cluster.committed(GROUP)[(topics.executions, 0)] == 2


def test_a_revocation_an_older_worker_did_not_name_held_is_read_again_after_a_take_over(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """A worker before 0.15.0 named only the batch held in its commit, not the revocation
    after it. The next owner, reading the partition again up to where that worker had read,
    still applies every revocation on the way (the upgrade test, from 0.14.0 with batches on);
    a run dispatched again after the revocation (its job resumed) stands."""
    w1 = driver.worker(settings, {"kafka": Topic()}, instance_id="w1")
    values = batch_and_revocation(driver, topics, 5_000)
    read_and_committed(driver, w1)
    group = driver.cluster.group(GROUP)
    offset, _meta = group.offsets[(topics.executions, 0)]
    group.offsets[(topics.executions, 0)] = (offset, encode_metadata([0], 2))  # as before 0.15.0
    driver.crash(w1)
    again = jobs(1, due_in_ms=5_000, first=1)[0]  # j1 dispatched again, after the revocation
    driver.send(topics.executions, again, key="acme", partition=0)
    w2 = driver.worker(settings, {"kafka": Topic()}, instance_id="w2")
    driver.advance(5_000)
    driver.turn(w2, times=3)
    got = delivered(driver)
    assert len(got) == 3 and set(got) == {values[0], values[2], CODEC.encode(again)}
    assert sorted(o.job_id for o in outcomes(driver, topics)) == ["j0", "j1", "j2"]
