"""Property-based API testing from the published OpenAPI spec (schemathesis): every operation,
with generated inputs, as an authenticated tenant, against the real stack: no server errors."""

from __future__ import annotations

from typing import Any

import hypothesis
import pytest
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok

from tests.api.conftest import TOKENS, Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_no_operation_answers_with_a_server_error(api: Api) -> None:
    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    headers = {"Authorization": f"Bearer {TOKENS['acme']}"}
    tested, calls = [], [0]
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"the spec has an invalid operation: {result}"
        operation = result.ok()

        @hypothesis.given(case=operation.as_strategy())
        @hypothesis.settings(
            max_examples=25,
            deadline=None,
            suppress_health_check=list(hypothesis.HealthCheck),
            derandomize=True,
            database=None,
        )
        def no_server_error(case: Any) -> None:
            calls[0] += 1
            case.call_and_validate(headers=headers, checks=[not_a_server_error])

        no_server_error()
        tested.append(operation.label)
    assert len(tested) >= 15, tested
    assert calls[0] >= 10 * len(tested)  # generated inputs, not one call each


def test_the_spec_is_published_and_lists_the_operations(api: Api) -> None:
    spec = api.http.get("/openapi.json").json()
    paths = set(spec["paths"])
    for path in (
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/pause",
        "/v1/jobs/{job_id}/trigger",
        "/v1/jobs/{job_id}/backfill",
        "/v1/jobs/{job_id}/backfill/{request_id}",
        "/v1/jobs/{job_id}/history",
        "/v1/jobs/{job_id}/runs",
        "/v1/jobs/{job_id}/next",
        "/v1/dead-letters",
        "/healthz",
        "/readyz",
    ):
        assert path in paths, sorted(paths)
