"""A job's `home` in the query view: the one partition every definition of it came from, while
that is so. With it a delete is one tombstone there (kadence/client.py `delete`, the ingress's
streams/ingress/placement.py); without it (the job moved, or the view cannot tell) every
partition gets one, because a scheduler partition the job left may still hold a copy."""

from __future__ import annotations

from pathlib import Path

from kadence.models import ScheduleDefinition
from kadence.partitioning import partition_for
from streams.views import apply
from streams.views.query import ViewQueries
from streams.views.store import ViewStore, job_key

PARTS = 4


def definition(version: int, concurrency_key: str | None = None) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": "tick",
            "version": version,
            "concurrency_key": concurrency_key,
            "schedule": {"kind": "cron", "expression": "* * * * *"},
            "target": {"kind": "http", "url": "https://example.com/hook"},
        }
    )


def put(store: ViewStore, d: ScheduleDefinition | None, partition: int, offset: int) -> None:
    apply.apply_definition(
        store,
        b"acme/tick",
        d,
        str(offset),
        partition=partition,
        partitions=PARTS,
        source=f"{partition}:{offset}",
    )


def home(store: ViewStore) -> object:
    store.flush()
    job = ViewQueries(store).job("acme", "tick", 0)
    assert job is not None
    return job["home"]


def where(d: ScheduleDefinition) -> int:
    return partition_for(d.routing_key, PARTS)


def _keys_on_two_partitions() -> tuple[str, str]:
    """Two concurrency keys whose jobs land on different partitions."""
    first = where(definition(1, "k0"))
    other = next(f"k{i}" for i in range(1, 100) if where(definition(1, f"k{i}")) != first)
    return "k0", other


def test_a_job_updated_where_it_lives_keeps_its_home(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "v")
    d1, d2 = definition(1), definition(2)
    put(store, d1, where(d1), 1)
    assert home(store) == where(d1)
    put(store, d2, where(d2), 2)
    assert home(store) == where(d1)


def test_a_job_that_moved_has_no_home_even_when_it_moves_back(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "v")
    a, b = _keys_on_two_partitions()
    d1, d2, d3 = definition(1, a), definition(2, b), definition(3, a)
    put(store, d1, where(d1), 1)
    put(store, d2, where(d2), 1)
    assert home(store) is None
    put(store, d3, where(d3), 2)  # back where it started: the middle partition may hold a copy
    assert home(store) is None


def test_an_older_copy_read_late_from_another_partition_takes_the_home_away(
    tmp_path: Path,
) -> None:
    """The view reads partitions in no fixed order: rebuilt, it may read the moved version
    first and the old copy's record (kept by compaction) after."""
    store = ViewStore(tmp_path / "v")
    a, b = _keys_on_two_partitions()
    d1, d2 = definition(1, a), definition(2, b)
    put(store, d2, where(d2), 1)
    assert home(store) == where(d2)
    put(store, d1, where(d1), 1)  # refused as stale, but that partition's scheduler had it
    assert home(store) is None


def test_a_job_created_again_after_a_delete_has_a_home_again(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "v")
    a, b = _keys_on_two_partitions()
    put(store, definition(1, a), where(definition(1, a)), 1)
    put(store, definition(2, b), where(definition(2, b)), 1)
    put(store, None, where(definition(2, b)), 2)
    put(store, definition(1, b), where(definition(1, b)), 3)
    assert home(store) == where(definition(1, b))


def test_a_job_stored_before_homes_were_kept_has_none(tmp_path: Path) -> None:
    """A view upgraded in place kept its docs: without `home`, an update does not invent one."""
    store = ViewStore(tmp_path / "v")
    d1, d2 = definition(1), definition(2)
    put(store, d1, where(d1), 1)
    doc = store.get(job_key("acme", "tick"))
    assert doc is not None
    store.put(job_key("acme", "tick"), {k: v for k, v in doc.items() if k != "home"})
    put(store, d2, where(d2), 2)
    assert home(store) is None


def test_known_answers_versions_homes_and_counts_at_once(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "v")
    d = definition(3)
    put(store, d, where(d), 1)
    for i in range(5):
        other = ScheduleDefinition.model_validate(
            {**d.model_dump(), "job_id": f"j{i}", "version": 1}
        )
        apply.apply_definition(
            store,
            other.key.encode(),
            other,
            "0",
            partition=where(other),
            partitions=PARTS,
            source=f"{where(other)}:0",
        )
    store.flush()
    known = ViewQueries(store).known(["acme/tick", "acme/nope", "globex/tick"], {"acme": 4})
    assert known["jobs"] == {
        "acme/tick": {"version": 3, "home": where(d)},
        "acme/nope": None,
        "globex/tick": None,
    }
    assert known["counts"] == {"acme": 4}  # six jobs, counted up to the limit asked
    assert ViewQueries(store).known([], {"acme": 100})["counts"] == {"acme": 6}
