"""`ApiClient`'s refusals without a broker (kadence/api_errors.py): each status raises its own
class with the status, the API's reason in one line (a quota's `msg`, field errors with the field
they name) and the CLI's exit code; a 429's Retry-After is kept for the caller to wait on."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from kadence.api_client import ApiClient
from kadence.api_errors import (
    ApiError,
    ConflictError,
    InvalidRequestError,
    NotAllowedError,
    NotAuthenticatedError,
    NotFoundError,
    QuotaExceededError,
    ServerError,
)


def answering(status: int, detail: Any, headers: dict[str, str] | None = None) -> ApiClient:
    client = ApiClient("http://api.test", "tok")
    reply = httpx.Response(status, json={"detail": detail}, headers=headers)
    client.http = httpx.Client(
        base_url="http://api.test", transport=httpx.MockTransport(lambda _r: reply)
    )
    return client


FIELDS = [{"loc": ["body", "schedule", "expression"], "msg": "bad minute 99", "type": "x"}]
QUOTA = {"msg": "over 60 triggers a minute", "quota": "triggers", "limit": 60}


@pytest.mark.parametrize(
    ("status", "detail", "kind", "reason", "exit_code"),
    [
        (401, "no token", NotAuthenticatedError, "no token", 5),
        (403, "lacks 'operate'", NotAllowedError, "lacks 'operate'", 5),
        (404, "no job acme/x", NotFoundError, "no job acme/x", 4),
        (409, "exists", ConflictError, "exists", 6),
        (413, "too large", InvalidRequestError, "too large", 3),
        (422, FIELDS, InvalidRequestError, "schedule.expression: bad minute 99", 3),
        (429, QUOTA, QuotaExceededError, "over 60 triggers a minute", 7),
        (503, "view not ready", ServerError, "view not ready", 2),
        (410, "gone", ApiError, "gone", 2),
    ],
)
def test_each_refusal_raises_its_class_with_status_and_reason(
    status: int, detail: Any, kind: type[ApiError], reason: str, exit_code: int
) -> None:
    with answering(status, detail) as api, pytest.raises(ApiError) as refused:
        api.job("x")
    assert type(refused.value) is kind
    assert (refused.value.status, refused.value.reason) == (status, reason)
    assert refused.value.exit_code == exit_code
    assert refused.value.detail == detail  # the API's answer as it sent it


def test_a_quota_refusal_keeps_retry_after() -> None:
    with answering(429, QUOTA, {"retry-after": "7"}) as api, pytest.raises(QuotaExceededError) as e:
        api.trigger("x")
    assert e.value.retry_after_s == 7.0
    with (
        answering(429, QUOTA, {"retry-after": "soon"}) as api,
        pytest.raises(QuotaExceededError) as e,
    ):
        api.trigger("x")
    assert e.value.retry_after_s is None  # not seconds: waiting would be a guess
