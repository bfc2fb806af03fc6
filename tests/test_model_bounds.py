"""Issue 41, item 1: every value bounded as the wire holds it, in the models themselves.

Two halves. The audit walks every field of every record type (nested models too) and fails on
one whose value the wire could fail to hold: an int without both bounds inside Avro's `long`,
a float without finite bounds, a string without a length or a bounded pattern (or one that
admits lone surrogates, which UTF-8 cannot carry), bytes, lists and maps without a length, an
instant without the calendar bounds. A new field without a bound fails here.

The property builds records from those same bounds (extremes first) and checks that what a
model accepts, `Codec.encode` writes and `Codec.decode` reads back equal; and that the
ingress (the door with no API in front of it) routes what the model accepts. Together they
show that "a value the model accepts and the encoder refuses" cannot happen: the class of bug
that let `"version": 2^63` stop the ingress.
"""

from __future__ import annotations

import json
import re
import types
import typing
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError
from pydantic.fields import FieldInfo

from kadence.codec import Codec
from kadence.examples import examples
from kadence.models import (
    COMMAND_TYPES,
    RECORD_TYPES,
    Backfill,
    IntervalSchedule,
    LeaseSnapshot,
    Rejected,
    ReplayDeadLetter,
    RetryPolicy,
    ScheduleDefinition,
    WireModel,
)
from kadence.models.base import (
    DEFAULT_POOL,
    EARLIEST,
    LATEST,
    MAX_LONG,
    MEDIA_TYPE_RE,
    _media_type,
)
from kadence.models.execution import MAX_HELD_RUNS
from kadence.models.targets import HttpTarget, SqsTarget, _header_value
from kadence.settings import KadenceSettings
from kadence.target_topics import ingress_topic
from kadence.topics import Topics
from streams.ingress.route import Router
from streams.runtime.records import InputRecord

CODEC = Codec()
NONE = type(None)
EXAMPLE = examples()["ScheduleDefinition"]


# -- reading an annotation ----------------------------------------------------------------------


def _unwrap(tp: Any, meta: list[Any]) -> tuple[Any, list[Any]]:
    """`tp` without its Annotated layers, and every constraint and validator they carried."""
    while typing.get_origin(tp) is Annotated:
        tp, *extra = typing.get_args(tp)
        for item in extra:
            meta = [*meta, *(item.metadata if isinstance(item, FieldInfo) else [item])]
    return tp, meta


def _attr(meta: list[Any], name: str) -> Any:
    found = [getattr(m, name) for m in meta if getattr(m, name, None) is not None]
    return found[-1] if found else None


def _validators(meta: list[Any]) -> set[Any]:
    return {getattr(m, "func", None) for m in meta} - {None}


_CLASS = re.compile(r"\[(?:\\.|[^\]])*\]")


def _bounded(pattern: str) -> bool:
    """A pattern that bounds its length: {m,n} and ?, no * or + (outside a class)."""
    outside = _CLASS.sub("", pattern.replace("\\\\", ""))
    return not re.search(r"(?<!\\)[*+]|\{\d*,\}", outside)


def problems(model: type[BaseModel]) -> list[str]:
    """Every field of `model` (and of the models in it) the wire could fail to hold."""
    found: list[str] = []
    seen: set[type[BaseModel]] = set()

    def walk(m: type[BaseModel]) -> None:
        if m in seen:
            return
        seen.add(m)
        for name, info in m.model_fields.items():
            check(f"{m.__name__}.{name}", info.annotation, list(info.metadata))

    def check(path: str, tp: Any, meta: list[Any]) -> None:  # noqa: PLR0912 - one case per type
        tp, meta = _unwrap(tp, meta)
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            for arg in typing.get_args(tp):
                if arg is not NONE:
                    check(path, arg, meta)
        elif origin is Literal or tp is bool or (isinstance(tp, type) and issubclass(tp, Enum)):
            return
        elif origin in (list, dict):
            if _attr(meta, "max_length") is None:
                found.append(f"{path}: no max_length")
            args = typing.get_args(tp)
            names = ["[]"] if origin is list else ["{key}", "{value}"]
            for suffix, arg in zip(names, args, strict=True):
                check(path + suffix, arg, [])
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            walk(tp)
        elif tp is int:
            low = _attr(meta, "ge") if _attr(meta, "ge") is not None else _attr(meta, "gt")
            high = _attr(meta, "le") if _attr(meta, "le") is not None else _attr(meta, "lt")
            if low is None or high is None or low < -MAX_LONG - 1 or high > MAX_LONG:
                found.append(f"{path}: an int not bounded within an Avro long ({low}, {high})")
        elif tp is float:
            low, high = _attr(meta, "ge"), _attr(meta, "le")
            if low is None or high is None:
                found.append(f"{path}: a float without finite bounds")
        elif tp is str:  # a length or pattern also keeps lone surrogates out (see below)
            pattern = _attr(meta, "pattern")
            if _attr(meta, "max_length") is None and not (pattern and _bounded(pattern)):
                found.append(f"{path}: a string without a length or a bounded pattern")
        elif tp is bytes:
            if _attr(meta, "max_length") is None:
                found.append(f"{path}: bytes without a length")
        elif tp is datetime:
            if not any(getattr(f, "__name__", "") == "_utc_ms" for f in _validators(meta)):
                found.append(f"{path}: an instant without the calendar bounds (UtcDatetime)")
        else:
            found.append(f"{path}: {tp!r}, a type the audit does not know")

    walk(model)
    return found


@pytest.mark.parametrize("model", RECORD_TYPES, ids=lambda m: m.avro_name)
def test_every_field_of_every_record_is_bounded_as_the_wire_holds_it(
    model: type[WireModel],
) -> None:
    assert problems(model) == []


def test_the_audit_finds_a_field_without_a_bound() -> None:
    """The audit is not vacuous: each kind of unbounded field is named."""

    class Unbounded(WireModel):
        count: int
        half: Annotated[int, Field(ge=0)]
        past_long: Annotated[int, Field(ge=0, le=2**64)]
        ratio: float
        note: str
        free: Annotated[str, Field(pattern=r"^.*$")]
        blob: bytes
        tags: list[Annotated[str, Field(max_length=8)]]
        extra: dict[str, str]
        at: datetime

    named = {p.split(":")[0].removeprefix("Unbounded.") for p in problems(Unbounded)}
    assert named == {
        "count", "half", "past_long", "ratio", "note", "free", "blob", "tags",
        "extra", "extra{key}", "extra{value}", "at",
    }  # fmt: skip


# -- records built from the bounds -------------------------------------------------------------

INSTANTS = st.datetimes(
    min_value=EARLIEST.replace(tzinfo=None),
    max_value=(LATEST - timedelta(seconds=1)).replace(tzinfo=None),
    timezones=st.just(UTC),
) | st.sampled_from([EARLIEST, LATEST - timedelta(milliseconds=1)])
HEADER_TEXT = st.characters(codec="latin-1").filter(
    lambda c: c == "\t" or " " <= c <= "~" or c >= "\xa0"
)
OVERRIDES: dict[str, st.SearchStrategy[Any]] = {
    "HttpTarget.url": st.builds(
        "https://h.example/{}".format, st.text(st.characters(exclude_characters="#?"), max_size=40)
    ),
    "SqsTarget.queue_url": st.from_regex(r"[A-Za-z0-9_-]{1,80}", fullmatch=True).map(
        "https://sqs.eu-west-1.amazonaws.com/123456789012/{}".format
    ),
    "HttpTarget.query": st.dictionaries(
        st.from_regex(r"[a-z]{1,8}", fullmatch=True),
        st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=40),
        max_size=3,
    )
    | st.just({f"p{i}": "\U0001f600" * 28 for i in range(9)}),  # near the encoded bound
    "HttpTarget.success_statuses": st.none() | st.sampled_from([["2xx"], ["100-399"], [204]]),
    "HttpTarget.retryable_statuses": st.none() | st.sampled_from([[], ["4xx", "599"]]),
    "ExcludeDates.start": st.dates().map(str),
    "ExcludeDates.end": st.none() | st.dates().map(str),
}
"""Fields whose validator wants more than a bound says (an absolute URL, a real date)."""


def _strings(meta: list[Any]) -> st.SearchStrategy[str]:
    pattern, most = _attr(meta, "pattern"), _attr(meta, "max_length")
    least = _attr(meta, "min_length") or 0
    checks = _validators(meta)
    if pattern is not None:
        return st.from_regex(pattern.removeprefix("^").removesuffix("$"), fullmatch=True)
    if _media_type in checks:
        return st.from_regex(MEDIA_TYPE_RE, fullmatch=True).filter(lambda t: len(t) <= most)
    if _header_value in checks:
        return st.text(HEADER_TEXT, max_size=min(most, 40)) | st.just("\xff" * most)
    full = "\U0001f600" * most if most <= 70_000 else "x" * most
    return st.text(min_size=least, max_size=min(most, 40)) | st.just(full)


def test_a_constrained_string_refuses_lone_surrogates_a_plain_one_does_not() -> None:
    """What the audit's string rule relies on: pydantic reads a string with a length or a
    pattern (a map's keys and values too) as Unicode, so a lone surrogate, which UTF-8 cannot
    carry, is refused; a plain `str` takes it. Should pydantic change, this fails first."""

    class Strings(BaseModel):
        plain: str = ""
        long: Annotated[str, Field(max_length=8)] = ""
        shaped: Annotated[str, Field(pattern=r"^[a-z]{0,3}$")] = ""
        keyed: dict[Annotated[str, Field(max_length=8)], Annotated[str, Field(max_length=8)]] = {}

    assert Strings(plain="\ud800").plain == "\ud800"
    for bad in ({"long": "a\udfff"}, {"shaped": "\ud800"}, {"keyed": {"\ud800": "v"}},
                {"keyed": {"k": "\udc80"}}):  # fmt: skip
        with pytest.raises(ValidationError, match="unicode string"):
            Strings.model_validate(bad)
    with pytest.raises(ValidationError, match="description"):
        ScheduleDefinition.model_validate({**EXAMPLE.model_dump(), "description": "\ud800"})


def values(path: str, tp: Any, meta: list[Any]) -> st.SearchStrategy[Any]:  # noqa: PLR0911, PLR0912
    """What a field of type `tp` with constraints `meta` may hold, its extremes among them."""
    if path in OVERRIDES:
        return OVERRIDES[path]
    tp, meta = _unwrap(tp, meta)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(
            [st.none() if a is NONE else values(path, a, meta) for a in typing.get_args(tp)]
        )
    if origin is Literal:
        return st.sampled_from(typing.get_args(tp))
    if tp is bool:
        return st.booleans()
    if isinstance(tp, type) and issubclass(tp, Enum):
        return st.sampled_from(list(tp))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return records(tp)
    if origin is list:
        most = min(_attr(meta, "max_length"), 3)
        return st.lists(values(path + "[]", typing.get_args(tp)[0], []), max_size=most)
    if origin is dict:
        k, v = typing.get_args(tp)
        most = min(_attr(meta, "max_length"), 3)
        return st.dictionaries(values(path, k, []), values(path, v, []), max_size=most)
    if tp is int:
        low, high = _attr(meta, "ge"), _attr(meta, "le")
        return st.sampled_from([low, high]) | st.integers(low, high)
    if tp is float:
        return st.floats(_attr(meta, "ge"), _attr(meta, "le"))
    if tp is str:
        return _strings(meta)
    if tp is bytes:
        most = _attr(meta, "max_length")
        return st.binary(max_size=64) | st.just(b"\xff" * most)
    if tp is datetime:
        return INSTANTS
    raise AssertionError(f"{path}: no strategy for {tp!r}")


FILTERED = [HealthCheck.filter_too_much, HealthCheck.too_slow]
FIXUPS: dict[type[BaseModel], Any] = {
    RetryPolicy: lambda d: {
        **d,
        "max_backoff_ms": max(d["max_backoff_ms"], d["initial_backoff_ms"]),
    },
    IntervalSchedule: lambda d: {
        **d,
        "offset_s": d["offset_s"] % d["every_s"],
        "spread_s": d["spread_s"] % d["every_s"],
    },
    Backfill: lambda d: {**d, "end": max(d["end"], d["start"] + timedelta(milliseconds=1))},
    LeaseSnapshot: lambda d: {**d, "held": d["held"][: 1 if d["held"] else 0]},
    ReplayDeadLetter: lambda d: {**d, "letter": None},
}  # fmt: skip
"""Cross-field rules a bound cannot say (max_backoff >= initial, offset below every, ...)."""


@st.composite
def _record(draw: st.DrawFn, model: type[BaseModel]) -> BaseModel:
    drawn = {
        name: draw(values(f"{model.__name__}.{name}", info.annotation, list(info.metadata)))
        for name, info in model.model_fields.items()
    }
    fix = FIXUPS.get(model)
    try:
        return model.model_validate(fix(drawn) if fix else drawn)
    except ValidationError:
        assume(False)  # another cross-field rule (a topic name too long for its tenant, ...)
        raise


def records(model: type[BaseModel]) -> st.SearchStrategy[Any]:
    return _record(model)


@settings(max_examples=60, suppress_health_check=FILTERED)
@pytest.mark.parametrize("model", RECORD_TYPES, ids=lambda m: m.avro_name)
@given(data=st.data())
def test_what_a_model_accepts_encodes_and_decodes_back_equal(
    model: type[WireModel], data: st.DataObject
) -> None:
    record = data.draw(records(model))
    assert isinstance(record, model)
    assert CODEC.decode(CODEC.encode(record)) == record
    assert LeaseSnapshot.model_fields["held"] and MAX_HELD_RUNS  # (FIXUPS keeps one range)


TOPICS = Topics(KadenceSettings(partitions=4))
ROUTER = Router(TOPICS, 4, CODEC)


@settings(max_examples=60, suppress_health_check=FILTERED)
@pytest.mark.parametrize("model", [ScheduleDefinition, *COMMAND_TYPES], ids=lambda m: m.avro_name)
@given(data=st.data())
def test_what_a_model_accepts_the_ingress_routes(
    model: type[WireModel], data: st.DataObject
) -> None:
    """The ingress's door: a tenant's JSON record that its model accepts is routed to Kadence's
    topics, never refused for what it holds (a ReplayDeadLetter without its letter), as it was
    but for its `actor`, which a tenant cannot claim (kadence/models/base.py `Actor`)."""
    record = data.draw(records(model))
    payload = getattr(record, "payload", None)
    assume(payload is None or _utf8(payload))  # JSON carries text; other bytes are the SDK's
    tenant = record.tenant
    kind = "schedules" if model is ScheduleDefinition else "commands"
    typed = {} if kind == "schedules" else {"type": model.avro_name}
    doc = {**typed, **record.model_dump(mode="json")}
    topic = ingress_topic("kadence", tenant, kind)
    [out] = ROUTER.route(InputRecord(topic, 0, 0, None, json.dumps(doc).encode(), [], 0), 0)
    pool = getattr(getattr(record, "target", None), "pool", None)
    if pool not in (None, DEFAULT_POOL):  # a worker pool this deployment (none named) lacks
        rejected = CODEC.decode(out.value)
        assert isinstance(rejected, Rejected) and rejected.code == "unknown_pool"
        return
    assert out.topic != TOPICS.rejected, CODEC.decode(out.value)
    assert CODEC.decode(out.value) == record.model_copy(update={"actor": None})


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def test_sqs_and_http_overrides_are_what_the_models_take() -> None:
    """Guard for the strategies above: the URL overrides pass the models' own validators."""
    HttpTarget(url="https://h.example/é")
    SqsTarget(queue_url="https://sqs.eu-west-1.amazonaws.com/123456789012/q")


def test_a_payload_nested_too_deep_is_refused_as_a_validation_error() -> None:
    """A JSON array nested a few hundred levels deep decodes, but writing it back as text (the
    payload rule) may exceed Python's recursion limit: a RecursionError is no ValueError and
    escaped validation (an API 500, a scheduler's processing_error). It is a refusal now."""
    deep = json.loads("[" * 900 + "]" * 900)

    def validate_at(depth: int) -> None:
        if depth:
            return validate_at(depth - 1)
        EXAMPLE.model_validate({**EXAMPLE.model_dump(), "payload": deep})
        return None

    with pytest.raises(ValidationError, match="nested too deep"):
        validate_at(200)  # as deep in the stack as the API validates
