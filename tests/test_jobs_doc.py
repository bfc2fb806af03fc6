"""docs/jobs.md is generated from the models (`python -m apps.jobs_doc > docs/jobs.md`):
current, every field and value described, every model a definition holds documented with an
example that the model accepts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from apps.jobs_doc import (
    ENUMS,
    SECTIONS,
    attribute_docs,
    definitions,
    document,
    duration,
    field_description,
    limits,
)
from apps.jobs_examples import EXAMPLES
from kadence.models import RetryPolicy, ScheduleDefinition

DOC = Path(__file__).resolve().parents[1] / "docs" / "jobs.md"
MODELS: list[type[BaseModel]] = [m for _, models in SECTIONS for m in models]


def test_the_document_is_current() -> None:
    assert DOC.read_text() == document(), (
        "docs/jobs.md is stale: python -m apps.jobs_doc > docs/jobs.md"
    )


def test_every_model_and_enum_a_definition_holds_is_documented() -> None:
    defs = definitions()
    documented = {m.__name__ for m in MODELS} | {e.__name__ for e in ENUMS}
    assert set(defs) == documented


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_field_is_described(model: type[BaseModel]) -> None:
    defs = definitions()
    props = defs[model.__name__]["properties"]
    assert [n for n in model.model_fields if not field_description(model, n, props[n])] == []


def test_every_enum_value_is_described() -> None:
    missing = [
        f"{e.__name__}.{m.name}" for e in ENUMS for m in e if not attribute_docs(e).get(m.name)
    ]
    assert missing == []


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_example_is_valid_json_for_its_model(model: type[BaseModel]) -> None:
    example = EXAMPLES[model.__name__]
    parsed = model.model_validate_json(json.dumps(example))
    assert set(example) <= set(parsed.model_fields_set)


def test_an_invalid_example_would_fail() -> None:
    bad = {**EXAMPLES["RetryPolicy"], "max_attempts": 0}
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy.model_validate_json(json.dumps(bad))


def test_the_defaults_shown_are_the_models() -> None:
    text = DOC.read_text()
    retry, definition = RetryPolicy(), ScheduleDefinition.model_fields
    assert f"| `max_attempts` | int | `{retry.max_attempts}` |" in text
    assert f"| `initial_backoff_ms` | int | `{retry.initial_backoff_ms}` (1 s) |" in text
    assert f"| `max_backoff_ms` | int | `{retry.max_backoff_ms}` (5 min) |" in text
    assert f"| `timeout_ms` | int | `{definition['timeout_ms'].default}` (5 min) |" in text


def test_every_table_row_has_its_header_s_cells() -> None:
    """A pipe in a pattern or a description (escaped `\\|`) must not split a cell."""
    width = 0
    for line in document().splitlines():
        if not line.startswith("|"):
            width = 0
            continue
        cells = len(re.findall(r"(?<!\\)\|", line))
        width = width or cells
        assert cells == width, line


def test_limits_read_items_keys_and_values() -> None:
    node = {
        "type": "object",
        "maxProperties": 4,
        "propertyNames": {"minLength": 1, "maxLength": 8},
        "additionalProperties": {"type": "array", "maxItems": 2, "items": {"minimum": 0}},
    }
    assert limits(node) == [
        "at most 4 entries",
        "keys: 1 to 8 characters",
        "values: at most 2 items",
        "values: each: at least 0",
    ]
    assert limits({"anyOf": [{"minimum": 1, "maximum": 5}, {"type": "null"}]}) == ["1 to 5"]


def test_durations_read_as_people_say_them() -> None:
    assert [duration(ms) for ms in (250, 1_000, 300_000, 3_600_000, 90_000)] == [
        "250 ms",
        "1 s",
        "5 min",
        "1 h",
        "90 s",
    ]
