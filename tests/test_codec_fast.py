"""The compiled codecs of the hot records (kadence/avro_fast.py, kadence/fast_models.py) agree
with the generic path: the same bytes out, the same models in, the same errors for bad input."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kadence import fast_models
from kadence.codec import HEADER_LEN, MAGIC, VALIDATED, Codec
from kadence.errors import DecodeError, EncodeError, InvalidRecordError
from kadence.examples import examples
from kadence.headers import generic_headers, headers_for
from kadence.models import (
    CronSchedule,
    Decision,
    ErrorInfo,
    ExecutionOutcome,
    ExecutionOutcomes,
    ExecutionRequested,
    HandlerTarget,
    HeldRange,
    HistoryRecord,
    HttpTarget,
    KafkaTarget,
    LeaseEvent,
    LeaseEventKind,
    LeaseSnapshot,
    OnceSchedule,
    OutcomeStatus,
    RetryPolicy,
    RunResult,
    ScheduleDefinition,
    TriggerKind,
    WireModel,
)
from kadence.models.base import (
    MAX_ATTEMPTS,
    MAX_DELIVERIES,
    MAX_OFFSET,
    MAX_PARTITION,
    MAX_PAYLOAD_BYTES,
    MAX_TIMEOUT_MS,
    MAX_VERSION,
    MEDIA_TYPE_RE,
)
from kadence.models.execution import MAX_HELD_RUNS, MAX_LEASE_TTL_MS
from kadence.models.results import (
    RESULT_BODY_BYTES,
    RESULT_HEADER_CHARS,
    RESULT_HEADERS,
    RESULT_NOTE_CHARS,
    RESULT_VALUE_BYTES,
)
from kadence.schema_files import schemas_dir
from kadence.sizing import RECORD_LIMIT

FAST = Codec()
SLOW = Codec(fast=False)
HOT = tuple(fast_models.BUILDERS)
EXAMPLES = examples()


def _same(a: WireModel, b: WireModel) -> None:
    """Equal as models, and built alike: same classes, same fields set, same dump."""
    assert a == b
    assert type(a) is type(b)
    assert a.model_fields_set == b.model_fields_set
    assert a.model_dump() == b.model_dump()


def check(record: WireModel) -> None:
    data = SLOW.encode(record)
    assert FAST.encode(record) == data
    _same(FAST.decode(data), SLOW.decode(data))


def test_every_hot_record_type_has_a_compiled_writer_and_reader() -> None:
    for model in HOT:
        fp = FAST.schema_fingerprint(model)
        assert model in FAST._writers
        assert fp in FAST._readers, f"{model.__name__}: builder missing or its signature stale"
    assert not SLOW._writers
    assert not SLOW._readers


def test_a_changed_model_falls_back_to_pydantic(monkeypatch: pytest.MonkeyPatch) -> None:
    model: type[WireModel] = ExecutionRequested
    monkeypatch.setitem(fast_models.SIGNATURES, model, "0" * 16)
    assert fast_models.builder(ExecutionRequested) is None
    codec = Codec()
    assert codec.schema_fingerprint(ExecutionRequested) not in codec._readers
    check(EXAMPLES["ExecutionRequested"])


def test_the_fast_path_does_not_validate_with_pydantic(monkeypatch: pytest.MonkeyPatch) -> None:
    data = {m: FAST.encode(EXAMPLES[m.avro_name]) for m in HOT}

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("pydantic validation on the fast path")

    for model in HOT:
        monkeypatch.setattr(model, "model_validate", refuse)
    for model in HOT:
        assert FAST.decode(data[model]) == EXAMPLES[model.avro_name]


@pytest.mark.parametrize(
    "path",
    sorted((schemas_dir() / "history").glob("*/v*.bin")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_kept_records_encode_and_decode_alike(path: Path) -> None:
    data = path.read_bytes()
    record = SLOW.decode(data)
    if type(record) not in HOT:
        return
    _same(FAST.decode(data), record)
    assert FAST.encode(record) == SLOW.encode(record)
    if data[2:HEADER_LEN] == FAST.schema_fingerprint(type(record)):
        assert FAST.encode(record) == data


@pytest.mark.parametrize("name", [m.avro_name for m in HOT])
def test_examples_agree(name: str) -> None:
    check(EXAMPLES[name])


# -- property-generated records ---------------------------------------------------------------

idents = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", fullmatch=True)
texts = st.text(max_size=40)
header_values = st.text(
    st.characters(codec="latin-1").filter(lambda c: c == "\t" or " " <= c <= "~" or c >= "\xa0"),
    max_size=40,
)
"""What a target's header may hold (RFC 9110: no control characters, Latin-1 at most)."""
media_types = st.sampled_from(["application/json", "text/plain; charset=utf-8"]) | st.from_regex(
    MEDIA_TYPE_RE, fullmatch=True
).filter(lambda m: len(m) <= 128)
zones = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]
)
instants = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2400, 1, 1), timezones=zones
)


def up_to(limit: int) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(1, 10), st.integers(1, limit))


payloads = st.one_of(st.binary(max_size=64), st.just(b""), st.just(b"\xff" * MAX_PAYLOAD_BYTES))
targets = st.one_of(
    st.builds(
        HttpTarget,
        url=st.sampled_from(["https://x.example/run", "http://10.0.0.1:8080/é?q=1"]),
        method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]),
        query=st.dictionaries(
            st.from_regex(r"[a-z]{1,8}", fullmatch=True),
            st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=20),
            max_size=3,
        ),
        success_statuses=st.none() | st.sampled_from([["2xx"], ["204", "300-399"]]),
        retryable_statuses=st.none() | st.sampled_from([[], ["409", "5xx"]]),
        headers=st.dictionaries(
            st.from_regex(r"X-[a-z]{1,8}", fullmatch=True), header_values, max_size=3
        ),
        secret_ref=st.none() | idents,
        result_headers=st.lists(
            st.from_regex(r"x-[a-z]{1,8}", fullmatch=True), max_size=3, unique=True
        ),
    ),
    st.builds(KafkaTarget, topic=st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True)),
    st.builds(HandlerTarget, name=idents),
)
errors = st.none() | st.builds(
    ErrorInfo, type=texts, message=st.text(max_size=300), code=st.none() | st.text(max_size=64)
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
results = st.none() | st.builds(
    RunResult,
    status_code=st.none() | st.integers(100, 999),
    headers=st.dictionaries(
        st.from_regex(r"[a-z0-9-]{1,20}", fullmatch=True),
        st.text(max_size=RESULT_HEADER_CHARS),
        max_size=RESULT_HEADERS,
    ),
    body=st.binary(max_size=RESULT_BODY_BYTES),
    body_truncated=st.booleans(),
    value=st.none() | json_values.map(lambda v: json.dumps(v, ensure_ascii=False)),
    note=st.text(max_size=RESULT_NOTE_CHARS),
)
ids = st.text(min_size=1, max_size=400)
executions = st.builds(
    ExecutionRequested,
    execution_id=ids,
    tenant=idents,
    job_id=idents,
    definition_version=up_to(MAX_VERSION),
    attempt=up_to(MAX_ATTEMPTS),
    delivery=up_to(MAX_DELIVERIES),
    trigger=st.sampled_from(TriggerKind),
    nominal_at=instants,
    due_at=instants,
    dispatched_at=instants,
    target=targets,
    payload=payloads,
    content_type=media_types,
    timeout_ms=up_to(MAX_TIMEOUT_MS),
    lease_ttl_ms=up_to(MAX_LEASE_TTL_MS),
    concurrency_key=st.none() | idents,
    start_by=st.none() | instants,
)
workers = st.text(min_size=1, max_size=128)
outcomes = st.builds(
    ExecutionOutcome,
    execution_id=ids,
    tenant=idents,
    job_id=idents,
    attempt=up_to(MAX_ATTEMPTS),
    delivery=up_to(MAX_DELIVERIES),
    worker_id=workers,
    status=st.sampled_from(OutcomeStatus),
    retryable=st.booleans(),
    error=errors,
    nominal_at=instants,
    due_at=instants,
    started_at=instants,
    finished_at=instants,
    result=results,
)
records = st.one_of(
    executions,
    outcomes,
    st.builds(ExecutionOutcomes, outcomes=st.lists(outcomes, min_size=1, max_size=4)),
    st.builds(
        HistoryRecord,
        tenant=idents,
        job_id=idents,
        decision=st.sampled_from(Decision),
        at=instants,
        execution_id=st.none() | ids,
        nominal_at=st.none() | instants,
        due_at=st.none() | instants,
        attempt=st.none() | up_to(MAX_ATTEMPTS),
        delivery=st.none() | up_to(MAX_DELIVERIES),
        reason=st.text(max_size=2048),
        error=errors,
        details=st.dictionaries(
            st.from_regex(r"[A-Za-z0-9_.-]{1,64}", fullmatch=True), texts, max_size=4
        ),
    ),
    st.builds(
        LeaseEvent,
        execution_id=ids,
        tenant=idents,
        job_id=idents,
        attempt=up_to(MAX_ATTEMPTS),
        delivery=up_to(MAX_DELIVERIES),
        worker_id=workers,
        event=st.sampled_from(LeaseEventKind),
        at=instants,
        expires_at=instants,
        execution=st.none() | executions,
    ),
    st.builds(
        LeaseSnapshot,
        worker_id=workers,
        incarnation=idents,
        at=instants,
        held=st.lists(
            st.builds(
                HeldRange,
                partition=st.integers(0, MAX_PARTITION),
                start=st.integers(0, MAX_OFFSET - MAX_HELD_RUNS),
                count=up_to(MAX_HELD_RUNS // 5),
                ttl_ms=up_to(MAX_LEASE_TTL_MS),
            ),
            max_size=5,
        ),
    ),
)


@settings(max_examples=400, deadline=None)
@given(records)
def test_generated_records_encode_and_decode_alike(record: WireModel) -> None:
    check(record)


def test_lengths_count_characters_not_bytes() -> None:
    record = EXAMPLES["ExecutionOutcome"].model_copy(
        update={"execution_id": "\U0001f600" * 400, "worker_id": "\u00e9" * 128}
    )
    check(record)
    assert FAST.decode(FAST.encode(record)) == record


def test_the_largest_result_agrees_and_its_outcome_fits_the_broker_many_times_over() -> None:
    result = RunResult(
        status_code=599,
        headers={f"x-{i:0254d}": "\U0001f600" * RESULT_HEADER_CHARS for i in range(RESULT_HEADERS)},
        body=b"\xff" * RESULT_BODY_BYTES,
        body_truncated=True,
        value=json.dumps("\U0001f600" * (RESULT_VALUE_BYTES // 4 - 1), ensure_ascii=False),
        note="\U0001f600" * RESULT_NOTE_CHARS,
    )
    error = ErrorInfo(type="t" * 256, message="\U0001f600" * 4096, code="c" * 64)
    record = EXAMPLES["ExecutionOutcome"].model_copy(
        update={"result": result, "error": error, "execution_id": "\U0001f600" * 400}
    )
    check(record)
    assert len(FAST.encode(record)) < RECORD_LIMIT // 8


def test_an_outcome_written_before_results_decodes_without_one() -> None:
    old = (schemas_dir() / "history" / "ExecutionOutcome" / "v1.bin").read_bytes()
    for codec in (FAST, SLOW):
        outcome = codec.decode(old)
        assert isinstance(outcome, ExecutionOutcome)
        assert outcome.result is None


def test_the_largest_lease_snapshot_agrees() -> None:
    held = [HeldRange(partition=i % 64, start=i, count=1, ttl_ms=30_000) for i in range(4_096)]
    check(LeaseSnapshot(worker_id="w", incarnation="i", at=datetime.now(UTC), held=held))


def test_a_pool_snapshot_agrees() -> None:
    """A worker of a named pool says so in its snapshots (the reaper reads its refs back from
    that pool's executions topic): both paths keep the pool."""
    held = [HeldRange(partition=3, start=7, count=2, ttl_ms=30_000)]
    snap = LeaseSnapshot(
        worker_id="w", incarnation="i", at=datetime.now(UTC), held=held, pool="gpu"
    )
    check(snap)
    assert FAST.decode(FAST.encode(snap)).pool == "gpu"  # type: ignore[attr-defined]


def test_an_int_beyond_64_bits_fails_as_before() -> None:
    """Only a model built without validation can hold one: an EncodeError on both paths."""
    record = EXAMPLES["ExecutionRequested"].model_copy(update={"attempt": 2**63})
    with pytest.raises(EncodeError, match="OverflowError"):
        SLOW.encode(record)
    with pytest.raises(EncodeError, match="OverflowError"):
        FAST.encode(record)


# -- hostile input -----------------------------------------------------------------------------


def _forge(model: type[WireModel], datum: dict[str, Any]) -> bytes:
    """Bytes fastavro writes for `datum` with the current schema (no model to stop it)."""
    parsed, fp = FAST.schemas.current[model.avro_fullname()]
    buf = io.BytesIO()
    buf.write(MAGIC + fp)
    fastavro.schemaless_writer(buf, parsed, datum)
    return buf.getvalue()


def _datum(name: str, **changes: Any) -> dict[str, Any]:
    datum = EXAMPLES[name].model_dump()
    if "target" in datum:
        datum["target"] = ("kadence.HttpTarget", datum["target"])
    datum.update(changes)
    return datum


def _result(**changes: Any) -> dict[str, Any]:
    datum = RunResult().model_dump()
    datum.update(changes)
    return datum


HOSTILE: dict[str, tuple[type[WireModel], dict[str, Any]]] = {
    "bad tenant": (ExecutionRequested, _datum("ExecutionRequested", tenant="acme/evil")),
    "tenant with newline": (ExecutionRequested, _datum("ExecutionRequested", tenant="acme\n")),
    "delivery 0": (ExecutionRequested, _datum("ExecutionRequested", delivery=0)),
    "negative timeout": (ExecutionRequested, _datum("ExecutionRequested", timeout_ms=-1)),
    "oversized payload": (
        ExecutionRequested,
        _datum("ExecutionRequested", payload=b"x" * (MAX_PAYLOAD_BYTES + 1)),
    ),
    "empty execution id": (ExecutionRequested, _datum("ExecutionRequested", execution_id="")),
    "execution id of 401 characters": (
        ExecutionRequested,
        _datum("ExecutionRequested", execution_id="\U0001f600" * 401),
    ),
    "bad concurrency key": (
        ExecutionRequested,
        _datum("ExecutionRequested", concurrency_key="a b"),
    ),
    "credentials in url": (
        ExecutionRequested,
        _datum(
            "ExecutionRequested",
            target=("kadence.HttpTarget", {"kind": "http", "url": "https://u:p@x.example/"}),
        ),
    ),
    **{
        f"http target with {name}": (
            ExecutionRequested,
            _datum(
                "ExecutionRequested",
                target=("kadence.HttpTarget", {"kind": "http", "url": "https://x.example/", **bad}),
            ),
        )
        for name, bad in dict[str, dict[str, object]](
            {
                "a status past 599": {"success_statuses": ["600"]},
                "a retried status that succeeds": {"retryable_statuses": ["2xx"]},
                "a credential in its query": {"query": {"access_token": "sk_live"}},
                "a line break in its query": {"query": {"a": "b\r\nc"}},
                "a method Kadence does not send": {"method": "CONNECT"},
            }
        ).items()
    },
    "target kind of another branch": (
        ExecutionRequested,
        _datum(
            "ExecutionRequested", target=("kadence.KafkaTarget", {"kind": "http", "topic": "t"})
        ),
    ),
    "outcome attempt 0": (ExecutionOutcome, {**_datum("ExecutionOutcome"), "attempt": 0}),
    "long worker id": (ExecutionOutcome, {**_datum("ExecutionOutcome"), "worker_id": "w" * 129}),
    "long error code": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", error={"type": "t", "message": "m", "code": "c" * 65}),
    ),
    "result body over 1 KiB": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", result=_result(body=b"x" * (RESULT_BODY_BYTES + 1))),
    ),
    "result status 99": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", result=_result(status_code=99)),
    ),
    "result status 1000": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", result=_result(status_code=1000)),
    ),
    "result header name in upper case": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", result=_result(headers={"ETag": "v"})),
    ),
    "result header with CRLF": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", result=_result(headers={"a\r\nb": "v"})),
    ),
    "result header value too long": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", result=_result(headers={"h": "v" * (RESULT_HEADER_CHARS + 1)})),
    ),
    "result too many headers": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", result=_result(headers={f"h{i}": "v" for i in range(17)})),
    ),
    "result value not JSON": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", result=_result(value="{nope")),
    ),
    "result value over 4 KiB": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", result=_result(value=json.dumps("x" * RESULT_VALUE_BYTES))),
    ),
    "result note too long": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", result=_result(note="n" * (RESULT_NOTE_CHARS + 1))),
    ),
    "history bad job id": (HistoryRecord, _datum("HistoryRecord", job_id="-job")),
    "history long reason": (HistoryRecord, _datum("HistoryRecord", reason="r" * 2049)),
    "lease bad execution": (
        LeaseEvent,
        _datum("LeaseEvent", execution={**_datum("ExecutionRequested"), "delivery": 0}),
    ),
    "lease empty worker": (LeaseEvent, _datum("LeaseEvent", worker_id="")),
    "snapshot negative partition": (
        LeaseSnapshot,
        _datum("LeaseSnapshot", held=[{"partition": -1, "start": 0, "count": 1, "ttl_ms": 1}]),
    ),
    "snapshot count 0": (
        LeaseSnapshot,
        _datum("LeaseSnapshot", held=[{"partition": 0, "start": 0, "count": 0, "ttl_ms": 1}]),
    ),
    "snapshot too many ranges": (
        LeaseSnapshot,
        _datum(
            "LeaseSnapshot",
            held=[{"partition": 0, "start": i, "count": 1, "ttl_ms": 1} for i in range(4_097)],
        ),
    ),
    "snapshot bad incarnation": (LeaseSnapshot, _datum("LeaseSnapshot", incarnation="a/b")),
    "snapshot huge count": (
        LeaseSnapshot,
        _datum("LeaseSnapshot", held=[{"partition": 0, "start": 0, "count": 2**62, "ttl_ms": 1}]),
    ),
    "snapshot too many runs in all": (
        LeaseSnapshot,
        _datum(
            "LeaseSnapshot",
            held=[{"partition": p, "start": 0, "count": 40_000, "ttl_ms": 1} for p in (0, 1)],
        ),
    ),
    "snapshot pool with upper case": (LeaseSnapshot, _datum("LeaseSnapshot", pool="GPU")),
    "snapshot pool too long": (LeaseSnapshot, _datum("LeaseSnapshot", pool="g" * 33)),
    "snapshot huge ttl": (
        LeaseSnapshot,
        _datum("LeaseSnapshot", held=[{"partition": 0, "start": 0, "count": 1, "ttl_ms": 2**62}]),
    ),
    "huge lease ttl": (ExecutionRequested, _datum("ExecutionRequested", lease_ttl_ms=2**62)),
    "version beyond 2^53": (
        ExecutionRequested,
        _datum("ExecutionRequested", definition_version=MAX_VERSION + 1),
    ),
    "attempt 101": (ExecutionRequested, _datum("ExecutionRequested", attempt=MAX_ATTEMPTS + 1)),
    "outcome delivery 101": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", delivery=MAX_DELIVERIES + 1),
    ),
    "content type with CRLF": (
        ExecutionRequested,
        _datum("ExecutionRequested", content_type="text/plain\r\nX-Injected: 1"),
    ),
    "content type not a media type": (
        ExecutionRequested,
        _datum("ExecutionRequested", content_type="json"),
    ),
    "due in year 9500": (
        ExecutionRequested,
        _datum("ExecutionRequested", due_at=datetime(9500, 1, 1, tzinfo=UTC)),
    ),
    "outcome from year 1": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", started_at=datetime(1, 1, 1, tzinfo=UTC)),
    ),
    "history attempt 0": (HistoryRecord, _datum("HistoryRecord", attempt=0)),
    "history detail with a space in its name": (
        HistoryRecord,
        _datum("HistoryRecord", details={"a b": "c"}),
    ),
    "snapshot partition past int32": (
        LeaseSnapshot,
        _datum("LeaseSnapshot", held=[{"partition": 2**31, "start": 0, "count": 1, "ttl_ms": 1}]),
    ),
    "snapshot range past the last offset": (
        LeaseSnapshot,
        _datum(
            "LeaseSnapshot",
            held=[{"partition": 0, "start": MAX_OFFSET - 1, "count": 2, "ttl_ms": 1}],
        ),
    ),
    "negative throttled time": (ExecutionOutcome, _datum("ExecutionOutcome", throttled_ms=-1)),
    "throttled time past 2^53": (
        ExecutionOutcome,
        _datum("ExecutionOutcome", throttled_ms=2**53),
    ),
    "rate limit of NaN": (
        ExecutionRequested,
        _datum(
            "ExecutionRequested",
            target=(
                "kadence.HttpTarget",
                {
                    "kind": "http",
                    "url": "https://x.example/",
                    "rate_limit": {"per_second": float("nan"), "burst": 1},
                },
            ),
        ),
    ),
    "rate limit of 0": (
        ExecutionRequested,
        _datum(
            "ExecutionRequested",
            target=(
                "kadence.HttpTarget",
                {
                    "kind": "http",
                    "url": "https://x.example/",
                    "rate_limit": {"per_second": 0.0, "burst": 1},
                },
            ),
        ),
    ),
    "timeout beyond six hours": (
        ExecutionRequested,
        _datum("ExecutionRequested", timeout_ms=6 * 3_600_000 + 1),
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_record_breaking_a_rule_is_rejected_as_before(case: str) -> None:
    model, datum = HOSTILE[case]
    data = _forge(model, datum)
    with pytest.raises(InvalidRecordError) as slow:
        SLOW.decode(data)
    with pytest.raises(InvalidRecordError) as fast:
        FAST.decode(data)
    assert fast.value.code == slow.value.code == "invalid_record"
    assert fast.value.errors == slow.value.errors
    assert str(fast.value) == str(slow.value)


def _outcome(codec: Codec, data: bytes) -> object:
    try:
        return codec.decode(data).model_dump()
    except DecodeError as exc:
        return exc.code


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from([m.avro_name for m in HOT]),
    pos=st.integers(min_value=HEADER_LEN),
    flip=st.integers(1, 255),
    cut=st.integers(0, 8),
)
def test_damaged_bytes_decode_alike(name: str, pos: int, flip: int, cut: int) -> None:
    data = bytearray(SLOW.encode(EXAMPLES[name]))
    data[HEADER_LEN + pos % (len(data) - HEADER_LEN)] ^= flip
    damaged = bytes(data[: len(data) - cut])
    assert _outcome(FAST, damaged) == _outcome(SLOW, damaged)


@given(executions)
@settings(max_examples=200, deadline=None)
def test_an_execution_the_scheduler_builds_is_the_validated_one(ex: ExecutionRequested) -> None:
    """`new_execution` (the dispatch path, no pydantic) gives the model validation gives."""
    values = dict(ex)  # validated values: models, enums, aware UTC datetimes
    built = fast_models.new_execution(values)
    assert built == ex and type(built) is ExecutionRequested
    assert built.model_dump() == ex.model_dump()
    assert FAST.encode(built) == SLOW.encode(ex)


@given(executions, executions)
@settings(max_examples=200, deadline=None)
def test_a_series_run_is_the_validated_one(
    first: ExecutionRequested, ex: ExecutionRequested
) -> None:
    """`run_maker` (a series' runs: the job's fields checked once) gives, for any run's own
    execution id, instants and start_by, the model validation gives."""
    own = ("execution_id", "nominal_at", "due_at", "start_by")
    make = fast_models.run_maker({**dict(ex), **{f: getattr(first, f) for f in own}})
    assert make is not None
    built = make(ex.execution_id, ex.nominal_at, ex.due_at, ex.start_by)
    assert built == ex and type(built) is ExecutionRequested
    assert built.model_dump() == ex.model_dump()
    assert built.model_fields_set == set(ExecutionRequested.model_fields)  # as new_execution
    assert FAST.encode(built) == SLOW.encode(ex)


def test_a_series_with_a_broken_field_is_made_run_by_run_and_fails_as_validation_does() -> None:
    ex = EXAMPLES["ExecutionRequested"]
    assert isinstance(ex, ExecutionRequested)
    assert fast_models.run_maker({**dict(ex), "tenant": "no spaces"}) is None
    make = fast_models.run_maker(dict(ex))
    assert make is not None
    for eid in ("", "x" * 401):
        with pytest.raises(ValidationError):
            make(eid, ex.nominal_at, ex.due_at, ex.start_by)


def test_an_execution_the_scheduler_builds_with_a_broken_field_fails_as_validation_does() -> None:
    ex = EXAMPLES["ExecutionRequested"]
    assert isinstance(ex, ExecutionRequested)
    for field, value in [
        ("tenant", "no spaces allowed"),
        ("attempt", 0),
        ("timeout_ms", MAX_TIMEOUT_MS + 1),
        ("payload", b"x" * (MAX_PAYLOAD_BYTES + 1)),
        ("execution_id", ""),
    ]:
        with pytest.raises(ValidationError):
            fast_models.new_execution({**dict(ex), field: value})
    as_data = {**dict(ex), "target": ex.target.model_dump(), "trigger": ex.trigger.value}
    assert fast_models.new_execution(as_data) == ex  # not models: validated, and equal


@given(executions)
@settings(max_examples=100, deadline=None)
def test_an_executions_headers_are_those_of_any_record(ex: ExecutionRequested) -> None:
    """The spelled-out headers of an execution (one per run) are the generic ones."""
    fp = FAST.schema_fingerprint(ExecutionRequested)
    assert headers_for(ex, fp) == generic_headers(ex, fp)


def test_every_examples_headers_are_the_generic_ones() -> None:
    for record in EXAMPLES.values():
        fp = FAST.schema_fingerprint(type(record))
        assert headers_for(record, fp) == generic_headers(record, fp)


# -- records from users: a compiled reader, then pydantic as on the generic path ---------------

definitions = st.builds(
    ScheduleDefinition,
    tenant=idents,
    job_id=idents,
    version=up_to(MAX_VERSION),
    schedule=st.one_of(
        st.builds(
            CronSchedule,
            expression=st.sampled_from(["*/5 * * * *", "0 9 * * MON-FRI", "H H * * *"]),
            timezone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]),
            start_at=st.none() | instants,
            spread_s=st.none() | st.integers(0, 60),
        ),
        st.builds(OnceSchedule, run_at=instants),
    ),
    target=targets,
    payload=st.binary(max_size=64),
    retry=st.builds(
        RetryPolicy,
        multiplier=st.floats(1.0, 10.0, allow_nan=False),
        max_attempts=st.integers(1, 20),
    ),
    concurrency_key=st.none() | idents,
    paused=st.booleans(),
    description=texts,
)


def test_a_definition_is_read_by_the_compiled_reader_and_validated() -> None:
    fp = FAST.schema_fingerprint(ScheduleDefinition)
    assert ScheduleDefinition in VALIDATED
    assert fp in FAST._readers
    assert ScheduleDefinition not in FAST._writers  # written the generic way, as before


@settings(max_examples=300, deadline=None)
@given(definitions)
def test_generated_definitions_decode_alike(definition: ScheduleDefinition) -> None:
    data = SLOW.encode(definition)
    assert FAST.encode(definition) == data
    _same(FAST.decode(data), SLOW.decode(data))


def test_the_compiled_reader_goes_through_pydantic(monkeypatch: pytest.MonkeyPatch) -> None:
    """A definition that breaks a model rule (a retry multiplier below 1, written by a producer
    that skipped validation) is refused with the generic path's error, not built unchecked."""
    good = EXAMPLES["ScheduleDefinition"]
    assert isinstance(good, ScheduleDefinition)
    bad = good.model_copy(update={"retry": good.retry.model_copy(update={"multiplier": 0.5})})
    data = SLOW.encode(bad)
    with pytest.raises(InvalidRecordError) as fast_error:
        FAST.decode(data)
    with pytest.raises(InvalidRecordError) as slow_error:
        SLOW.decode(data)
    assert str(fast_error.value) == str(slow_error.value)
    assert "multiplier" in str(fast_error.value)


@settings(max_examples=300, deadline=None)
@given(pos=st.integers(min_value=HEADER_LEN), flip=st.integers(1, 255), cut=st.integers(0, 8))
def test_a_damaged_definition_decodes_alike(pos: int, flip: int, cut: int) -> None:
    data = bytearray(SLOW.encode(EXAMPLES["ScheduleDefinition"]))
    data[HEADER_LEN + pos % (len(data) - HEADER_LEN)] ^= flip
    damaged = bytes(data[: len(data) - cut])
    assert _outcome(FAST, damaged) == _outcome(SLOW, damaged)
