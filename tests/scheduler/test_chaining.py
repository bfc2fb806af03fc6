"""Chain links (issue 42, item 5): a run's final end triggers the jobs its `on_success` or
`on_failure` names, once, with a deterministic request id; a cycle stops at the depth limit;
history links both runs. The domain and the processor, no broker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kadence.chains import FAILURE, SUCCESS, chain_depth_of, chain_request_id, result_payload
from kadence.codec import Codec
from kadence.envelope import payload_json_bytes, payload_refusal
from kadence.models import (
    MAX_CHAIN_DEPTH,
    Decision,
    ErrorInfo,
    ExecutionOutcome,
    ExecutionRequested,
    HistoryRecord,
    KafkaTarget,
    OutcomeStatus,
    Rejected,
    RunResult,
    ScheduleDefinition,
    TriggerNow,
)
from kadence.models.results import (
    RESULT_BODY_BYTES,
    RESULT_HEADER_CHARS,
    RESULT_HEADERS,
    RESULT_NOTE_CHARS,
    RESULT_VALUE_BYTES,
)
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.timeengine.identity import manual_execution_id
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.store import MemoryStore
from streams.runtime.task import Task
from streams.scheduler import commands, firing, outcomes
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor
from streams.scheduler.state import JobState
from streams.scheduler.step import Effects, Routed, Sink
from tests.scheduler.test_domain import T0, cmd, create, ctx, definition, executions, history
from tests.scheduler.test_domain import outcome as make_outcome

CODEC = Codec()


def triggers(effects: Effects) -> list[tuple[TriggerNow, str]]:
    """The chain triggers a step wrote, with the route that picks their partition."""
    out = []
    for e in effects.out:
        if e.sink is Sink.control:
            assert isinstance(e.record, Routed) and isinstance(e.record.record, TriggerNow)
            out.append((e.record.record, e.record.route))
    return out


def chained(effects: Effects) -> list[HistoryRecord]:
    return [h for h in history(effects) if h.decision is Decision.chained]


def run_once(state: JobState, request: str = "r1", now: int = T0) -> ExecutionRequested:
    [ex] = executions(commands.apply_command(state, cmd(TriggerNow, request_id=request), ctx(now)))
    return ex


def ended(
    state: JobState, status: OutcomeStatus, request: str = "r1", **kw: Any
) -> tuple[ExecutionRequested, Effects]:
    started = commands.apply_command(state, cmd(TriggerNow, request_id=request), ctx(T0))
    assert started.state is not None
    [ex] = executions(started)
    return ex, outcomes.apply_outcome(started.state, make_outcome(ex, status, **kw), ctx(T0 + 5))


def test_a_success_triggers_each_on_success_job_once_and_history_names_it() -> None:
    job = create(
        definition(
            on_success=[{"job_id": "b"}, {"job_id": "c", "concurrency_key": "grp"}],
            on_failure=[{"job_id": "f"}],
        )
    )
    ex, done = ended(job, OutcomeStatus.succeeded)
    got = triggers(done)
    assert [(t.job_id, route) for t, route in got] == [("b", "acme/b"), ("c", "acme/~grp")]
    for t, _ in got:
        assert (t.tenant, t.caused_by, t.chain_depth, t.payload) == (
            "acme",
            ex.execution_id,
            1,
            None,
        )
        assert t.request_id == chain_request_id(ex.execution_id, SUCCESS, t.job_id, 1)
    records = chained(done)
    assert [r.details["job_id"] for r in records] == ["b", "c"]
    assert records[0].execution_id == ex.execution_id
    assert records[0].details["triggered"] == manual_execution_id("acme/b", got[0][0].request_id)


def test_a_failed_attempt_that_will_be_retried_triggers_nothing_the_dead_letter_does() -> None:
    job = create(
        definition(
            on_success=[{"job_id": "b"}],
            on_failure=[{"job_id": "f"}],
            retry={"max_attempts": 2, "initial_backoff_ms": 0, "jitter": "none"},
        )
    )
    ex, retried = ended(job, OutcomeStatus.failed, retryable=True)
    assert triggers(retried) == []
    assert Decision.retry_scheduled in [h.decision for h in history(retried)]
    assert retried.state is not None
    again = firing.on_due(retried.state, ctx(T0 + 10))
    [second] = executions(again)
    assert again.state is not None
    dead = outcomes.apply_outcome(
        again.state, make_outcome(second, OutcomeStatus.failed, retryable=True), ctx(T0 + 20)
    )
    assert Decision.dead_lettered in [h.decision for h in history(dead)]
    [(t, _)] = triggers(dead)
    assert (t.job_id, t.caused_by) == ("f", ex.execution_id)
    assert t.request_id == chain_request_id(ex.execution_id, FAILURE, "f", 1)


def test_a_cancelled_run_triggers_nothing() -> None:
    job = create(definition(on_success=[{"job_id": "b"}], on_failure=[{"job_id": "f"}]))
    _, cancelled = ended(job, OutcomeStatus.cancelled)
    assert triggers(cancelled) == []


def test_pass_result_sends_the_run_as_json_and_only_to_the_links_that_ask() -> None:
    job = create(definition(on_failure=[{"job_id": "b", "pass_result": True}, {"job_id": "c"}]))
    ex, dead = ended(job, OutcomeStatus.failed)
    (with_result, _), (without, _) = triggers(dead)
    assert without.payload is None
    assert with_result.payload is not None
    doc = json.loads(with_result.payload)
    assert doc["execution_id"] == ex.execution_id
    assert (doc["job_id"], doc["status"], doc["attempt"]) == ("job", "failed", 1)
    assert doc["error"]["message"] == "boom"
    assert "result" not in doc  # outcomes carry none yet


class _WithResult:
    """An outcome with a `result` (what issue 42 item 4 adds), as getattr sees it."""

    def __init__(self, outcome: ExecutionOutcome, result: object) -> None:
        self._outcome, self.result = outcome, result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._outcome, name)


def test_a_result_is_passed_when_the_outcome_has_one_and_left_out_when_too_big() -> None:
    job = create(definition())
    ex = run_once(job)
    base = make_outcome(ex, OutcomeStatus.succeeded)
    small = json.loads(result_payload(_WithResult(base, {"status_code": 200}), 10_000))  # type: ignore[arg-type]
    assert small["result"] == {"status_code": 200}
    huge = _WithResult(base, {"body": "x" * 20_000})
    cut = result_payload(huge, 10_000)  # type: ignore[arg-type]
    assert len(cut) <= 10_000
    assert json.loads(cut)["result_truncated"] is True


def test_the_same_outcome_applied_again_writes_the_same_trigger_and_the_job_runs_once() -> None:
    """A scheduler that crashed before its commit reads the outcome again from the same state:
    the trigger it writes again is the same command, which the downstream job applies once."""
    job = create(definition(on_success=[{"job_id": "b"}]))
    _, first = ended(job, OutcomeStatus.succeeded)
    _, again = ended(job, OutcomeStatus.succeeded)
    [(t1, _)], [(t2, _)] = triggers(first), triggers(again)
    assert t1.request_id == t2.request_id
    b = create(definition(job_id="b"))
    once = commands.apply_command(b, t1, ctx(T0 + 10))
    [run] = executions(once)
    assert run.execution_id == manual_execution_id("acme/b", t1.request_id)
    assert once.state is not None
    assert executions(commands.apply_command(once.state, t2, ctx(T0 + 11))) == []


def test_the_triggered_run_s_history_names_the_run_that_caused_it() -> None:
    a = create(definition(on_success=[{"job_id": "b"}]))
    ex, done = ended(a, OutcomeStatus.succeeded)
    [(t, _)] = triggers(done)
    fired = commands.apply_command(create(definition(job_id="b")), t, ctx(T0 + 10))
    [record] = [h for h in history(fired) if h.decision is Decision.fired]
    assert record.details["caused_by"] == ex.execution_id
    assert record.details["chain_depth"] == "1"


def _step(state: JobState, trigger: TriggerNow | None, now: int) -> tuple[JobState, Effects]:
    """Run `state`'s job once (by `trigger`, or a user's trigger), succeed, return what ended."""
    c = trigger or cmd(TriggerNow, request_id="start")
    started = commands.apply_command(state, c.model_copy(update={"job_id": _id(state)}), ctx(now))
    assert started.state is not None
    [ex] = executions(started)
    done = outcomes.apply_outcome(
        started.state, make_outcome(ex, OutcomeStatus.succeeded), ctx(now + 1)
    )
    assert done.state is not None
    return done.state, done


def _id(state: JobState) -> str:
    return state.definition(CODEC).job_id


def test_a_cycle_a_b_a_stops_at_the_depth_limit_and_says_so() -> None:
    jobs = {
        "a": create(definition(job_id="a", on_success=[{"job_id": "b"}])),
        "b": create(definition(job_id="b", on_success=[{"job_id": "a"}])),
    }
    trigger: TriggerNow | None = None
    name, runs, now = "a", 0, T0
    while True:
        jobs[name], done = _step(jobs[name], trigger, now)
        runs += 1
        now += 10
        sent = triggers(done)
        if not sent:
            break
        [(trigger, _)] = sent
        assert trigger.chain_depth == runs
        name = trigger.job_id
        assert runs <= MAX_CHAIN_DEPTH + 1, "the cycle did not stop"
    assert runs == MAX_CHAIN_DEPTH + 1  # the start and 16 links
    [stop] = chained(done)
    assert stop.details == {"stopped": "depth_limit", "chain_depth": str(MAX_CHAIN_DEPTH)}
    assert "limit" in stop.reason


def test_depth_is_read_from_the_execution_id_and_a_user_s_id_cannot_go_past_the_limit() -> None:
    rid = chain_request_id("acme/a@manual:x", SUCCESS, "b", 3)
    assert chain_depth_of(manual_execution_id("acme/b", rid)) == 3
    assert chain_depth_of("acme/b@2026-12-01T09:00:00.000Z") == 0
    assert chain_depth_of("acme/b@manual:chain-99-" + "0" * 32) == MAX_CHAIN_DEPTH
    assert chain_depth_of("acme/b@manual:chain-3-nothex") == 0


# --- hostile definitions and triggers ---------------------------------------------------------


@pytest.mark.parametrize(
    ("links", "says"),
    [
        ([{"job_id": "other/job"}], "job_id"),  # another tenant's key: no slash in a job id
        ([{"job_id": "../job"}], "job_id"),
        ([{"job_id": "x" * 129}], "job_id"),
        ([{"job_id": f"j{i}"} for i in range(9)], "at most 8"),
        ([{"job_id": "job"}], "cannot trigger itself"),
        ([{"job_id": "b"}, {"job_id": "b"}], "named twice"),
        ([{"job_id": "b", "concurrency_key": "a/b"}], "concurrency_key"),
        ([{"job_id": "b", "tenant": "other"}], "tenant"),  # no field to name a tenant
    ],
)
@pytest.mark.parametrize("field", ["on_success", "on_failure"])
def test_hostile_links_are_refused_with_the_reason(field: str, links: Any, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        definition(**{field: links})


def test_a_trigger_cannot_name_another_tenant_s_run_or_a_depth_past_the_limit() -> None:
    common = {"tenant": "acme", "job_id": "b", "issued_at": "2026-12-01T09:00:00Z"}
    with pytest.raises(ValueError, match="same tenant"):
        TriggerNow(request_id="r", caused_by="other/job@manual:x", chain_depth=1, **common)
    with pytest.raises(ValueError, match="less than or equal"):
        TriggerNow(request_id="r", caused_by="acme/a@manual:x", chain_depth=17, **common)
    with pytest.raises(ValueError, match="come together"):
        TriggerNow(request_id="r", caused_by="acme/a@manual:x", **common)


# --- the processor: where the trigger goes, and a trigger that reaches no job ----------------


def _processor(partitions: int) -> tuple[SchedulerProcessor, Task, list[tuple[Any, ...]]]:
    topics = Topics(KadenceSettings(partitions=partitions))
    proc = SchedulerProcessor(SchedulerConfig(topics, partitions, 1, "2025b"), CODEC)
    task = Task(0, MemoryStore(), T0, 60_000)
    out: list[tuple[Any, ...]] = []
    task._emit = lambda *a: out.append(a)
    task.changelog = topics.scheduler_changelog
    return proc, task, out


def _feed(proc: SchedulerProcessor, task: Task, topic: str, key: str, value: Any) -> None:
    record = InputRecord(topic, 0, 0, key.encode(), CODEC.encode(value), [], T0)
    proc.process(task, record, T0)


def ex_at() -> Any:
    return "2026-12-01T09:00:00Z"


def _job(**kw: Any) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "version": 1,
            "schedule": {"kind": "once", "run_at": "2030-01-01T00:00:00Z"},
            "target": KafkaTarget(topic="out"),
            **kw,
        }
    )


def test_the_processor_writes_the_trigger_on_commands_keyed_by_the_job_on_its_partition() -> None:
    proc, task, out = _processor(8)
    topics = proc.cfg.topics
    name = next(f"a{i}" for i in range(100) if partition_for(f"acme/a{i}", 8) == 0)  # task's
    a = _job(job_id=name, on_success=[{"job_id": "b"}, {"job_id": "c", "concurrency_key": "g"}])
    _feed(proc, task, topics.schedules, a.key, a)
    start = TriggerNow(tenant="acme", job_id=name, request_id="r", issued_at=ex_at())
    _feed(proc, task, topics.commands, a.key, start)
    [ex] = [CODEC.decode(v) for t, _p, _k, v, _h in out if t == topics.executions]
    assert isinstance(ex, ExecutionRequested)
    out.clear()
    _feed(proc, task, topics.outcomes, a.key, make_outcome(ex, OutcomeStatus.succeeded))
    sent = [(p, k, CODEC.decode(v)) for t, p, k, v, _h in out if t == topics.scheduler_control]
    assert [(p, k) for p, k, _ in sent] == [
        (partition_for("acme/b", 8), b"acme/b"),
        (partition_for("acme/~g", 8), b"acme/c"),
    ]
    assert all(isinstance(c, TriggerNow) and c.caused_by == ex.execution_id for _, _, c in sent)


def test_a_trigger_of_a_missing_job_is_rejected_and_the_upstream_history_says_why() -> None:
    proc, task, out = _processor(1)
    topics = proc.cfg.topics
    trigger = TriggerNow(
        tenant="acme",
        job_id="gone",
        issued_at=ex_at(),
        request_id=chain_request_id("acme/a@manual:r", SUCCESS, "gone", 1),
        caused_by="acme/a@manual:r",
        chain_depth=1,
    )
    _feed(proc, task, topics.scheduler_control, "acme/gone", trigger)
    [rejected] = [CODEC.decode(v) for t, _p, _k, v, _h in out if t == topics.rejected]
    assert isinstance(rejected, Rejected) and rejected.code == "unknown_job"
    told = [CODEC.decode(v) for t, _p, _k, v, _h in out if t == topics.history]
    [record] = [h for h in told if isinstance(h, HistoryRecord)]
    assert (record.job_id, record.decision) == ("a", Decision.refused)
    assert "acme/gone" in record.reason and "acme/a@manual:r" in record.reason


def test_a_chain_trigger_on_commands_is_refused_as_kadence_s_own_word() -> None:
    """Only schedulers write a trigger with caused_by (on scheduler-control): on `commands`,
    which tenants may write, it would let them forge links in their jobs' histories."""
    proc, task, out = _processor(1)
    topics = proc.cfg.topics
    b = _job(job_id="b")
    _feed(proc, task, topics.schedules, b.key, b)
    forged = TriggerNow(
        tenant="acme",
        job_id="b",
        issued_at=ex_at(),
        request_id=chain_request_id("acme/a@manual:r", SUCCESS, "b", 1),
        caused_by="acme/a@manual:r",
        chain_depth=1,
    )
    _feed(proc, task, topics.commands, b.key, forged)
    [rejected] = [CODEC.decode(v) for t, _p, _k, v, _h in out if t == topics.rejected]
    assert isinstance(rejected, Rejected) and rejected.code == "control_record"
    assert not [v for t, _p, _k, v, _h in out if t == topics.executions]


def test_the_largest_passed_result_fits_a_json_kafka_target_s_envelope() -> None:
    """Issue 43, item 7: a `pass_result` payload goes to a job whose target may be a
    `"format": "json"` Kafka topic, where it is escaped once more. With every part of the
    result and the error at its bound, in the characters JSON escapes most (a 4-byte character
    is 12 bytes in the document and 14 in the envelope), it still fits, whole."""
    emoji = "\U0001f600"
    result = RunResult(
        status_code=599,
        headers={f"x-{i:0254d}": emoji * RESULT_HEADER_CHARS for i in range(RESULT_HEADERS)},
        body=b"\x01" * RESULT_BODY_BYTES,  # JSON's longest escape
        body_truncated=True,
        value=json.dumps(emoji * (RESULT_VALUE_BYTES // 4 - 1), ensure_ascii=False),
        note=emoji * RESULT_NOTE_CHARS,
    )
    job = create(definition())
    base = make_outcome(run_once(job), OutcomeStatus.failed).model_copy(
        update={"result": result, "error": ErrorInfo(type="t" * 256, message=emoji * 4096)}
    )
    passed = result_payload(base)
    assert "result_truncated" not in json.loads(passed)
    assert payload_json_bytes(passed) > 6 * len(emoji * 16 * RESULT_HEADER_CHARS)  # escaped
    assert payload_refusal(passed) is None


def test_a_binary_answer_is_passed_as_base64_and_a_text_one_as_text() -> None:
    """An HTTP answer whose body is not UTF-8 (b"\\xff\\xfe") raised UnicodeDecodeError in
    `result_payload`, so any `pass_result` chain after a binary answer broke."""
    job = create(definition())
    base = make_outcome(run_once(job), OutcomeStatus.succeeded)
    binary = base.model_copy(update={"result": RunResult(status_code=200, body=b"\xff\xfe\x00")})
    passed = json.loads(result_payload(binary))["result"]
    assert passed == {"status_code": 200, "body": "//4A", "body_encoding": "base64"}
    text = base.model_copy(update={"result": RunResult(status_code=200, body="héllo".encode())})
    assert json.loads(result_payload(text))["result"]["body"] == "héllo"
