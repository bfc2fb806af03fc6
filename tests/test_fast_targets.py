"""The compiled reader's target cache (kadence/fast_models.py `_target`): a datum of plain
values is its own key, one with a map or an array is made hashable; either way the target is
the validated one, built once."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from kadence import fast_models
from kadence.models.targets import Target

DATA: list[dict[str, Any]] = [
    {"kind": "kafka", "topic": "orders", "format": "avro", "pool": None},
    {"kind": "handler", "name": "ship", "pool": None},
]


@pytest.mark.parametrize("datum", DATA)
def test_a_target_is_validated_once_and_then_served_from_the_cache(datum: dict[str, Any]) -> None:
    fast_models._TARGET_CACHE.clear()
    first = fast_models._target(dict(datum))
    assert first == TypeAdapter(Target).validate_python(datum)
    assert fast_models._target(dict(datum)) is first
    assert len(fast_models._TARGET_CACHE) == 1


def test_a_target_with_a_map_and_an_array_is_cached_by_their_items() -> None:
    fast_models._TARGET_CACHE.clear()
    http = TypeAdapter(Target).validate_python(
        {"kind": "http", "url": "https://x.example/run", "headers": {"X-A": "1"},
         "success_statuses": ["2xx"]}
    )  # fmt: skip
    datum = http.model_dump()
    first = fast_models._target(dict(datum))
    assert first == http
    assert fast_models._target(dict(datum)) is first
    changed = {**datum, "headers": {"X-A": "2"}}
    assert fast_models._target(changed) == http.model_copy(update={"headers": {"X-A": "2"}})
