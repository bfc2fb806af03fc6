"""Issue 31, item 2: the API is typed. Every operation's request body and response has a schema
that names its fields (no `{}`, no bare object), a job's body is `JobSpec` with an example, and
docs/openapi.json is the document the API serves (regenerate it with
`python -m apps.api.openapi_file > docs/openapi.json`). No broker: the app is only built."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apps.api.app import create_app
from apps.api.schemas import EXAMPLE_INTERVAL_JOB, EXAMPLE_JOB, EXAMPLE_ONE_OFF, JobSpec
from kadence.models import ScheduleDefinition
from kadence.settings import KadenceSettings
from kadence.timeengine.compile import compile_schedule

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return create_app(KadenceSettings()).openapi()


def typed(
    schema: dict[str, Any], components: dict[str, Any], seen: frozenset[str] = frozenset()
) -> bool:
    """Whether `schema` says what it holds: a reference to a typed component, a scalar, an array
    of typed items, an object with properties, or a union of typed branches."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return name in seen or typed(components[name], components, seen | {name})
    branches = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf")
    if branches:
        return all(typed(b, components, seen) for b in branches if b != {"type": "null"})
    kind = schema.get("type")
    if kind in ("string", "integer", "number", "boolean", "null"):
        return True
    if kind == "array":
        return typed(schema.get("items", {}), components, seen)
    if kind == "object" or "properties" in schema:
        return bool(schema.get("properties")) or schema.get("additionalProperties") not in (
            None,
            True,
            {},
        )
    return "enum" in schema or "const" in schema


def test_every_body_and_response_is_typed(spec: dict[str, Any]) -> None:
    components = spec["components"]["schemas"]
    untyped = []
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            body = op.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                if not typed(content.get("schema", {}), components):
                    untyped.append(f"{method.upper()} {path} request {media}")
            answers = {code: r for code, r in op["responses"].items() if code.startswith("2")}
            assert answers, f"{method.upper()} {path} documents no success"
            for code, answer in answers.items():
                if code == "204":
                    continue
                content = answer.get("content", {})
                if not content or not all(
                    typed(c.get("schema", {}), components) for c in content.values()
                ):
                    untyped.append(f"{method.upper()} {path} response {code}")
    assert untyped == []


def test_the_check_tells_an_untyped_schema() -> None:
    assert not typed({}, {})
    assert not typed({"type": "object", "additionalProperties": True}, {})
    assert not typed({"type": "array", "items": {}}, {})
    assert typed({"type": "array", "items": {"type": "string"}}, {})
    assert typed({"$ref": "#/c/A"}, {"A": {"type": "object", "properties": {"a": {}}}})


def test_a_job_body_is_the_definition_without_what_the_api_fills_in(spec: dict[str, Any]) -> None:
    job = spec["components"]["schemas"]["JobSpec"]
    fields = set(ScheduleDefinition.model_fields) - {"tenant", "job_id", "version", "actor"}
    assert set(job["properties"]) == fields
    assert job["additionalProperties"] is False
    assert job["examples"] == [EXAMPLE_JOB, EXAMPLE_INTERVAL_JOB, EXAMPLE_ONE_OFF]
    for name in ("HttpTarget", "RetryPolicy", "CronSchedule", "MissedRunPolicy"):
        assert name in spec["components"]["schemas"], name
    http = spec["components"]["schemas"]["HttpTarget"]["properties"]
    assert {"url", "method", "headers", "secret_ref"} <= set(http)
    body = spec["paths"]["/v1/jobs/{job_id}"]["post"]["requestBody"]["content"]
    assert body["application/json"]["schema"] == {"$ref": "#/components/schemas/JobSpec"}
    # each example is a job the API takes, its schedule one the time engine compiles
    for example in job["examples"]:
        JobSpec.model_validate(example)
        full = {**example, "tenant": "t", "job_id": "j", "version": 1}
        definition = ScheduleDefinition.model_validate(full)
        compile_schedule(definition.schedule, definition.key)


def test_the_document_in_the_repository_is_the_one_served(spec: dict[str, Any]) -> None:
    kept = json.loads(DOC.read_text())
    assert kept == json.loads(json.dumps(spec)), (
        "docs/openapi.json is stale: python -m apps.api.openapi_file > docs/openapi.json"
    )
