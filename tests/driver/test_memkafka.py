"""The in-memory Kafka keeps a broker's promises: the driver tests are only as good as these."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, TopicPartition
from confluent_kafka.cimpl import NewTopic

from kadence.clock import FakeClock
from kadence.partitioning import partition_for
from streams.kafkaio.clients import Clients
from streams.kafkaio.errors import fatal, requires_abort, retriable
from testkit.driver.memkafka import (
    Cluster,
    MemoryClients,
    MemoryConsumer,
    MemoryProducer,
    abort_error,
    fatal_error,
    retriable_error,
)


@pytest.fixture
def cluster() -> Cluster:
    c = Cluster(FakeClock(1_000))
    c.create_topic("in", 2)
    c.create_topic("out", 2)
    return c


@pytest.fixture
def clients(cluster: Cluster) -> MemoryClients:
    return MemoryClients(cluster)


def values(cluster: Cluster, topic: str, *, committed_only: bool = True) -> list[bytes | None]:
    return [m.value() for m in cluster.messages(topic, committed_only=committed_only)]


def producer(clients: MemoryClients, tid: str = "t") -> MemoryProducer:
    p = clients.transactional_producer(tid)
    p.init_transactions()
    return p


def subscribed(clients: MemoryClients, name: str, group: str = "g") -> tuple[MemoryConsumer, Any]:
    """A consumer of `in` that records its rebalance callbacks."""
    seen: list[tuple[str, list[int]]] = []
    consumer = clients.consumer(group, name)
    consumer.subscribe(
        ["in"],
        on_assign=lambda _c, tps: seen.append(("assign", [tp.partition for tp in tps])),
        on_revoke=lambda _c, tps: seen.append(("revoke", [tp.partition for tp in tps])),
    )
    return consumer, seen


def test_memory_clients_satisfy_the_clients_protocol(clients: MemoryClients) -> None:
    implementation: Clients = clients  # mypy checks the protocol here
    assert implementation.consumer("g", "c") is clients.consumers[-1]


# -- records and offsets ---------------------------------------------------------------------


def test_offsets_keys_and_timestamps_as_a_broker_gives_them(
    cluster: Cluster, clients: MemoryClients
) -> None:
    plain = clients.producer("p")
    plain.produce("in", value=b"a", key=b"k", headers=[("h", "v")])
    plain.produce("in", value=b"b", key=b"k")
    plain.produce("in", value=b"c", partition=1)
    msgs = cluster.messages("in")
    keyed = partition_for(b"k", 2)
    on_keyed = [m for m in msgs if m.partition() == keyed]
    assert [(m.offset(), m.value()) for m in on_keyed][:2] == [(0, b"a"), (1, b"b")]
    assert on_keyed[0].headers() == [("h", b"v")]
    assert on_keyed[1].headers() is None
    assert all(m.timestamp() == (1, 1_000) for m in msgs)
    with pytest.raises(KafkaException) as exc:
        plain.produce("nowhere", value=b"x")
    assert exc.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_delivery_reports_come_from_poll_and_flush(clients: MemoryClients) -> None:
    plain = clients.producer("p")
    seen: list[tuple[KafkaError | None, int | None]] = []
    plain.produce(
        "out", value=b"x", partition=0, on_delivery=lambda e, m: seen.append((e, m.offset()))
    )
    assert seen == []
    assert plain.poll(0) == 1
    assert seen == [(None, 0)]


# -- transactions ----------------------------------------------------------------------------


def test_a_transaction_is_invisible_to_read_committed_until_it_commits(
    cluster: Cluster, clients: MemoryClients
) -> None:
    p = producer(clients)
    p.begin_transaction()
    p.produce("out", value=b"1", partition=0)
    assert values(cluster, "out") == []
    assert values(cluster, "out", committed_only=False) == [b"1"]
    reader = clients.consumer("r", "r")
    reader.assign([TopicPartition("out", 0, 0)])
    assert reader.consume(10, 0) == []
    assert reader.position([TopicPartition("out", 0)])[0].offset == 0  # stopped at the LSO
    p.commit_transaction()
    assert [m.value() for m in reader.consume(10, 0)] == [b"1"]
    assert reader.position([TopicPartition("out", 0)])[0].offset == 2  # past the marker
    assert reader.get_watermark_offsets(TopicPartition("out", 0)) == (0, 2)


def test_an_aborted_transaction_is_skipped_but_its_offsets_are_used(
    cluster: Cluster, clients: MemoryClients
) -> None:
    p = producer(clients)
    p.begin_transaction()
    p.produce("out", value=b"lost", partition=0)
    p.abort_transaction()
    p.begin_transaction()
    p.produce("out", value=b"kept", partition=0)
    p.commit_transaction()
    msgs = cluster.messages("out", 0)
    assert [(m.offset(), m.value()) for m in msgs] == [(2, b"kept")]  # 0 aborted, 1 its marker
    uncommitted = clients.consumer("u", "u", **{"isolation.level": "read_uncommitted"})
    uncommitted.assign([TopicPartition("out", 0, 0)])
    assert [m.value() for m in uncommitted.consume(10, 0)] == [b"lost", b"kept"]


def test_aborting_purges_undelivered_reports(clients: MemoryClients) -> None:
    p = producer(clients)
    seen: list[KafkaError | None] = []
    p.begin_transaction()
    p.produce("out", value=b"x", partition=0, on_delivery=lambda e, _m: seen.append(e))
    p.abort_transaction()
    assert len(seen) == 1
    assert seen[0] is not None
    assert seen[0].code() == KafkaError._PURGE_QUEUE


def test_offsets_sent_with_a_transaction_commit_with_it_and_only_then(
    cluster: Cluster, clients: MemoryClients
) -> None:
    consumer, _ = subscribed(clients, "c")
    consumer.consume(1, 0)  # joins: generation 1
    p = producer(clients)
    for commit in (False, True):
        p.begin_transaction()
        p.produce("out", value=b"x", partition=0)
        tp = TopicPartition("in", 0, 7, metadata="m")
        p.send_offsets_to_transaction([tp], consumer.consumer_group_metadata())
        assert cluster.committed("g") == {}  # not before the transaction commits
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
            assert cluster.committed("g") == {}
    assert cluster.committed("g") == {("in", 0): 7}
    assert values(cluster, "out") == [b"x"]
    got = consumer.committed([TopicPartition("in", 0), TopicPartition("in", 1)])
    assert [(t.offset, t.metadata) for t in got] == [(7, "m"), (OFFSET_INVALID, None)]


def test_a_new_producer_of_the_same_id_fences_the_old_and_aborts_its_transaction(
    cluster: Cluster, clients: MemoryClients
) -> None:
    old = producer(clients, "same")
    old.begin_transaction()
    old.produce("out", value=b"zombie", partition=0)
    new = producer(clients, "same")
    assert cluster.messages("out", 0) == []
    assert cluster.log("out", 0).last_stable() == cluster.log("out", 0).high  # nothing open
    for call in (old.commit_transaction, old.begin_transaction, old.abort_transaction):
        with pytest.raises(KafkaException) as exc:
            call()
        assert fatal(exc.value)
    new.begin_transaction()
    new.produce("out", value=b"ok", partition=0)
    new.commit_transaction()
    assert values(cluster, "out") == [b"ok"]


def test_the_broker_expires_a_transaction_left_open(
    cluster: Cluster, clients: MemoryClients
) -> None:
    crashed = producer(clients, "crashed")
    crashed.begin_transaction()
    crashed.produce("out", value=b"x", partition=0)
    assert cluster.log("out", 0).last_stable() == 0
    assert cluster.expire_transaction("crashed")
    assert cluster.log("out", 0).last_stable() == 2
    with pytest.raises(KafkaException) as exc:
        crashed.commit_transaction()
    assert fatal(exc.value)


def test_produce_outside_a_transaction_is_refused(clients: MemoryClients) -> None:
    p = producer(clients)
    with pytest.raises(KafkaException) as exc:
        p.produce("out", value=b"x")
    assert exc.value.args[0].code() == KafkaError._STATE


# -- groups ----------------------------------------------------------------------------------


def test_rebalance_callbacks_run_inside_consume_and_partitions_are_co_assigned(
    cluster: Cluster, clients: MemoryClients
) -> None:
    cluster.create_topic("side", 2)
    a = clients.consumer("g", "a")
    a_seen: list[list[tuple[str, int]]] = []
    a.subscribe(
        ["in", "side"],
        on_assign=lambda _c, tps: a_seen.append(sorted((tp.topic, tp.partition) for tp in tps)),
    )
    assert a_seen == []  # nothing until consume
    a.consume(1, 0)
    assert a_seen == [[("in", 0), ("in", 1), ("side", 0), ("side", 1)]]
    b = clients.consumer("g", "b")
    b_seen: list[list[tuple[str, int]]] = []
    b.subscribe(
        ["in", "side"],
        on_assign=lambda _c, tps: b_seen.append(sorted((tp.topic, tp.partition) for tp in tps)),
    )
    b.consume(1, 0)
    a.consume(1, 0)
    assert a_seen[-1] == [("in", 0), ("side", 0)]
    assert b_seen[-1] == [("in", 1), ("side", 1)]


def test_revoke_then_assign_in_a_rebalance(cluster: Cluster, clients: MemoryClients) -> None:
    a, seen = subscribed(clients, "a")
    a.consume(1, 0)
    cluster.rebalance("g")
    a.consume(1, 0)
    assert seen == [("assign", [0, 1]), ("revoke", [0, 1]), ("assign", [0, 1])]


def test_an_assigned_partition_resumes_from_the_committed_offset(
    cluster: Cluster, clients: MemoryClients
) -> None:
    plain = clients.producer("p")
    for v in (b"0", b"1", b"2"):
        plain.produce("in", value=v, partition=0)
    cluster.group("g").offsets[("in", 0)] = (2, None)
    a, _ = subscribed(clients, "a")
    assert [m.value() for m in a.consume(10, 0)] == [b"2"]


def test_a_stale_generation_cannot_send_offsets(cluster: Cluster, clients: MemoryClients) -> None:
    a, _ = subscribed(clients, "a")
    a.consume(1, 0)
    stale = a.consumer_group_metadata()
    subscribed(clients, "b")  # a new generation; a has not served it yet
    p = producer(clients)
    p.begin_transaction()
    p.produce("out", value=b"zombie", partition=0)
    with pytest.raises(KafkaException) as exc:
        p.send_offsets_to_transaction([TopicPartition("in", 0, 1)], stale)
    assert requires_abort(exc.value)
    assert exc.value.args[0].code() == KafkaError.ILLEGAL_GENERATION
    with pytest.raises(KafkaException):  # only an abort is allowed now
        p.commit_transaction()
    p.abort_transaction()
    assert values(cluster, "out") == []
    assert cluster.committed("g") == {}
    a.consume(1, 0)  # a catches up: its metadata is current again
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition("in", 0, 1)], a.consumer_group_metadata())
    p.commit_transaction()
    assert cluster.committed("g") == {("in", 0): 1}


def test_a_kicked_member_is_fenced_then_revoked_and_joins_again(
    cluster: Cluster, clients: MemoryClients
) -> None:
    a, seen = subscribed(clients, "a")
    b, _ = subscribed(clients, "b")
    a.consume(1, 0)
    b.consume(1, 0)
    zombie = a.consumer_group_metadata()
    cluster.kick("g", "a")
    b.consume(1, 0)
    assert sorted(tp.partition for tp in b.assignment()) == [0, 1]
    p = producer(clients)
    p.begin_transaction()
    with pytest.raises(KafkaException) as exc:
        p.send_offsets_to_transaction([TopicPartition("in", 0, 1)], zombie)
    assert exc.value.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID
    p.abort_transaction()
    a.consume(1, 0)
    assert seen[-2:] == [("revoke", [0]), ("assign", [0])]


def test_close_revokes_and_leaves(cluster: Cluster, clients: MemoryClients) -> None:
    a, seen = subscribed(clients, "a")
    b, _ = subscribed(clients, "b")
    a.consume(1, 0)
    b.consume(1, 0)
    a.close()
    assert seen[-1] == ("revoke", [0])
    b.consume(1, 0)
    assert len(b.assignment()) == 2
    with pytest.raises(RuntimeError):
        a.consume(1, 0)


def test_a_paused_partition_is_not_read_until_resumed_or_assigned_again(
    cluster: Cluster, clients: MemoryClients
) -> None:
    plain = clients.producer("p")
    for p in (0, 1):
        plain.produce("in", value=f"{p}a".encode(), partition=p)
    c = clients.consumer("r", "r")
    c.assign([TopicPartition("in", 0, 0), TopicPartition("in", 1, 0)])
    c.pause([TopicPartition("in", 0)])
    assert [m.value() for m in c.consume(10, 0)] == [b"1a"]
    plain.produce("in", value=b"0b", partition=0)
    assert c.consume(10, 0) == []
    c.resume([TopicPartition("in", 0)])
    assert [m.value() for m in c.consume(10, 0)] == [b"0a", b"0b"]
    c.pause([TopicPartition("in", 1)])
    c.assign([TopicPartition("in", 1, 0)])  # a new assignment starts unpaused (Backlog re-pauses)
    assert [m.value() for m in c.consume(10, 0)] == [b"1a"]


def test_partition_eof_once_per_end(cluster: Cluster, clients: MemoryClients) -> None:
    c = clients.consumer("r", "r", **{"enable.partition.eof": True})
    c.assign([TopicPartition("in", 0, 0)])
    first = c.consume(10, 0)
    errors = [e.code() for m in first if (e := m.error()) is not None]
    assert errors == [KafkaError._PARTITION_EOF]
    assert c.consume(10, 0) == []


def test_truncated_and_compacted_logs(cluster: Cluster, clients: MemoryClients) -> None:
    plain = clients.producer("p")
    for k, v in ((b"a", b"1"), (b"b", b"2"), (b"a", b"3")):
        plain.produce("in", value=v, key=k, partition=0)
    cluster.log("in", 0).compact()
    assert [(m.offset(), m.value()) for m in cluster.messages("in", 0)] == [(1, b"2"), (2, b"3")]
    cluster.log("in", 0).truncate_before(2)
    c = clients.consumer("r", "r")
    assert c.get_watermark_offsets(TopicPartition("in", 0)) == (2, 3)
    c.assign([TopicPartition("in", 0, 0)])  # before the log start: read from it
    assert [m.value() for m in c.consume(10, 0)] == [b"3"]


# -- faults ----------------------------------------------------------------------------------


def test_injected_errors_are_classified_as_the_production_code_expects(
    cluster: Cluster, clients: MemoryClients
) -> None:
    p = producer(clients)
    cluster.faults.fail("commit_transaction", retriable_error(), times=2)
    p.begin_transaction()
    p.produce("out", value=b"x", partition=0)
    for _ in range(2):
        with pytest.raises(KafkaException) as exc:
            p.commit_transaction()
        assert retriable(exc.value)
    p.commit_transaction()  # a retriable error had not failed the call: again, and it works
    assert values(cluster, "out") == [b"x"]
    assert cluster.faults.calls["commit_transaction"] == 3

    cluster.faults.fail("commit_transaction", abort_error())
    p.begin_transaction()
    p.produce("out", value=b"y", partition=0)
    with pytest.raises(KafkaException) as exc:
        p.commit_transaction()
    assert requires_abort(exc.value)
    with pytest.raises(KafkaException):
        p.commit_transaction()
    p.abort_transaction()
    assert values(cluster, "out") == [b"x"]

    cluster.faults.fail("begin_transaction", fatal_error(), client="t")
    with pytest.raises(KafkaException) as exc:
        p.begin_transaction()
    assert fatal(exc.value)
    with pytest.raises(KafkaException):
        p.abort_transaction()  # unusable for good


def test_a_fault_aimed_at_one_client_spares_the_others(
    cluster: Cluster, clients: MemoryClients
) -> None:
    one, other = producer(clients, "one"), producer(clients, "other")
    cluster.faults.fail("begin_transaction", fatal_error(), client="one")
    other.begin_transaction()
    with pytest.raises(KafkaException):
        one.begin_transaction()


def test_a_consume_fault_is_an_error_message(cluster: Cluster, clients: MemoryClients) -> None:
    c = clients.consumer("r", "r")
    cluster.faults.fail("consume", retriable_error("broker down"))
    msgs = c.consume(10, 0)
    assert len(msgs) == 1
    error = msgs[0].error()
    assert error is not None
    assert error.retriable()


def test_a_full_queue_is_a_buffer_error(cluster: Cluster, clients: MemoryClients) -> None:
    plain = clients.producer("p")
    cluster.faults.fail("produce", KafkaError(KafkaError._QUEUE_FULL, "full"))
    with pytest.raises(BufferError):
        plain.produce("out", value=b"x")
    plain.produce("out", value=b"x")


def test_a_hung_call_blocks_until_released_then_finds_itself_fenced(
    cluster: Cluster, clients: MemoryClients
) -> None:
    consumer, _ = subscribed(clients, "c")
    consumer.consume(1, 0)
    stuck = producer(clients, "tid")
    stuck.begin_transaction()
    hang = cluster.faults.hang("send_offsets_to_transaction")
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            stuck.send_offsets_to_transaction(
                [TopicPartition("in", 0, 1)], consumer.consumer_group_metadata()
            )
            outcome.append(None)
        except KafkaException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    assert hang.entered.wait(5)
    assert outcome == []
    producer(clients, "tid")  # the replacement
    hang.release()
    thread.join(5)
    assert len(outcome) == 1
    assert isinstance(outcome[0], KafkaException)
    assert fatal(outcome[0])
    assert cluster.committed("g") == {}


def test_admin_creates_and_lists_topics(cluster: Cluster, clients: MemoryClients) -> None:
    admin = clients.admin()
    futures = admin.create_topics([NewTopic("new", num_partitions=3), NewTopic("in", 2)])
    assert futures["new"].result() is None
    with pytest.raises(KafkaException):
        futures["in"].result()
    meta = admin.list_topics()
    assert sorted(meta.topics["new"].partitions) == [0, 1, 2]
    assert admin.list_topics("missing").topics["missing"].error is not None
