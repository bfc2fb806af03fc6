"""State v3 and v4 through the processor (issue 29, items 1 and 2): the definition is one
changelog record per version, not rewritten by fires and outcomes; deleting the job deletes it;
a restore from the changelog gives the same job back; a per-second job's run state stays small
however many runs it has in flight (v4); and jobs stored by older builds (v1, v2, v3: written
here with those builds' own dump code) keep firing, ignore the duplicates of outcomes they
applied before, and are stored as v4 by their next write."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from kadence.codec import Codec
from kadence.models import (
    Decision,
    ExecutionRequested,
    HistoryRecord,
    KafkaTarget,
    OutcomeStatus,
    ScheduleDefinition,
)
from kadence.timeengine.identity import execution_id
from streams.runtime.store import Batch, MemoryStore, Store, payload_of
from streams.scheduler.state import JobState, dump_state, load_state
from streams.scheduler.stored import definition_key, stored_state
from tests.scheduler.test_breaker import Scheduler
from tests.scheduler.test_domain import T0
from tests.scheduler.test_domain import outcome as make_outcome

CODEC = Codec()
KEY = b"acme/j"
DEF_KEY = definition_key(KEY)
SECOND = 1_000


def per_second(version: int = 1) -> ScheduleDefinition:
    return ScheduleDefinition(
        tenant="acme",
        job_id="j",
        version=version,
        schedule={"kind": "cron", "expression": "* * * * * *", "spread_s": 0},
        target=KafkaTarget(topic="o"),
        payload=b"p" * 300,
        description="a job whose definition is bigger than its run state",
    )


class Logged(Scheduler):
    """The scheduler with its changelog records kept, as the runtime sends them."""

    def _commit(self) -> None:
        self.task.changelog_records()
        super()._commit()

    def changelog(self, key: bytes) -> list[bytes | None]:
        return [
            v for (t, _p, k, v, _h) in self.out if t == self.topics.scheduler_changelog and k == key
        ]

    def state(self) -> JobState:
        state = stored_state(self.task.get, KEY)
        assert state is not None
        return state

    def run_seconds(self, start: int, seconds: int) -> list[ExecutionRequested]:
        """Fire each second and answer each run at once (succeeded)."""
        sent: list[ExecutionRequested] = []
        for i in range(seconds):
            now = start + i * SECOND
            before = len(self.take(ExecutionRequested))
            self.tick(now)
            for ex in self.take(ExecutionRequested)[before:]:
                done = make_outcome(ex, OutcomeStatus.succeeded)
                self.feed(self.topics.outcomes, "acme/j", CODEC.encode(done), now + 100)
                sent.append(ex)
        return sent


def test_fires_and_outcomes_do_not_rewrite_the_definition(store: Store) -> None:
    s = Logged(store)
    s.feed(s.topics.schedules, "acme/j", CODEC.encode(per_second()), T0)
    sent = s.run_seconds(T0 + SECOND, 50)
    assert len(sent) == 50
    assert len(s.changelog(DEF_KEY)) == 1  # once, when the job was defined
    runs = [v for v in s.changelog(KEY) if v is not None]
    assert len(runs) == 1 + 2 * 50  # defined, then each fire and each outcome
    raw_definition = CODEC.encode(per_second())
    assert all(raw_definition not in v and len(v) < len(raw_definition) for v in runs[1:])
    assert s.state().definition(CODEC) == per_second()
    s.feed(s.topics.schedules, "acme/j", CODEC.encode(per_second(version=2)), T0 + 51 * SECOND)
    assert len(s.changelog(DEF_KEY)) == 2  # a new version: written once more
    assert s.state().definition(CODEC).version == 2
    s.run_seconds(T0 + 52 * SECOND, 5)
    assert len(s.changelog(DEF_KEY)) == 2


def test_a_deleted_job_leaves_no_definition_and_a_restore_gives_the_job_back(
    store: Store,
) -> None:
    s = Logged(store)
    s.feed(s.topics.schedules, "acme/j", CODEC.encode(per_second()), T0)
    s.run_seconds(T0 + SECOND, 20)
    restored = MemoryStore()  # the changelog replayed into an empty store, as restore does
    batch = Batch()
    for t, _p, k, v, _h in s.out:
        if t == s.topics.scheduler_changelog:
            batch.put(k, v)
    restored.apply(batch)
    again = stored_state(lambda k: payload_of(restored.get(k) or b"\0" * 8) or None, KEY)
    assert again == s.state()
    assert again is not None and again.definition(CODEC) == per_second()
    s.feed(s.topics.schedules, "acme/j", None, T0 + 30 * SECOND)
    assert s.task.get(KEY) is None
    assert s.task.get(DEF_KEY) is None
    assert s.changelog(DEF_KEY)[-1] is None  # a tombstone: compaction drops the definition
    assert s.changelog(KEY)[-1] is None


# --- the dump code of the builds before v3 (a963da1 and before), kept here as they wrote ---


def _old_body(state: JobState, finished: list[str]) -> dict[str, Any]:
    body: dict[str, Any] = {
        name: getattr(state, name)
        for name in (
            "cursor_ms",
            "created_cursor_ms",
            "next_nominal_ms",
            "next_due_ms",
            "tzdb",
            "paused",
            "paused_at_ms",
            "undispatched",
            "request_ids",
            "backfilled",
            "fired",
            "skipped",
            "missed",
            "early_ms",
        )
    }
    body["finished"] = finished
    body["running"] = [
        [r.execution_id, r.nominal_ms, r.attempt, r.expires_ms] for r in state.running
    ]
    body["buffered"] = [
        [p.execution_id, p.nominal_ms, p.due_ms, p.attempt, p.trigger] for p in state.buffered
    ]
    body["retries"] = [
        [p.execution_id, p.nominal_ms, p.due_ms, p.attempt, p.trigger] for p in state.retries
    ]
    body["dead"] = []
    body["ahead"] = []
    return body


def dump_v2(state: JobState, finished: list[str]) -> bytes:
    body = _old_body(state, finished)
    body["v"] = 2
    head = b"KS\x02" + len(state.definition_bytes).to_bytes(4, "big")
    return head + state.definition_bytes + json.dumps(body, separators=(",", ":")).encode()


def dump_v1(state: JobState, finished: list[str]) -> bytes:
    body = _old_body(state, finished)
    body["v"] = 1
    body["definition"] = base64.b64encode(state.definition_bytes).decode()
    return json.dumps(body).encode()


def dump_v3(state: JobState, finished: list[str]) -> bytes:
    """v3 as 69318ac wrote it: every running and ahead entry whole, the definition under its
    own key (kept there)."""
    body = json.loads(dump_state(state)[3:])
    body.pop("key", None)
    body["finished"] = finished
    body["running"] = [
        [r.execution_id, r.nominal_ms, r.attempt, r.expires_ms] for r in state.running
    ]
    body["ahead"] = [
        [a.execution_id, a.nominal_ms, a.due_ms, a.cursor_before_ms] for a in state.ahead
    ]
    return b"KS\x03" + json.dumps(body, separators=(",", ":")).encode()


@pytest.mark.parametrize("dump_old", [dump_v1, dump_v2, dump_v3])
def test_a_job_stored_by_an_older_build_keeps_firing_and_ignores_old_duplicates(
    store: Store, dump_old: Any
) -> None:
    s = Logged(store)
    s.feed(s.topics.schedules, "acme/j", CODEC.encode(per_second()), T0)
    sent = s.run_seconds(T0 + SECOND, 30)
    state = s.state()
    # what the older build stored for this job: its definition inside, every outcome listed
    old = dump_old(state, [f"{ex.execution_id}#1" for ex in sent])
    s.task.put(KEY, old, state.wake_ms)
    if dump_old is not dump_v3:  # the definition was inside
        s.task.put(DEF_KEY, None, None)
    s._commit()
    s.task.cache.clear()  # as after a restart: read from the store
    loaded = s.state()
    assert loaded.definition(CODEC) == per_second()
    assert (loaded.cursor_ms, loaded.fired) == (state.cursor_ms, state.fired)
    # it fires on, each second, where it was
    more = s.run_seconds(T0 + 31 * SECOND, 3)
    assert [ex.execution_id for ex in more] == [
        execution_id("acme/j", T0 + (31 + i) * SECOND) for i in range(3)
    ]
    assert s.task.get(KEY)[:3] == b"KS\x04"  # type: ignore[index]
    assert s.task.get(DEF_KEY) is not None  # the definition moved to its own key
    assert s.state().definition(CODEC) == per_second()
    # an outcome applied under the older build comes again: nothing changes
    before = s.task.get(KEY)
    history = len(s.take(HistoryRecord))
    again = make_outcome(sent[3], OutcomeStatus.failed, retryable=True)
    s.feed(s.topics.outcomes, "acme/j", CODEC.encode(again), T0 + 40 * SECOND)
    assert s.task.get(KEY) == before
    [stale] = s.take(HistoryRecord)[history:]
    assert stale.decision is Decision.failed and stale.details == {"stale": "true"}


def test_a_state_written_with_json_escapes_reads_as_the_one_written_now() -> None:
    """Builds before orjson wrote non-ASCII text as `\\u` escapes; orjson writes UTF-8.
    Both are read back to the same state, and the state written now is valid UTF-8 JSON."""
    state = JobState(
        definition_bytes=b"",
        cursor_ms=T0,
        created_cursor_ms=T0,
        next_nominal_ms=T0 + SECOND,
        next_due_ms=T0 + SECOND,
        tzdb="2025b",
        request_ids=("réunion-1", "会议-2", "\U0001f600"),
        unsettled=("acme/j@manual:réunion-1",),
    )
    now = dump_state(state)
    assert now[:3] == b"KS\x04"
    assert "réunion-1".encode() in now  # UTF-8, not escaped
    old = now[:3] + json.dumps(json.loads(now[3:]), separators=(",", ":")).encode()
    assert b"\\u" in old and old != now
    for data in (now, old):
        loaded = load_state(data, b"")
        assert loaded.request_ids == state.request_ids
        assert loaded.unsettled == state.unsettled
        assert dump_state(loaded) == now
