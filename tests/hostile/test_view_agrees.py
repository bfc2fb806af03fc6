"""The query view shows exactly what the scheduler accepted (issue 14, item 11): the same
records, in the same order, through the scheduler processor and through the view, leave the
same version of every job, whatever an attacker or a race writes onto `schedules`."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kadence.codec import Codec
from kadence.models import ScheduleDefinition
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.store import Batch, MemoryStore
from streams.runtime.task import Task
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor
from streams.scheduler.stored import stored_state
from streams.views import apply
from streams.views.query import ViewQueries
from streams.views.store import ViewStore, job_key

CODEC = Codec()
PARTITIONS = 3
NOW = 1_796_000_000_000


def definition(tenant: str, job_id: str, version: int, note: str) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": tenant,
            "job_id": job_id,
            "version": version,
            "schedule": {"kind": "cron", "expression": "0 0 1 1 *"},
            "target": {"kind": "kafka", "topic": "out"},
            "description": note,
        }
    )


class Both:
    """One scheduler task per partition and one view, fed the same records."""

    def __init__(self, tmp: Path) -> None:
        topics = Topics(KadenceSettings(partitions=PARTITIONS))
        self.topic = topics.schedules
        self.proc = SchedulerProcessor(SchedulerConfig(topics, PARTITIONS, 1, "2025b"), CODEC)
        self.tasks = {p: Task(p, MemoryStore(), NOW, 60_000) for p in range(PARTITIONS)}
        for task in self.tasks.values():
            task._emit = lambda *_a: None
            task.changelog = topics.scheduler_changelog
        self.view = ViewStore(tmp)
        self.offset = 0

    def write(self, key: bytes, d: ScheduleDefinition, partition: int | None = None) -> None:
        p = partition_for(d.routing_key, PARTITIONS) if partition is None else partition
        self.offset += 1
        rec = InputRecord(self.topic, p, self.offset, key, CODEC.encode(d), [], NOW)
        task = self.tasks[p]
        task.attempt(
            partial(self.proc.process, task, rec, NOW),
            partial(self.proc.refuse, task, rec, now_ms=NOW),
        )
        task.store.apply(task.batch)
        task.batch = Batch()
        apply.apply_definition(
            self.view,
            key,
            d,
            "0",
            partition=p,
            partitions=PARTITIONS,
            source=f"{p}:{self.offset}",
        )
        self.view.flush()

    def scheduler_has(self, key: str) -> str | None:
        for task in self.tasks.values():
            state = stored_state(task.get, key.encode())
            if state is not None:
                d = state.definition(CODEC)
                return f"{d.version}:{d.description}"
        return None

    def view_has(self, tenant: str, job_id: str) -> str | None:
        doc = self.view.get(job_key(tenant, job_id))
        if doc is None:
            return None
        return f"{doc['definition']['version']}:{doc['definition']['description']}"


def test_the_first_of_two_writes_of_one_version_wins_in_both(tmp_path: Path) -> None:
    both = Both(tmp_path)
    both.write(b"acme/race", definition("acme", "race", 1, "created"))
    both.write(b"acme/race", definition("acme", "race", 2, "first writer"))
    both.write(b"acme/race", definition("acme", "race", 2, "second writer"))
    assert both.scheduler_has("acme/race") == both.view_has("acme", "race") == "2:first writer"
    doc = both.view.get(job_key("acme", "race"))
    assert doc is not None
    assert doc["refused"]["source"] == f"{partition_for('acme/race', PARTITIONS)}:3"
    assert "not newer than 2" in doc["refused"]["reason"]


def test_a_record_keyed_for_one_tenant_naming_another_is_shown_for_neither(
    tmp_path: Path,
) -> None:
    both = Both(tmp_path)
    forged = definition("globex", "steal", 1, "mallory's body")
    both.write(b"acme/steal", forged, partition=partition_for("acme/steal", PARTITIONS))
    assert both.scheduler_has("acme/steal") is None
    assert both.scheduler_has("globex/steal") is None
    assert both.view_has("acme", "steal") is None
    assert both.view_has("globex", "steal") is None
    queries = ViewQueries(both.view)
    assert queries.jobs("acme", NOW, 100, "") == []
    assert queries.jobs("globex", NOW, 100, "") == []


def test_a_misrouted_record_is_shown_by_neither(tmp_path: Path) -> None:
    both = Both(tmp_path)
    d = definition("acme", "lost", 1, "wrong partition")
    wrong = (partition_for(d.routing_key, PARTITIONS) + 1) % PARTITIONS
    both.write(d.key.encode(), d, partition=wrong)
    assert both.scheduler_has("acme/lost") is None
    assert both.view_has("acme", "lost") is None


writes = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),  # job
        st.integers(1, 4),  # version
        st.booleans(),  # forged: keyed for acme, body for globex
        st.booleans(),  # misrouted
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60)
@given(writes=writes)
def test_any_sequence_of_writes_leaves_the_same_job_in_both(
    tmp_path_factory: Any, writes: list[tuple[str, int, bool, bool]]
) -> None:
    both = Both(tmp_path_factory.mktemp("view"))
    for i, (job, version, forged, misrouted) in enumerate(writes):
        tenant = "globex" if forged else "acme"
        d = definition(tenant, job, version, f"write {i}")
        key = f"acme/{job}".encode()
        right = partition_for(f"acme/{job}", PARTITIONS)
        both.write(key, d, partition=(right + 1) % PARTITIONS if misrouted else right)
    for job in ("a", "b"):
        assert both.scheduler_has(f"acme/{job}") == both.view_has("acme", job)
        assert both.view_has("globex", job) is None
