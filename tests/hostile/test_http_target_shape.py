"""Issue 42, items 2 and 9: what a webhook's request shape (method, query, success and retryable
statuses) and a job's max_event_age_ms accept, and what they refuse when the job is defined:
huge, malformed, not text, credentials, statuses outside HTTP's, retries of a success."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from kadence.examples import schedule_definition
from kadence.models import HttpTarget, ScheduleDefinition
from kadence.models.schedule import MAX_EVENT_AGE_MS
from kadence.models.statuses import (
    DEFAULT_RETRYABLE,
    DEFAULT_SUCCESS,
    MAX_STATUS_ENTRIES,
    status_set,
)
from kadence.models.targets import MAX_QUERY_BYTES, MAX_QUERY_PARAMS, with_query

URL = "https://hooks.example.com/run"


def refused(match: str, **target: Any) -> None:
    with pytest.raises(ValidationError, match=match):
        HttpTarget(url=URL, **target)


# -- method ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE"])
def test_every_usual_method_is_accepted(method: str) -> None:
    assert HttpTarget(url=URL, method=method).method == method


@pytest.mark.parametrize("method", ["HEAD", "CONNECT", "TRACE", "OPTIONS", "get", "POST ", "", 1])
def test_another_method_is_refused(method: object) -> None:
    refused("method", method=method)


# -- query -----------------------------------------------------------------------------------


def test_query_parameters_go_after_the_urls_own_percent_encoded() -> None:
    query = {"q": "a b+c&d=e/f?", "é": "ü", "empty": ""}
    target = HttpTarget(url=f"{URL}?page=2#top", query=query)
    assert with_query(target.url, target.query) == (
        f"{URL}?page=2&q=a%20b%2Bc%26d%3De%2Ff%3F&%C3%A9=%C3%BC&empty=#top"
    )
    assert with_query(URL, {}) == URL


@pytest.mark.parametrize("value", [1, None, ["a"], {"a": "b"}, True, 1.5, b"\xff\xfe"])
def test_a_query_value_that_is_not_text_is_refused(value: object) -> None:
    refused("valid string|unicode string", query={"a": value})


@pytest.mark.parametrize(
    "name", ["access_token", "API_KEY", " apikey", "Api-Key ", "client_secret", "Password"]
)
def test_a_credential_in_the_query_is_refused(name: str) -> None:
    refused("carries credentials", query={name: "sk_live_123"})


@pytest.mark.parametrize("text", ["a\r\nb", "\x00", "tab\t", "del\x7f", "c1\x85"])
@pytest.mark.parametrize("where", ["name", "value"])
def test_a_control_character_in_the_query_is_refused(text: str, where: str) -> None:
    query = {text: "v"} if where == "name" else {"n": text}
    refused(f"its {where} holds a control character", query=query)


@pytest.mark.parametrize("query", [{"\ud800": "v"}, {"n": "a\udfff"}])
def test_a_lone_surrogate_in_the_query_is_refused(query: dict[str, str]) -> None:
    refused("unicode string", query=query)


def test_huge_queries_are_refused() -> None:
    refused(f"at most {MAX_QUERY_PARAMS} query parameters",
            query={f"p{i}": "" for i in range(MAX_QUERY_PARAMS + 1)})  # fmt: skip
    refused("at least 1 character", query={"": "v"})
    refused("at most 256 characters", query={"n" * 257: "v"})
    # each "€" takes 9 bytes percent-encoded: under the length bound, over the encoded one
    refused("bytes percent-encoded", query={"n": "€" * (MAX_QUERY_BYTES // 9 + 1)})
    refused("bytes percent-encoded", query={"n": "x" * (MAX_QUERY_BYTES + 1)})
    assert HttpTarget(url=URL, query={"n": "x" * (MAX_QUERY_BYTES - 2)}).query


# -- statuses --------------------------------------------------------------------------------


def test_status_entries_name_statuses_classes_and_ranges() -> None:
    target = HttpTarget(
        url=URL, success_statuses=[204, "3XX", "200-201"], retryable_statuses=["409", "5xx"]
    )
    assert target.success_statuses == ["204", "3xx", "200-201"]
    assert status_set(target.success_statuses, DEFAULT_SUCCESS) == {200, 201, 204, *range(300, 400)}
    assert status_set(target.retryable_statuses, DEFAULT_RETRYABLE) == {409, *range(500, 600)}
    assert status_set(None, DEFAULT_SUCCESS) == set(range(200, 300))
    assert status_set([], DEFAULT_RETRYABLE) == frozenset()


@pytest.mark.parametrize(
    "entry",
    ["600", "099", "99", "1000", "6xx", "0xx", "2x", "2xxx", "204-200", "200-600", "200-",
     "-200", "2 04", "204\n", "", "x" * 10_000, "20\uff14", True, 204.0, None, ["204"], -1, 10**30],
)  # fmt: skip
def test_a_status_entry_that_is_not_one_is_refused(entry: object) -> None:
    refused("success_statuses", success_statuses=[entry])
    refused("retryable_statuses", retryable_statuses=[entry])


def test_status_lists_are_bounded() -> None:
    too_many = ["500"] * (MAX_STATUS_ENTRIES + 1)
    refused("success_statuses", success_statuses=too_many)
    refused("retryable_statuses", retryable_statuses=too_many)
    refused("success_statuses", success_statuses=[])  # nothing would ever succeed


@pytest.mark.parametrize("retried", [["2xx"], ["302"], ["100-499"], ["1xx"]])
def test_only_failures_may_be_retried(retried: list[str]) -> None:
    refused("only 4xx and 5xx", retryable_statuses=retried)


def test_a_status_may_not_both_succeed_and_retry() -> None:
    refused("404 both succeed and retry", success_statuses=["2xx", "404"],
            retryable_statuses=["4xx"])  # fmt: skip
    assert HttpTarget(url=URL, success_statuses=["2xx", "404"], retryable_statuses=["5xx"])
    # the default retries do not clash with a success named: the success wins
    assert HttpTarget(url=URL, success_statuses=["503"]).retryable_statuses is None


# -- max_event_age_ms ------------------------------------------------------------------------


def definition(**changes: Any) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate({**schedule_definition().model_dump(), **changes})


def test_max_event_age_is_bounded() -> None:
    assert definition().max_event_age_ms is None
    assert definition(max_event_age_ms=1_000).max_event_age_ms == 1_000
    assert definition(max_event_age_ms=MAX_EVENT_AGE_MS).max_event_age_ms == MAX_EVENT_AGE_MS
    for bad in (0, 999, -1, MAX_EVENT_AGE_MS + 1, 2**63, "soon", 1.5, True):
        with pytest.raises(ValidationError, match="max_event_age_ms"):
            definition(max_event_age_ms=bad)
