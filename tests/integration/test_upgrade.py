"""An upgrade from the previous release (issue 43, item 2): a stack of it (`release.PREVIOUS`,
its source from git, testkit/release.py) runs jobs of every kind (cron jobs to a webhook and to
a Kafka topic, one-offs, a paused job), stops, and this release's processes start on the same
namespace, topics and state folders, as docs/operations.md#upgrading replaces them. Two of the
jobs' states are first written back in older forms (state v3, and v2 with the definition
inside, with the dump code of those builds) as a store restored through the new release.
Nothing is lost: every job is there with its definition and state, each run happens once its
due time has come (none lost, none early, a duplicate only under its own execution id), history
runs on without a gap, and the paused job stays paused."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from kadence import __version__
from kadence.codec import Codec
from kadence.fired_series import runs_of
from kadence.models import (
    Decision,
    HistoryRecord,
    HttpTarget,
    KafkaTarget,
    PauseJob,
    ScheduleDefinition,
)
from kadence.settings import KadenceSettings
from kadence.target_topics import target_topic
from kadence.timeengine.identity import execution_id
from kadence.topics import Topics
from streams.runtime.store import pack, payload_of, wake_of
from streams.scheduler.state import JobState, load_state
from streams.scheduler.stored import definition_key
from testkit import release
from testkit.stack import Stack, execution_settings, until
from testkit.target_server import TargetServer
from testkit.topic_reader import read_to_end
from tests.conftest import IN_CI
from tests.scheduler.test_state_formats import dump_v2, dump_v3

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(240)]
CODEC = Codec()
SECOND = 1_000
OLD_PHASE_S = 12
"""How long the previous release runs after the first occurrence."""
ONE_OFF_AFTER_S = 45
"""The second one-off's due time, after the first occurrence: past the upgrade, and more than
the look-ahead (30 s) after the previous release stops, so this release dispatches it."""
END_S = 55
"""Occurrences are checked up to here (after the first), well past the upgrade."""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    try:
        release.extract(tmp_path / "previous")
    except release.MissingReleaseError as exc:
        if IN_CI:
            pytest.fail(f"{exc} (CI=true: the upgrade test fails, never skips)", pytrace=False)
        pytest.skip(str(exc))
    return tmp_path / "previous"


@pytest.fixture
def server() -> Iterator[TargetServer]:
    srv = TargetServer().start()
    yield srv
    srv.stop()


def jobs(t0: datetime, url: str) -> dict[str, ScheduleDefinition]:
    def job(job_id: str, schedule: dict[str, Any], target: Any) -> ScheduleDefinition:
        return ScheduleDefinition.model_validate(
            {"tenant": "acme", "job_id": job_id, "version": 3, "schedule": schedule,
             "target": target, "payload": f"{job_id} payload".encode(), "overlap": "allow"}
        )  # fmt: skip

    every = {"kind": "cron", "start_at": t0, "spread_s": 0}
    return {
        "tick": job("tick", {**every, "expression": "* * * * * *"}, KafkaTarget(topic="ticks")),
        "web": job(
            "web",
            {**every, "expression": "*/2 * * * * *"},
            HttpTarget(url=f"{url}/ok", secret_ref="test"),
        ),
        "paused": job("paused", {**every, "expression": "* * * * * *"}, KafkaTarget(topic="p")),
        "once-old": job(
            "once-old",
            {"kind": "once", "run_at": t0 + timedelta(seconds=3)},
            KafkaTarget(topic="o"),
        ),
        "once-new": job(
            "once-new",
            {"kind": "once", "run_at": t0 + timedelta(seconds=ONE_OFF_AFTER_S)},
            HttpTarget(url=f"{url}/ok", secret_ref="test"),
        ),
    }


def stored(settings: KadenceSettings) -> dict[bytes, tuple[int, bytes | None]]:
    """The scheduler changelog's last value (packed) of every key, with its partition."""
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for m in read_to_end(settings.bootstrap_servers, Topics(settings).scheduler_changelog):
        out[m.key() or b""] = (m.partition() or 0, m.value())
    return out


def state_of(values: dict[bytes, tuple[int, bytes | None]], key: bytes) -> JobState:
    _p, value = values[key]
    assert value is not None, f"{key!r} deleted"
    raw = payload_of(value)
    _dp, definition = values.get(definition_key(key), (0, None))
    split = raw[:3] in (b"KS\x03", b"KS\x04")
    return load_state(raw, payload_of(definition) if split and definition else None)


def store_as_older_build(settings: KadenceSettings, v3: bytes, v2: bytes) -> None:
    """Write the states of `v3` and `v2` (job keys) back as those builds stored them (their
    own dump code, tests/scheduler/test_state_formats.py) on the changelog the new scheduler
    restores its store from: v3 keeps the definition under its own key, v2 holds it inside
    (its definition record deleted)."""
    values = stored(settings)
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers, "acks": "all"})
    changelog = Topics(settings).scheduler_changelog
    for key, dump in ((v3, dump_v3), (v2, dump_v2)):
        partition, value = values[key]
        assert value is not None
        old = dump(state_of(values, key), [])
        producer.produce(changelog, pack(wake_of(value), old), key, partition=partition)
        if dump is dump_v2:
            producer.produce(changelog, None, definition_key(key), partition=partition)
    assert producer.flush(30) == 0


def delivered(settings: KadenceSettings, topic: str) -> list[tuple[str, int, int]]:
    """(execution id, due ms, produced ms) of each record on the tenant's `topic`."""
    out = []
    name = target_topic(settings.namespace, "acme", topic)
    for m in read_to_end(settings.bootstrap_servers, name):
        headers = {str(pair[0]): text(pair[1]) for pair in m.headers() or []}
        due = datetime.fromisoformat(headers["kadence-due-at"])
        out.append((headers["kadence-execution-id"], ms(due), m.timestamp()[1]))
    return out


def text(value: str | bytes | None) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def check_runs(runs: list[tuple[str, int, int]], key: str, expected: list[int]) -> None:
    """Each expected occurrence ran (none lost), none before its due time, none unexpected;
    a run twice only under its own execution id."""
    assert sorted({due for _id, due, _at in runs if due <= expected[-1]}) == expected, key
    for run_id, due, at in runs:
        assert run_id == execution_id(key, due), (run_id, due)
        assert at >= due, f"{run_id} ran {due - at} ms early"


def fired_nominals(history: list[HistoryRecord], job_id: str) -> list[int]:
    fired = [h for h in history if h.job_id == job_id and h.decision is Decision.fired]
    return sorted({ms(r.nominal_at) for h in fired for r in runs_of(h) if r.nominal_at})


def test_a_stack_of_the_previous_release_upgrades_without_losing_anything(
    settings: KadenceSettings, tree: Path, server: TargetServer, tmp_path: Path
) -> None:
    xs = execution_settings(settings)
    old_code = release.imported_from(tree, xs)
    assert all(path.startswith(str(tree)) for path in old_code), old_code
    old = release.start_stack(xs, tmp_path, tree)
    new: Stack | None = None
    try:
        t0 = datetime.fromtimestamp(math.ceil(time.time()) + 3, UTC)
        defined = jobs(t0, server.url)
        release.send_from(tree, xs, *defined.values())
        pause_at = t0 + timedelta(seconds=5)
        time.sleep(max(0.0, pause_at.timestamp() - time.time()))
        pause = PauseJob(
            tenant="acme", job_id="paused", request_id="upgrade-pause", issued_at=pause_at
        )
        release.send_from(tree, xs, pause)
        paused_by = time.time()  # written: the scheduler applies it within a moment
        time.sleep(max(0.0, t0.timestamp() + OLD_PHASE_S - time.time()))
        until(lambda: len(delivered(xs, "o")) >= 1, 20, f"the first one-off, by {release.PREVIOUS}")
        old.stop()
        stopped_at = time.time()
        assert f"kadence-scheduler {release.PREVIOUS}" in old.scheduler.output()
        store_as_older_build(xs, b"acme/web", b"acme/paused")

        new = release.start_stack(xs, tmp_path)
        assert f"kadence-scheduler {__version__}" in new.scheduler.output()
        assert f'kadence_build_info{{version="{__version__}"}} 1.0' in new.metrics(
            new.scheduler_metrics
        )
        end = t0 + timedelta(seconds=END_S)
        time.sleep(max(0.0, end.timestamp() + 3 - time.time()))
        values = stored(xs)
    finally:
        old.stop()
        if new is not None:
            new.stop()

    # every job is there, with the definition it was given and its state
    for job_id, definition in defined.items():
        state = state_of(values, f"acme/{job_id}".encode())
        assert state.definition(CODEC) == definition, job_id
        assert state.paused is (job_id == "paused"), job_id
    for key in (b"acme/web", b"acme/paused"):  # restored from v3 and v2, written since as v4
        assert payload_of(values[key][1] or b"")[:3] == b"KS\x04", key

    # each run happened when due: none lost, none early
    seconds = range(ms(t0), ms(end) + 1, SECOND)
    check_runs(delivered(xs, "ticks"), "acme/tick", list(seconds))
    hits = [(h.headers["idempotency-key"], h.headers["kadence-due-at"], h.at) for h in server.hits]
    web = [(i, ms(datetime.fromisoformat(d)), int(at * 1000)) for i, d, at in hits]
    even = [s for s in seconds if s // SECOND % 2 == 0]  # */2: the even seconds of each minute
    check_runs([w for w in web if "/web@" in w[0]], "acme/web", even)
    check_runs(delivered(xs, "o"), "acme/once-old", [ms(t0) + 3 * SECOND])
    once_new = [w for w in web if "/once-new@" in w[0]]
    check_runs(once_new, "acme/once-new", [ms(t0) + ONE_OFF_AFTER_S * SECOND])

    # history runs on across the upgrade; the paused job ran only before its pause
    history = until(lambda: [h for h in release_history(xs) if h.nominal_at], 30, "history")
    assert fired_nominals(history, "tick")[: len(seconds)] == list(seconds)
    assert fired_nominals(history, "web")[: len(even)] == even
    paused_runs = delivered(xs, "p")
    last_run = ms(datetime.fromtimestamp(paused_by, UTC)) + 2 * SECOND
    assert paused_runs and all(due <= last_run for _i, due, _at in paused_runs), paused_runs
    skipped = [
        ms(h.nominal_at)
        for h in history
        if h.job_id == "paused" and h.decision is Decision.skipped_paused and h.nominal_at
    ]
    assert max(skipped) >= ms(end) and min(skipped) <= stopped_at * 1000, "skips recorded"


def release_history(settings: KadenceSettings) -> list[HistoryRecord]:
    name = Topics(settings).history
    return [
        CODEC.decode_as(m.value(), HistoryRecord)
        for m in read_to_end(settings.bootstrap_servers, name)
        if m.value()
    ]
