"""Models built from trusted Avro datums without pydantic, for the records Kadence itself writes.

The execution path decodes an ExecutionRequested, ExecutionOutcome, LeaseEvent, LeaseSnapshot
or HistoryRecord for every execution, several times; full pydantic validation was most of the
cost. A datum read with the current writer schema (kadence/avro_fast.py) already has the
right types: every string is a str, every long an int, every timestamp an aware UTC datetime
on a whole millisecond (what `UtcDatetime` makes). What the schema does not guarantee is
checked here by hand: identifier patterns, lengths, the payload size limit, positive counts.
Targets go through pydantic (their URL and header rules), cached by value: a job's target is
the same on every execution.

A builder returns None when any check fails; the codec then validates with pydantic, which
gives the same error as before. So a check here may be stricter than the model, never looser.
Each builder is used only while the model's fields are exactly the ones it was written for
(`SIGNATURES`): a changed model falls back to pydantic until its builder is updated.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import typing
from collections.abc import Callable, Iterable
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from kadence.models import (
    Decision,
    ErrorInfo,
    ExecutionBatch,
    ExecutionOutcome,
    ExecutionOutcomes,
    ExecutionRequested,
    HeldRange,
    HistoryRecord,
    LeaseEvent,
    LeaseEventKind,
    LeaseSnapshot,
    OutcomeStatus,
    TriggerKind,
    WireModel,
)
from kadence.models.base import (
    IDENT_RE,
    MAX_ATTEMPTS,
    MAX_DELIVERIES,
    MAX_OFFSET,
    MAX_PARTITION,
    MAX_PAYLOAD_BYTES,
    MAX_TIMEOUT_MS,
    MAX_VERSION,
    MEDIA_TYPE_RE,
    POOL_RE,
)
from kadence.models.execution import (
    MAX_BATCH_BYTES,
    MAX_EXECUTIONS_PER_BATCH,
    MAX_HELD_RANGES,
    MAX_HELD_RUNS,
    MAX_LEASE_TTL_MS,
    MAX_OUTCOMES_PER_RECORD,
    MAX_THROTTLED_MS,
)
from kadence.models.records import MAX_DETAIL_BYTES, MAX_DETAILS
from kadence.models.results import (
    RESULT_BODY_BYTES,
    RESULT_HEADER_CHARS,
    RESULT_HEADERS,
    RESULT_NOTE_CHARS,
    RESULT_VALUE_BYTES,
    RunResult,
)
from kadence.models.targets import Target

Builder = Callable[[dict[str, Any]], WireModel | None]
_ident = IDENT_RE.fullmatch
_new = object.__new__
_set = object.__setattr__
_TARGETS: TypeAdapter[Any] = TypeAdapter(Target)
_TARGET_CACHE: dict[tuple[Any, ...], BaseModel] = {}
TARGET_CACHE_SIZE = 4_096


def made(model: type[BaseModel], values: dict[str, Any], names: Iterable[str]) -> Any:
    """What `model.model_construct(**values)` makes when `values` holds every field, without
    its per-field bookkeeping (a tenth of the cost); `names` are the fields' names (`values`
    itself, or a frozenset of them made once for many records made from one)."""
    record = _new(model)
    _set(record, "__dict__", values)
    _set(record, "__pydantic_fields_set__", set(names))
    _set(record, "__pydantic_extra__", None)
    _set(record, "__pydantic_private__", None)
    return record


def _make(model: type[BaseModel], values: dict[str, Any]) -> Any:
    return made(model, values, values)


def _member(enum: type[StrEnum], value: str) -> Any:
    return enum._value2member_map_.get(value)


def _target(datum: dict[str, Any]) -> Any:
    """The validated target for this datum, from the cache when seen before (models are frozen;
    the cache is cleared when full)."""
    key: tuple[Any, ...] = tuple(datum.items())
    try:
        target = _TARGET_CACHE.get(key)
    except TypeError:  # a map or an array in it (never a tuple: no other key looks like this)
        key = tuple(
            (k, tuple(v.items()) if isinstance(v, dict) else tuple(v) if isinstance(v, list) else v)
            for k, v in datum.items()
        )
        target = _TARGET_CACHE.get(key)
    if target is None:
        try:
            target = _TARGETS.validate_python(datum)
        except ValidationError:
            return None
        if len(_TARGET_CACHE) >= TARGET_CACHE_SIZE:
            _TARGET_CACHE.clear()
        _TARGET_CACHE[key] = target
    return target


@functools.lru_cache(maxsize=256)
def _media_type(value: str) -> bool:
    """A content type the model accepts (a deployment uses a handful: cached)."""
    return len(value) <= 128 and MEDIA_TYPE_RE.fullmatch(value) is not None


_DETAIL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def _details_ok(details: dict[str, str]) -> bool:
    return len(details) <= MAX_DETAILS and all(
        _DETAIL_NAME.fullmatch(k) and len(v) <= MAX_DETAIL_BYTES for k, v in details.items()
    )


def _error(d: dict[str, Any] | None) -> Any:
    if d is None:
        return None
    code = d["code"]
    if len(d["type"]) > 256 or len(d["message"]) > 4096 or (code is not None and len(code) > 64):
        return False
    return _make(ErrorInfo, d)


def _execution_ok(d: dict[str, Any]) -> bool:
    """The checks of an ExecutionRequested's own fields (its trigger and target aside)."""
    return bool(
        0 < len(d["execution_id"]) <= 400
        and _ident(d["tenant"])
        and _ident(d["job_id"])
        and 1 <= d["definition_version"] <= MAX_VERSION
        and 1 <= d["attempt"] <= MAX_ATTEMPTS
        and 1 <= d["delivery"] <= MAX_DELIVERIES
        and 1 <= d["timeout_ms"] <= MAX_TIMEOUT_MS
        and 1 <= d["lease_ttl_ms"] <= MAX_LEASE_TTL_MS
        and len(d["payload"]) <= MAX_PAYLOAD_BYTES
        and _media_type(d["content_type"])
        and (d["concurrency_key"] is None or _ident(d["concurrency_key"]))
    )


def execution_requested(d: dict[str, Any]) -> ExecutionRequested | None:
    if not _execution_ok(d):
        return None
    trigger = _member(TriggerKind, d["trigger"])
    target = _target(d["target"])
    if trigger is None or target is None:
        return None
    d["trigger"], d["target"] = trigger, target
    return _make(ExecutionRequested, d)  # type: ignore[no-any-return]


def _run_fields_ok(d: dict[str, Any]) -> bool:
    """The fields naming one run and its worker (outcomes and lease events share them)."""
    return bool(
        0 < len(d["execution_id"]) <= 400
        and _ident(d["tenant"])
        and _ident(d["job_id"])
        and 1 <= d["attempt"] <= MAX_ATTEMPTS
        and 1 <= d["delivery"] <= MAX_DELIVERIES
        and 0 < len(d["worker_id"]) <= 128
    )


_RESULT_HEADER = re.compile(r"[!#$%&'*+\-.^_`|~0-9a-z]{1,256}")


def _json_ok(value: str) -> bool:
    if len(value.encode(errors="surrogatepass")) > RESULT_VALUE_BYTES:
        return False
    try:
        json.loads(value)
    except ValueError:
        return False
    return True


def _result(d: dict[str, Any] | None) -> Any:
    """A RunResult from its datum, None for none, False when a bound is broken."""
    if d is None:
        return None
    code, headers, value = d["status_code"], d["headers"], d["value"]
    if (
        (code is not None and not 100 <= code <= 999)
        or len(headers) > RESULT_HEADERS
        or len(d["body"]) > RESULT_BODY_BYTES
        or len(d["note"]) > RESULT_NOTE_CHARS
        or (value is not None and not _json_ok(value))
        or not all(
            _RESULT_HEADER.fullmatch(k) and len(v) <= RESULT_HEADER_CHARS
            for k, v in headers.items()
        )
    ):
        return False
    return _make(RunResult, d)


def execution_outcome(d: dict[str, Any]) -> ExecutionOutcome | None:
    if not _run_fields_ok(d) or not 0 <= d["throttled_ms"] <= MAX_THROTTLED_MS:
        return None
    status = _member(OutcomeStatus, d["status"])
    error = _error(d["error"])
    result = _result(d["result"])
    if status is None or error is False or result is False:
        return None
    d["status"], d["error"], d["result"] = status, error, result
    return _make(ExecutionOutcome, d)  # type: ignore[no-any-return]


def execution_outcomes(d: dict[str, Any]) -> ExecutionOutcomes | None:
    """A batch of outcomes: each built as `execution_outcome` builds it, None when any fails."""
    items = d["outcomes"]
    if not 1 <= len(items) <= MAX_OUTCOMES_PER_RECORD:
        return None
    built = []
    for item in items:
        outcome = execution_outcome(item)
        if outcome is None:
            return None
        built.append(outcome)
    return _make(ExecutionOutcomes, {"outcomes": built})  # type: ignore[no-any-return]


def execution_batch(d: dict[str, Any]) -> ExecutionBatch | None:
    """A batch of executions: its entries are bytes, decoded one by one by their reader."""
    entries = d["executions"]
    if not (
        2 <= len(entries) <= MAX_EXECUTIONS_PER_BATCH
        and _ident(d["tenant"])
        and all(0 < len(e) <= MAX_BATCH_BYTES for e in entries)
    ):
        return None
    return _make(ExecutionBatch, d)  # type: ignore[no-any-return]


def _counts_ok(d: dict[str, Any]) -> bool:
    """A history record's optional run fields, as its model bounds them."""
    attempt, delivery, eid = d["attempt"], d["delivery"], d["execution_id"]
    return (
        (attempt is None or 1 <= attempt <= MAX_ATTEMPTS)
        and (delivery is None or 1 <= delivery <= MAX_DELIVERIES)
        and (eid is None or 0 < len(eid) <= 400)
    )


def history_record(d: dict[str, Any]) -> HistoryRecord | None:
    if not (
        _ident(d["tenant"])
        and _ident(d["job_id"])
        and len(d["reason"]) <= 2048
        and _counts_ok(d)
        and _details_ok(d["details"])
    ):
        return None
    decision = _member(Decision, d["decision"])
    error = _error(d["error"])
    if decision is None or error is False:
        return None
    d["decision"], d["error"] = decision, error
    return _make(HistoryRecord, d)  # type: ignore[no-any-return]


def lease_event(d: dict[str, Any]) -> LeaseEvent | None:
    if not _run_fields_ok(d):
        return None
    event = _member(LeaseEventKind, d["event"])
    execution = d["execution"]
    if execution is not None:
        execution = execution_requested(execution)
        if execution is None:
            return None
    if event is None:
        return None
    d["event"], d["execution"] = event, execution
    return _make(LeaseEvent, d)  # type: ignore[no-any-return]


def held_range(partition: int, start: int, count: int, ttl_ms: int) -> HeldRange:
    """A HeldRange from values its writer built itself (no validation: a worker lists
    thousands per snapshot, and the snapshot is checked as a whole when it is read)."""
    values = {"partition": partition, "start": start, "count": count, "ttl_ms": ttl_ms}
    return _make(HeldRange, values)  # type: ignore[no-any-return]


def lease_snapshot(d: dict[str, Any]) -> LeaseSnapshot | None:
    held = d["held"]
    if not (
        0 < len(d["worker_id"]) <= 128 and _ident(d["incarnation"]) and len(held) <= MAX_HELD_RANGES
    ) or not POOL_RE.fullmatch(d["pool"]):
        return None
    ranges = []
    total = 0
    for r in held:
        count = r["count"]
        if (
            not 0 <= r["partition"] <= MAX_PARTITION
            or not 0 <= r["start"] <= MAX_OFFSET - MAX_HELD_RUNS
            or not 1 <= r["ttl_ms"] <= MAX_LEASE_TTL_MS
        ):
            return None
        total += count
        if not 1 <= count <= MAX_HELD_RUNS or total > MAX_HELD_RUNS:
            return None
        ranges.append(_make(HeldRange, r))
    d["held"] = ranges
    return _make(LeaseSnapshot, d)  # type: ignore[no-any-return]


def _models_in(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _models_in(arg)]


@functools.cache
def signature(model: type[BaseModel]) -> str:
    """A digest of what validating `model` means: its fields' types, constraints and defaults
    and its validators, nested models included (object addresses left out)."""
    parts: list[str] = []
    seen: set[type[BaseModel]] = set()

    def walk(m: type[BaseModel]) -> None:
        if m in seen:
            return
        seen.add(m)
        parts.append(f"{m.__qualname__} {m.model_config} {m.__pydantic_decorators__}")
        for name, info in m.model_fields.items():
            parts.append(f"{name}: {info!r}")
            for nested in _models_in(info.annotation):
                walk(nested)

    walk(model)
    text = re.sub(r" at 0x[0-9a-f]+|(?<=[A-Za-z]):[0-9]{6,}(?=')", "", "\n".join(parts))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


BUILDERS: dict[type[WireModel], Builder] = {
    ExecutionRequested: execution_requested,
    ExecutionOutcome: execution_outcome,
    ExecutionOutcomes: execution_outcomes,
    ExecutionBatch: execution_batch,
    HistoryRecord: history_record,
    LeaseEvent: lease_event,
    LeaseSnapshot: lease_snapshot,
}
SIGNATURES: dict[type[WireModel], str] = {
    ExecutionRequested: "0c04be9e1faf0986",  # targets go through pydantic (models/targets.py)
    ExecutionOutcome: "7a5c67b77780e0a0",
    ExecutionOutcomes: "c61947a38b5c57d2",  # its outcomes as ExecutionOutcome's
    ExecutionBatch: "1d70c16216af14b2",  # its entries are bytes, decoded by their reader
    HistoryRecord: "b0d029e19b02a316",
    LeaseEvent: "f6ca37fd731b2cc8",  # its execution (models/targets.py)
    LeaseSnapshot: "ae0c40e00316ce19",
}
"""What each builder was written against; update together with the builder."""


def builder(model: type[WireModel]) -> Builder | None:
    """The fast builder for `model`, or None (pydantic) when there is none or it is stale."""
    fast = BUILDERS.get(model)
    return fast if fast is not None and SIGNATURES.get(model) == signature(model) else None


def new_execution(values: dict[str, Any]) -> ExecutionRequested:
    """The ExecutionRequested the scheduler dispatches, from every field's value (its trigger a
    TriggerKind, its target a validated model, its instants aware UTC datetimes on a whole
    millisecond): the checks of `execution_requested` instead of pydantic's validation, which
    still runs, and raises its error, when one fails or the model changed since."""
    if (
        SIGNATURES[ExecutionRequested] == signature(ExecutionRequested)
        and _execution_ok(values)
        and isinstance(values["trigger"], TriggerKind)
        and isinstance(values["target"], _TARGET_MODELS)
    ):
        return _make(ExecutionRequested, values)  # type: ignore[no-any-return]
    return ExecutionRequested(**values)


def run_maker(values: dict[str, Any]) -> Callable[..., ExecutionRequested] | None:
    """For the runs of one series (the scheduler's `fire_series`): a function of a run's
    execution id, nominal and due instants and `start_by` that makes what `new_execution`
    makes of `values` with those four fields replaced, the other fields checked once here.
    None: they do not pass `new_execution`'s checks (or the model changed since): make each
    with `new_execution`, which raises the error."""
    if not (
        SIGNATURES[ExecutionRequested] == signature(ExecutionRequested)
        and _execution_ok(values)
        and isinstance(values["trigger"], TriggerKind)
        and isinstance(values["target"], _TARGET_MODELS)
    ):
        return None
    base = dict(values)
    names = frozenset(base)

    def run(
        execution_id: str, nominal_at: datetime, due_at: datetime, start_by: datetime | None
    ) -> ExecutionRequested:
        own = base.copy()
        own["execution_id"] = execution_id
        own["nominal_at"] = nominal_at
        own["due_at"] = due_at
        own["start_by"] = start_by
        if not 0 < len(execution_id) <= 400:  # the one field of these `_execution_ok` checks
            return new_execution(own)
        return made(ExecutionRequested, own, names)  # type: ignore[no-any-return]

    return run


_TARGET_MODELS = tuple(_models_in(Target))
