"""Issue 41, item 1: no record a tenant writes stops the ingress. Near-valid JSON and Avro
(tests/hostile/near_valid.py) through `Router.route` and `Events.of`: each record becomes
Kadence's own records, each of which decodes back (what the model accepts, the wire holds), or
one `rejected` record with a code and a reason; nothing raises."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kadence.codec import Codec
from kadence.models import COMMAND_TYPES, Rejected, ScheduleDefinition, WireModel
from kadence.settings import KadenceSettings
from kadence.target_topics import ingress_topic
from kadence.topics import COMMANDS, Topics
from streams.ingress.events import Events
from streams.ingress.route import Out, Router
from streams.runtime.records import InputRecord
from tests.hostile.near_valid import EXAMPLES, near_valid

CODEC = Codec()
PARTS = 6
TOPICS = Topics(KadenceSettings(partitions=PARTS))
ROUTER = Router(TOPICS, PARTS, CODEC)
SCHEDULES_IN = ingress_topic("kadence", "acme", "schedules")
COMMANDS_IN = ingress_topic("kadence", "acme", "commands")
COMMAND_NAMES = [m.avro_name for m in COMMAND_TYPES]
KEYS = st.sampled_from([b"acme/nightly-report", None, b"acme/other", b"\xff\xfe", b"acme"])


def check(outs: list[Out]) -> Rejected | None:
    """What `route` returned is either Kadence's own records, each readable, or one rejected
    record with a code and a reason (returned)."""
    assert outs
    if outs[0].topic == TOPICS.rejected:
        [out] = outs
        refusal = CODEC.decode_as(out.value, Rejected)
        assert refusal.code and refusal.reason
        assert refusal.processor == "ingress"
        return refusal
    for out in outs:
        assert out.topic in (TOPICS.schedules, TOPICS.commands)
        assert 0 <= out.partition < PARTS
        if out.value is not None:
            record = CODEC.decode(out.value)
            assert out.key == str(getattr(record, "key", "")).encode()
            assert getattr(record, "tenant", None) == "acme"
    return None


@settings(max_examples=400)
@given(value=near_valid(["ScheduleDefinition"]), key=KEYS)
def test_near_valid_definitions_are_routed_or_refused_never_raised(
    value: bytes, key: bytes | None
) -> None:
    check(ROUTER.route(InputRecord(SCHEDULES_IN, 1, 7, key, value, [], 0), 1_000))


@settings(max_examples=400)
@given(
    value=near_valid(COMMAND_NAMES, typed=True),
    key=KEYS,
    header=st.sampled_from([None, "etl", "a b", "\udc80", "x" * 300]),
)
def test_near_valid_commands_are_routed_or_refused_never_raised(
    value: bytes, key: bytes | None, header: str | None
) -> None:
    headers: list[tuple[str, str | bytes | None]] = []
    if header is not None:
        headers.append(("kadence-concurrency-key", header.encode(errors="surrogateescape")))
    check(ROUTER.route(InputRecord(COMMANDS_IN, 0, 3, key, value, headers, 0), 1_000))


def _json(record: WireModel, **changes: object) -> bytes:
    doc = {**record.model_dump(mode="json"), **changes}
    return json.dumps(doc).encode()


DEFINITION = EXAMPLES["ScheduleDefinition"]
CONTROL_HEADER = {"kind": "http", "url": "https://x.example/", "headers": {"X-A": "a\x01b"}}
CASES = {
    "version 2^63 (the reproduced crash)": (_json(DEFINITION, version=2**63), "version"),
    "version -2^63-1": (_json(DEFINITION, version=-(2**63) - 1), "version"),
    "version past 2^53": (_json(DEFINITION, version=2**53), "version"),
    "timeout 2^64": (_json(DEFINITION, timeout_ms=2**64), "timeout_ms"),
    "CRLF in content_type": (_json(DEFINITION, content_type="text/plain\r\nX: 1"), "content_type"),
    "a control character in a header": (_json(DEFINITION, target=CONTROL_HEADER), "X-A"),
    "a lone surrogate": (_json(DEFINITION, description="\ud800"), "description"),
    "year 9999 rounded up": (
        _json(DEFINITION, schedule={"kind": "once", "run_at": "9999-12-31T23:59:59.9999Z"}),
        "run_at",
    ),
    "year 1 east of UTC": (
        _json(DEFINITION, schedule={"kind": "once", "run_at": "0001-01-01T00:00:00+01:00"}),
        "run_at",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_value_the_wire_cannot_hold_is_refused_naming_its_field(case: str) -> None:
    value, field = CASES[case]
    outs = ROUTER.route(InputRecord(SCHEDULES_IN, 1, 7, b"acme/nightly-report", value, [], 0), 0)
    refusal = check(outs)
    assert refusal is not None, case
    assert refusal.code == "invalid_record", refusal
    assert field in refusal.reason, refusal.reason


def test_an_unexpected_error_in_routing_is_a_rejected_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug on one record (here: any exception from the decoder) refuses that record with
    `processing_error`; the router goes on with the next."""

    def boom(*_a: object, **_k: object) -> ScheduleDefinition:
        raise OverflowError("Python int too large to convert to C long")

    router = Router(TOPICS, PARTS, Codec())
    good = CODEC.encode(DEFINITION)
    record = InputRecord(SCHEDULES_IN, 1, 7, b"acme/nightly-report", good, [], 0)
    monkeypatch.setattr(router.codec, "decode", boom)
    refusal = check(router.route(record, 0))
    assert refusal is not None
    assert refusal.code == "processing_error" and "OverflowError" in refusal.reason
    monkeypatch.undo()
    assert check(router.route(record, 0)) is None


EVENTS = Events(TOPICS, CODEC)


@settings(max_examples=300)
@given(
    topic=st.sampled_from(EVENTS.sources),
    value=near_valid(["DeadLetter", "TenantCircuit", "Rejected", "JobMoved"]),
    key=KEYS,
)
def test_near_valid_event_sources_tell_or_skip_never_raise(
    topic: str, value: bytes, key: bytes | None
) -> None:
    event = EVENTS.of(InputRecord(topic, 3, 9, key, value, [], 0))
    if event is not None:
        assert json.loads(event.value)["tenant"] == event.tenant
    assert EVENTS.failed == 0


def test_an_unexpected_error_telling_an_event_is_counted_not_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = Events(TOPICS, CODEC)
    letter = CODEC.encode(EXAMPLES["DeadLetter"])
    monkeypatch.setattr(Events, "_dead", staticmethod(lambda _r: 1 / 0))
    assert events.of(InputRecord(TOPICS.dead_letter, 0, 0, None, letter, [], 0)) is None
    assert events.failed == 1


def test_commands_decode_only_as_commands() -> None:
    """Guard for the strategy: a command example as JSON is routed as it stands."""
    for name in COMMAND_NAMES:
        if name == "ReplayDeadLetter":
            continue  # carries its letter: a control record on a tenant's topic
        record = EXAMPLES[name]
        outs = ROUTER.route(
            InputRecord(COMMANDS_IN, 0, 1, None, _json(record, type=name), [], 0), 0
        )
        assert check(outs) is None, name
        assert isinstance(COMMANDS.decode(CODEC, outs[0].value), type(record))
