"""Issue 42, item 4: what an attempt returned, kept within bounds. A webhook's status code, body
start (text or binary, cut at 1 KiB) and chosen headers against a loopback server; a handler's
return value as JSON, and what happens to one that is not JSON or too large; hostile input to
the models (kadence/models/results.py, connectors/results.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from connectors import handlers
from connectors.results import http_result, value_result
from kadence.models import ExecutionRequested, HandlerTarget, HttpTarget, OutcomeStatus, RunResult
from kadence.models.results import (
    RESULT_BODY_BYTES,
    RESULT_HEADER_CHARS,
    RESULT_VALUE_BYTES,
)
from kadence.models.targets import MAX_RESULT_HEADERS
from kadence.targets import Result, Stop
from tests.connectors.test_http import caller
from tests.connectors.test_http_async import Canned

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def webhook(url: str, result_headers: list[str] | None = None) -> ExecutionRequested:
    return ExecutionRequested(
        execution_id="acme/job@2026-12-01T09:00:00.000Z",
        tenant="acme",
        job_id="job",
        definition_version=1,
        nominal_at=T,
        due_at=T,
        dispatched_at=T,
        target=HttpTarget(url=url, result_headers=result_headers or []),
        timeout_ms=5_000,
        lease_ttl_ms=30_000,
    )


def answered(answer: bytes, result_headers: list[str] | None = None) -> Result:
    srv = Canned(answer)
    ex = webhook(f"{srv.url}/x", result_headers)
    return caller()(ex, Stop(), time.monotonic() + 5)


def detail(result: Result) -> RunResult:
    assert result.detail is not None
    return result.detail


# -- webhooks ---------------------------------------------------------------------------------


def test_a_success_keeps_its_status_body_and_the_chosen_headers_only() -> None:
    answer = (
        b'HTTP/1.1 201 Created\r\ncontent-length: 11\r\nETag: "v7"\r\nX-Request-Id: r-1\r\n'
        b'Set-Cookie: session=s3cret\r\nServer: test\r\n\r\n{"id": 42}\n'
    )
    result = answered(answer, ["etag", "X-REQUEST-ID", "x-absent"])
    assert result.status is OutcomeStatus.succeeded
    got = detail(result)
    assert (got.status_code, got.body, got.body_truncated) == (201, b'{"id": 42}\n', False)
    assert got.headers == {"etag": '"v7"', "x-request-id": "r-1"}  # named ones, lower-cased
    assert "s3cret" not in repr(got)  # an answer header the target did not name
    assert got.shown() == {
        "status_code": 201,
        "headers": {"etag": '"v7"', "x-request-id": "r-1"},
        "body": '{"id": 42}\n',
    }


def test_a_failure_keeps_its_result_beside_the_error() -> None:
    result = answered(b"HTTP/1.1 503 Busy\r\ncontent-length: 9\r\nretry-after: 30\r\n\r\ntry later")
    assert (result.status, result.retryable) == (OutcomeStatus.failed, True)
    assert result.error is not None and result.error.code == "503"
    assert (detail(result).status_code, detail(result).body) == (503, b"try later")
    assert detail(result).headers == {}  # none named


def test_a_huge_body_keeps_its_first_kib_and_says_it_was_cut() -> None:
    big = b"a" * 200_000
    result = answered(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(big) + big)
    got = detail(result)
    assert (got.body, got.body_truncated) == (b"a" * RESULT_BODY_BYTES, True)
    assert got.shown()["body_truncated"] is True


def test_a_binary_body_is_shown_as_base64() -> None:
    raw = bytes(range(256))
    got = detail(answered(b"HTTP/1.1 200 OK\r\ncontent-length: 256\r\n\r\n" + raw))
    assert got.body == raw
    shown = got.shown()
    assert shown["body_encoding"] == "base64"
    assert base64.b64decode(shown["body"]) == raw


def test_text_cut_inside_a_character_stays_text() -> None:
    body = ("é" * 1000).encode()  # 2 000 bytes: the cut at 1 024 falls between two of é's bytes
    got = detail(answered(b"HTTP/1.1 200 OK\r\ncontent-length: 2000\r\n\r\n" + body[:2000]))
    assert len(got.body) == RESULT_BODY_BYTES
    assert got.shown()["body"] == "é" * 512
    assert "body_encoding" not in got.shown()
    odd = RunResult(body=b"\xc3", body_truncated=False)  # not cut by us: that is binary
    assert odd.shown()["body_encoding"] == "base64"


def test_huge_answer_headers_are_cut_to_their_bound_with_a_note() -> None:
    long = b"v" * 10_000
    answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nx-big: " + long + b"\r\nx-small: s\r\n\r\n"
    got = detail(answered(answer, ["x-big", "x-small"]))
    assert got.headers == {"x-big": "v" * RESULT_HEADER_CHARS, "x-small": "s"}
    assert "x-big" in got.note and str(RESULT_HEADER_CHARS) in got.note


def test_an_http_result_without_chosen_headers_makes_no_header_work() -> None:
    got = http_result(204, {"etag": "x"}, b"", ())
    assert (got.status_code, got.headers, got.body, got.note) == (204, {}, b"", "")


# -- handlers ---------------------------------------------------------------------------------


def handler_run(name: str) -> Result:
    ex = ExecutionRequested(
        execution_id="acme/h@2026-12-01T09:00:00.000Z",
        tenant="acme",
        job_id="h",
        definition_version=1,
        nominal_at=T,
        due_at=T,
        dispatched_at=T,
        target=HandlerTarget(name=name),
        timeout_ms=1_000,
        lease_ttl_ms=3_000,
    )
    return handlers.HandlerCaller()(ex, Stop(), time.monotonic() + 1)


@handlers.handler("results-value", tenants=["acme"])
def _value(_ex: ExecutionRequested, _stop: Stop) -> object:
    return {"rows": 3, "file": "s3://b/k", "ok": True, "name": "Zoë"}


@handlers.handler("results-async-value", tenants=["acme"])
async def _async_value(_ex: ExecutionRequested, _stop: Stop) -> object:
    await asyncio.sleep(0)
    return [1, 2, 3]


@handlers.handler("results-set", tenants=["acme"])
def _a_set(_ex: ExecutionRequested, _stop: Stop) -> object:
    return {1, 2}


@handlers.handler("results-huge", tenants=["acme"])
def _huge(_ex: ExecutionRequested, _stop: Stop) -> object:
    return "x" * 1_000_000


def test_a_handlers_return_value_is_its_result_as_json() -> None:
    result = handler_run("results-value")
    assert result.status is OutcomeStatus.succeeded
    got = detail(result)
    assert json.loads(got.value or "") == {"rows": 3, "file": "s3://b/k", "ok": True, "name": "Zoë"}
    assert got.json_value() == {"rows": 3, "file": "s3://b/k", "ok": True, "name": "Zoë"}
    assert got.status_code is None
    assert detail(handler_run("results-async-value")).json_value() == [1, 2, 3]


def test_a_value_that_is_not_json_is_left_out_with_a_note_and_the_run_succeeds() -> None:
    result = handler_run("results-set")
    assert result.status is OutcomeStatus.succeeded
    got = detail(result)
    assert got.value is None
    assert got.note.startswith("not kept: the handler returned a set, not JSON")


def test_a_huge_value_is_left_out_with_a_note() -> None:
    got = detail(handler_run("results-huge"))
    assert got.value is None
    assert "1000002 bytes as JSON" in got.note and str(RESULT_VALUE_BYTES) in got.note


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (float("nan"), "not JSON"),
        (object(), "not JSON"),
        (b"bytes", "not JSON"),
        ([[[]]] * 2_000, "bytes as JSON"),  # 10 001 bytes
    ],
)
def test_values_that_cannot_be_kept(value: Any, why: str) -> None:
    got = value_result(value)
    assert got.value is None and why in got.note
    RunResult.model_validate(got.model_dump())  # within the model's bounds


def test_deep_nesting_and_lone_surrogates_do_not_break_the_result() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert value_result(deep).value is None  # RecursionError: noted, not raised
    got = value_result("\ud800 lone")
    assert got.value == '"\\ud800 lone"'  # escaped: still JSON, and UTF-8 can carry it
    RunResult.model_validate(got.model_dump())
    largest = value_result("é" * (RESULT_VALUE_BYTES // 2 - 1))  # 4 094 bytes + the quotes
    assert largest.value is not None
    RunResult.model_validate(largest.model_dump())


# -- the models at the door -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"body": b"x" * (RESULT_BODY_BYTES + 1)}, "at most 1024"),
        ({"status_code": 99}, "greater than or equal to 100"),
        ({"status_code": 2**70}, "less than or equal to 999"),
        ({"headers": {f"h{i}": "v" for i in range(17)}}, "at most 16"),
        ({"headers": {"Upper": "v"}}, "pattern"),
        ({"headers": {"bad name": "v"}}, "pattern"),
        ({"headers": {"h": "v" * (RESULT_HEADER_CHARS + 1)}}, "at most 1024"),
        ({"value": "{not json"}, "JSON text"),
        ({"value": json.dumps("é" * RESULT_VALUE_BYTES)}, "at most 4096"),
        ({"note": "n" * 513}, "at most 512"),
    ],
)
def test_a_result_out_of_bounds_is_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        RunResult(**fields)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ([f"x-h{i}" for i in range(MAX_RESULT_HEADERS + 1)], "at most 16 result headers"),
        (["set-cookie"], "carries credentials"),
        (["Authorization"], "carries credentials"),
        (["etag", "ETag"], "named twice"),
        (["bad name"], "not an HTTP header name"),
        (["x" * 100_000], "not an HTTP header name"),
        (["x\r\ninjected"], "not an HTTP header name"),
        ("etag", "list"),
    ],
)
def test_result_headers_hostile_input(names: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        HttpTarget(url="https://a.example/", result_headers=names)
