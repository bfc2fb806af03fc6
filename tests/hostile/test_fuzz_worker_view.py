"""Issue 41, item 1: no record stops a worker or the query view. Near-valid JSON and Avro
(tests/hostile/near_valid.py) read by the worker (`Worker._read`: an unusable execution is
queued as a `rejected` record with a code and a reason) and applied by the view
(`Materializer._apply`: skipped and counted, what it wrote taken back); nothing raises."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.models import ExecutionRequested, ExecutionRevoked, Rejected, ScheduleDefinition
from kadence.settings import KadenceSettings
from kadence.topics import EXECUTIONS, Topics
from streams.views.materializer import Materializer
from streams.views.store import ViewStore, job_key, offset_key
from streams.worker.loop import Worker
from testkit.driver import Driver
from testkit.driver.targets import InProcessTarget
from tests.hostile.near_valid import EXAMPLES, near_valid

CODEC = Codec()
SETTINGS = KadenceSettings(namespace="fuzz", partitions=2, execution_partitions=2)
TOPICS = Topics(SETTINGS)
KEYS = st.sampled_from([b"acme", b"acme/nightly-report", None, b"\xff", b"acme/other"])


class Message:
    """A consumed record, as confluent_kafka's Message answers."""

    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None, value: Any):
        self._where = (topic, partition, offset)
        self._key, self._value = key, value

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._where[0]

    def partition(self) -> int:
        return self._where[1]

    def offset(self) -> int:
        return self._where[2]

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value  # type: ignore[no-any-return]

    def headers(self) -> list[tuple[str, str | bytes | None]]:
        return [("kadence-type", b"\xff\xfe"), ("x" * 300, b"y" * 70_000)]

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)


@pytest.fixture(scope="module")
def driver() -> Iterator[Driver]:
    d = Driver()
    d.provision(SETTINGS)
    yield d
    d.close()


@pytest.fixture(scope="module")
def worker(driver: Driver) -> Worker:
    return driver.worker(SETTINGS, {"handler": InProcessTarget(driver.clock)})


OFFSETS = iter(range(10**9))


@settings(max_examples=400)
@given(value=near_valid(["ExecutionRequested", "ExecutionRevoked"]), key=KEYS)
def test_near_valid_executions_are_taken_or_rejected_never_raised(
    worker: Worker, value: bytes, key: bytes | None
) -> None:
    offset = next(OFFSETS)
    rejects = len(worker._rejects)
    worker._read(Message(TOPICS.executions, offset % 2, offset, key, value))
    try:
        record = EXECUTIONS.decode(CODEC, value)
    except DecodeError:
        [(topic, partition, _key, raw, _headers)] = worker._rejects[rejects:]
        assert (topic, partition) == (TOPICS.rejected, offset % 2)
        refusal = CODEC.decode_as(raw, Rejected)
        assert refusal.code and refusal.reason and refusal.offset == offset
        return
    assert isinstance(record, ExecutionRequested | ExecutionRevoked)
    assert len(worker._rejects) == rejects  # a good record is taken, not refused


def test_an_unexpected_error_taking_an_execution_is_a_rejected_record(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "_take", lambda *_a: 1 / 0)
    rejects = len(worker._rejects)
    good = CODEC.encode(EXAMPLES["ExecutionRequested"])
    worker._read(Message(TOPICS.executions, 0, next(OFFSETS), b"acme", good))
    [(_t, _p, _k, raw, _h)] = worker._rejects[rejects:]
    refusal = CODEC.decode_as(raw, Rejected)
    assert refusal.code == "processing_error" and "ZeroDivisionError" in refusal.reason


@pytest.fixture(scope="module")
def view(driver: Driver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Materializer]:
    store = ViewStore(tmp_path_factory.mktemp("view") / "store")
    m = Materializer(SETTINGS, store, driver.clock, clients=driver.clients)
    yield m
    m.consumer.close()
    store.close()


VIEW_INPUTS = st.one_of(
    st.tuples(st.just(TOPICS.schedules), near_valid(["ScheduleDefinition"]) | st.none()),
    st.tuples(st.just(TOPICS.history), near_valid(["HistoryRecord"])),
    st.tuples(st.just(TOPICS.outcomes), near_valid(["ExecutionOutcome"])),
    st.tuples(st.just(TOPICS.dead_letter), near_valid(["DeadLetter"])),
)


def _counts(m: Materializer) -> int:
    return m.applied + m.skipped + m.failed + m.refused


@settings(max_examples=400)
@given(given_input=VIEW_INPUTS, key=KEYS)
def test_near_valid_records_are_applied_or_skipped_never_raised(
    view: Materializer, given_input: tuple[str, bytes | None], key: bytes | None
) -> None:
    topic, value = given_input
    offset = next(OFFSETS)
    before, failed = _counts(view), view.failed
    view._apply(Message(topic, 0, offset, key, value))
    assert _counts(view) == before + 1
    assert view.failed == failed, "a decodable record the view could not apply"
    assert view.store.offset(topic, 0) == offset + 1
    view.store.flush()


def test_a_record_that_fails_half_way_leaves_nothing_but_its_offset(
    view: Materializer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The view has no `rejected` record to write: the record is skipped, counted in `failed`,
    and what it wrote before failing is taken back (no half-applied job)."""
    definition = EXAMPLES["ScheduleDefinition"]
    assert isinstance(definition, ScheduleDefinition)

    def half(store: ViewStore, key: bytes, *_a: Any, **_k: Any) -> None:
        store.put(job_key("acme", "half"), {"definition": {"version": 1}})
        raise RuntimeError("a bug half way")

    monkeypatch.setattr("streams.views.apply.apply_definition", half)
    failed, offset = view.failed, next(OFFSETS)
    view._apply(Message(TOPICS.schedules, 1, offset, b"acme/half", CODEC.encode(definition)))
    assert view.failed == failed + 1
    assert view.store.get(job_key("acme", "half")) is None
    assert view.store.pending[offset_key(TOPICS.schedules, 1)] == str(offset + 1).encode()


def test_a_flood_of_failures_logs_a_few_lines(
    view: Materializer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(*_a: Any, **_k: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("streams.views.apply.apply_history", boom)
    record = CODEC.encode(EXAMPLES["HistoryRecord"])
    for _ in range(1_000):
        view._apply(Message(TOPICS.history, 0, next(OFFSETS), b"acme/nightly-report", record))
    lines = [r for r in caplog.records if "view cannot apply" in r.getMessage()]
    assert len(lines) == 1  # once per key a minute; the rest counted
    assert view._limit.held_back == 999
