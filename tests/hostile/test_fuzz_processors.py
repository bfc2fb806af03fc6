"""Issue 41, item 1: no record stops the scheduler or the reaper. Near-valid JSON and Avro
(tests/hostile/near_valid.py) through each processor's per-record entry as the runtime calls it
(`Task.attempt(process, refuse)`), then its timers as the runtime fires them
(`Task.attempt(fire, quarantine)`): nothing raises out of a unit, `refuse` and `quarantine`
never fail, every record written is a readable Kadence record, and a record whose processing
failed is on `rejected` with a code and a reason."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kadence.clock import datetime_to_ms
from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.examples import T0
from kadence.models import Rejected
from kadence.settings import KadenceSettings
from kadence.timeengine.zones import tzdb_version
from kadence.topics import COMMANDS, LEASES, OUTCOMES, SCHEDULER_CONTROL, SCHEDULES, Topics
from streams.reaper.processor import ReaperConfig, ReaperProcessor
from streams.runtime.records import InputRecord
from streams.runtime.store import MemoryStore
from streams.runtime.task import Task
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor
from tests.hostile.near_valid import EXAMPLES, near_valid

CODEC = Codec()
TOPICS = Topics(KadenceSettings(partitions=1))
NOW = datetime_to_ms(T0) - 60_000
KEYS = st.sampled_from([b"acme/nightly-report", b"acme/other", b"\xff", b"", b"acme/~reports"])
Out = list[tuple[Any, ...]]
SPECS = {
    spec.name("kadence"): spec
    for spec in (SCHEDULES, COMMANDS, SCHEDULER_CONTROL, OUTCOMES, LEASES)
}
"""How each input topic decodes (JSON where a person may write it, of the types it carries)."""


class Harness:
    """One partition's task over a memory store (seeded), and what it wrote."""

    def __init__(self, changelog: str, seed: MemoryStore | None = None) -> None:
        store = MemoryStore()
        if seed is not None:
            store.values, store.due = dict(seed.values), dict(seed.due)
        self.task = Task(0, store, NOW, 60_000)
        self.task.changelog = changelog
        self.out: Out = []
        self.task._emit = lambda *a: self.out.append(a)
        self.failures: list[Exception] = []

    def unit(self, work: Callable[[], None], on_error: Callable[[Exception], None]) -> bool:
        """`work` as the runtime runs it; a failing `on_error` is noted (the runtime would only
        log it: the input would go without a rejected record)."""

        def handled(exc: Exception) -> None:
            try:
                on_error(exc)
            except Exception as failed:
                self.failures.append(failed)
                raise

        return self.task.attempt(work, handled)

    def commit(self) -> None:
        self.task.committed(None)

    def written(self) -> Out:
        """Records on Kadence topics (the changelog aside), each checked to be readable."""
        found = [o for o in self.out if o[0] != self.task.changelog]
        for topic, _p, _key, value, _headers in found:
            if value is not None:
                CODEC.decode(value)  # raises if anything written is not a Kadence record
            assert topic.startswith("kadence.")
        return found

    def refusals(self, before: int) -> list[Rejected]:
        return [
            CODEC.decode_as(o[3], Rejected) for o in self.out[before:] if o[0] == TOPICS.rejected
        ]


def feed(h: Harness, process: Any, refuse: Any, record: InputRecord) -> None:
    before = len(h.out)
    ok = h.unit(partial(process, h.task, record, NOW), partial(refuse, h.task, record, now_ms=NOW))
    assert not h.failures, h.failures
    refused = h.refusals(before)
    assert all(r.code and r.reason for r in refused)
    if not ok:
        assert refused, "processing failed and no rejected record says why"
    if record.value is None:
        return  # a tombstone: a delete
    try:
        SPECS[record.topic].decode(CODEC, record.value)
    except DecodeError:
        assert refused, "an undecodable record went without a rejected record"


def fire_all(h: Harness, fire: Any, quarantine: Any, until_ms: int) -> None:
    """The timers due by `until_ms`, each fired at its wake time as a unit (a few rounds:
    firing sets new ones)."""
    for _ in range(5):
        h.commit()
        store = h.task.store
        assert isinstance(store, MemoryStore)
        wakes = sorted(w for w in store.due.values() if w <= until_ms)
        if not wakes:
            return
        at = max(wakes[0], NOW)
        for key in h.task.due(at, 50):
            h.unit(partial(fire, h.task, key, at), partial(quarantine, h.task, key, now_ms=at))
            assert not h.failures, h.failures


# -- the scheduler ------------------------------------------------------------------------------

SCHEDULER = SchedulerProcessor(SchedulerConfig(TOPICS, 1, 1, tzdb_version()), CODEC)


def _seeded() -> MemoryStore:
    """The example job, stored as the scheduler stores it, so commands and outcomes find it."""
    h = Harness(TOPICS.scheduler_changelog)
    job = EXAMPLES["ScheduleDefinition"]
    record = InputRecord(TOPICS.schedules, 0, 0, b"acme/nightly-report", CODEC.encode(job), [], NOW)
    assert h.unit(partial(SCHEDULER.process, h.task, record, NOW), lambda exc: None)
    h.commit()
    assert isinstance(h.task.store, MemoryStore) and h.task.get(b"acme/nightly-report")
    return h.task.store


SEED = _seeded()
SCHEDULER_INPUTS = st.one_of(
    st.tuples(st.just(TOPICS.schedules), near_valid(["ScheduleDefinition"]) | st.none()),
    st.tuples(
        st.just(TOPICS.commands),
        near_valid(["TriggerNow", "Backfill", "CancelRun", "PauseJob", "ResumeJob"], typed=True),
    ),
    st.tuples(
        st.just(TOPICS.scheduler_control),
        near_valid(["JobMoved", "TenantCircuit", "ReplayDeadLetter"], typed=True),
    ),
    st.tuples(st.just(TOPICS.outcomes), near_valid(["ExecutionOutcome"])),
)


@settings(max_examples=300)
@given(inputs=st.lists(SCHEDULER_INPUTS, min_size=1, max_size=3), key=KEYS)
def test_near_valid_inputs_never_stop_the_scheduler(
    inputs: list[tuple[str, bytes | None]], key: bytes
) -> None:
    h = Harness(TOPICS.scheduler_changelog, SEED)
    p = SCHEDULER
    for offset, (topic, value) in enumerate(inputs):
        if value is None and topic != TOPICS.schedules:
            continue
        feed(h, p.process, p.refuse, InputRecord(topic, 0, offset, key, value, [], NOW))
    fire_all(h, p.fire, p.quarantine, NOW + 2 * 86_400_000)
    h.written()


# -- the reaper ---------------------------------------------------------------------------------


class Reader:
    """Reads back the example execution, or bytes that are not one."""

    def __init__(self, value: bytes | None) -> None:
        self.value = value

    def read(self, refs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes | None]:
        return dict.fromkeys(refs, self.value)


@settings(max_examples=300)
@given(
    values=st.lists(near_valid(["LeaseSnapshot", "LeaseEvent"]), min_size=1, max_size=3),
    key=KEYS,
    read_back=st.sampled_from([CODEC.encode(EXAMPLES["ExecutionRequested"]), b"\xc3\x01", None]),
)
def test_near_valid_leases_never_stop_the_reaper(
    values: list[bytes], key: bytes, read_back: bytes | None
) -> None:
    cfg = ReaperConfig(TOPICS, 1, 1)
    p = ReaperProcessor(cfg, CODEC, reader=Reader(read_back))
    h = Harness(TOPICS.reaper_changelog)
    for offset, value in enumerate(values):
        feed(h, p.process, p.refuse, InputRecord(TOPICS.leases, 0, offset, key, value, [], NOW))
    fire_all(h, p.fire, p.quarantine, NOW + 2 * 86_400_000)
    h.written()


def test_a_stored_definition_past_a_new_bound_is_quarantined_naming_the_field() -> None:
    """The upgrade of issue 41: a job stored by an earlier release with a version the models now
    refuse (it fit the Avro long) does not stop the scheduler; at its next firing it is
    quarantined with a history record naming the field (docs/operations.md)."""
    h = Harness(TOPICS.scheduler_changelog)
    job = EXAMPLES["ScheduleDefinition"]
    old = job.model_copy(update={"version": 2**60})  # what an earlier release accepted
    record = InputRecord(TOPICS.schedules, 0, 0, b"acme/nightly-report", CODEC.encode(job), [], NOW)
    assert h.unit(partial(SCHEDULER.process, h.task, record, NOW), lambda exc: None)
    h.commit()
    raw = h.task.get(b"~def/acme/nightly-report")
    assert raw is not None and CODEC.encode(job) in raw
    h.task.put(b"~def/acme/nightly-report", raw.replace(CODEC.encode(job), CODEC.encode(old)), None)
    h.task.cache.clear()
    h.out.clear()
    fire_all(h, SCHEDULER.fire, SCHEDULER.quarantine, NOW + 2 * 86_400_000)
    history = [CODEC.decode(o[3]) for o in h.out if o[0] == TOPICS.history]
    quarantined = [r for r in history if getattr(r, "decision", None) == "quarantined"]
    assert quarantined and "version" in quarantined[0].reason  # type: ignore[attr-defined]
