"""Job labels and label selectors (issue 31), without a broker: what a selector selects,
against a plain reading of each requirement, and every malformed label or selector refused
with a reason."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from kadence.examples import schedule_definition
from kadence.labels import MAX_LABELS, parse_selector, selected
from kadence.models import ScheduleDefinition

KEYS = st.sampled_from(["team", "env", "tier", "a.b", "x-1"])
VALUES = st.sampled_from(["", "data", "prod", "dev", "Q4_report"])
LABELS = st.dictionaries(KEYS, VALUES, max_size=5)
PARTS = st.one_of(
    st.tuples(KEYS, VALUES).map(lambda kv: ("=", *kv)),
    st.tuples(KEYS, VALUES).map(lambda kv: ("!=", *kv)),
    KEYS.map(lambda k: ("exists", k, "")),
    KEYS.map(lambda k: ("absent", k, "")),
)


def text(part: tuple[str, str, str]) -> str:
    op, key, value = part
    return {"=": f"{key}={value}", "!=": f"{key}!={value}", "exists": key, "absent": f"!{key}"}[op]


def plainly(part: tuple[str, str, str], labels: dict[str, str]) -> bool:
    op, key, value = part
    if op == "=":
        return key in labels and labels[key] == value
    if op == "!=":
        return key not in labels or labels[key] != value
    return (key in labels) == (op == "exists")


@given(st.lists(PARTS, max_size=4), LABELS)
def test_a_selector_selects_what_all_its_parts_say(
    parts: list[tuple[str, str, str]], labels: dict[str, str]
) -> None:
    selector = parse_selector(" , ".join(text(p) for p in parts))
    assert selected(selector, labels) == all(plainly(p, labels) for p in parts)


@pytest.mark.parametrize(
    ("selector", "why"),
    [
        ("Team=data", "key=value, key!=value, key or !key"),
        ("team==data", "'=data' is not a label value"),
        ("!team=data", "key=value, key!=value, key or !key"),
        ("team=da ta", "is not a label value"),
        ("=data", "key=value, key!=value, key or !key"),
        ("x" * 2000, "at most 1024 characters"),
    ],
)
def test_a_malformed_selector_is_refused_saying_why(selector: str, why: str) -> None:
    with pytest.raises(ValueError, match="label selector") as refused:
        parse_selector(selector)
    assert why in str(refused.value)


def test_labels_are_bounded_in_count_and_form() -> None:
    job = schedule_definition()
    ok = {f"k{i}": "v" for i in range(MAX_LABELS)}
    assert ScheduleDefinition.model_validate({**job.model_dump(), "labels": ok}).labels == ok
    for labels, why in [
        ({**ok, "one-more": "v"}, "at most 16 labels"),
        ({"Team": "x"}, "label key 'Team'"),
        ({"team": "-x"}, "label team: value '-x'"),
        ({"team": "x" * 64}, "up to 63"),
        ({"": "x"}, "label key ''"),
    ]:
        with pytest.raises(ValidationError, match="labels") as refused:
            ScheduleDefinition.model_validate({**job.model_dump(), "labels": labels})
        assert why in str(refused.value)
