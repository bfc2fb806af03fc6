"""An ExecutionRequested's bytes from its job's template (kadence/execution_bytes.py) are
exactly `Codec.encode`'s, for any run of any job, and the same error for a record that does not
fit its schema."""

from __future__ import annotations

from datetime import datetime, timedelta
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kadence import execution_bytes
from kadence.codec import Codec
from kadence.errors import EncodeError
from kadence.examples import examples
from kadence.execution_bytes import Templates
from kadence.models import ExecutionRequested
from tests.test_codec_fast import executions, ids, instants

CODEC = Codec()


def runs_of(
    first: ExecutionRequested, changes: list[dict[str, object]]
) -> list[ExecutionRequested]:
    return [first, *(first.model_copy(update=c) for c in changes)]


run_changes = st.fixed_dictionaries(
    {"execution_id": ids, "nominal_at": instants, "due_at": instants},
    optional={"start_by": st.none() | instants},
)
other_changes = st.fixed_dictionaries(
    {},
    optional={
        "attempt": st.integers(1, 100),
        "dispatched_at": instants,
        "payload": st.binary(max_size=8),
        "tenant": st.sampled_from(["acme", "globex"]),
        "timeout_ms": st.integers(1, 10_000),
    },
)


@settings(max_examples=200, deadline=None)
@given(
    first=executions,
    changes=st.lists(
        st.one_of(run_changes, run_changes, st.tuples(run_changes, other_changes)), max_size=12
    ),
)
def test_a_jobs_runs_from_its_template_are_the_codecs_bytes(
    first: ExecutionRequested, changes: list[object]
) -> None:
    flat: list[dict[str, object]] = []
    for change in changes:
        if isinstance(change, tuple):
            flat.append({**change[0], **change[1]})
        else:
            assert isinstance(change, dict)
            flat.append(change)
    templates = Templates(CODEC)
    for ex in runs_of(first, flat):
        assert templates.encode(ex) == CODEC.encode(ex)


def wake_runs(first: ExecutionRequested, n: int) -> list[ExecutionRequested]:
    """`n` runs of `first`'s job sent out by one wake, a second apart: only their ids, instants
    and `start_by` differ."""
    step = timedelta(seconds=1)
    return [
        first.model_copy(
            update={
                "execution_id": f"acme/job@{i}",
                "nominal_at": first.nominal_at + i * step,
                "due_at": first.due_at + i * step,
                "start_by": None if i % 2 else first.due_at + i * step,
            }
        )
        for i in range(n)
    ]


def test_the_runs_of_one_wake_use_the_template() -> None:
    first = CODEC.decode(CODEC.encode(example()), (ExecutionRequested,))
    assert isinstance(first, ExecutionRequested)
    templates = Templates(CODEC)
    runs = wake_runs(first, 15)
    assert [templates.encode(r) for r in runs] == [CODEC.encode(r) for r in runs]
    assert (templates.made, templates.used) == (1, 14)  # cut from the first when the second came


def test_a_schema_whose_fields_moved_encodes_every_run_in_full() -> None:
    moved = (*execution_bytes.FIELDS[1:], execution_bytes.FIELDS[0])
    with mock.patch.object(execution_bytes, "FIELDS", moved):
        templates = Templates(CODEC)
    assert not templates.usable
    ex = example()
    again = ex.model_copy(update={"execution_id": "acme/job@2"})
    assert [templates.encode(ex), templates.encode(again)] == [
        CODEC.encode(ex),
        CODEC.encode(again),
    ]
    assert templates.used == 0


def test_an_unusual_run_gets_the_codecs_bytes_or_its_error() -> None:
    templates = Templates(CODEC)
    ex = example()
    templates.encode(ex)
    naive = ex.model_copy(update={"nominal_at": datetime(2026, 12, 1, 9, 0)})
    assert templates.encode(naive) == CODEC.encode(naive)
    surrogate = ex.model_copy(update={"execution_id": "acme/job@\ud800"})
    with pytest.raises(EncodeError) as codec_said:
        CODEC.encode(surrogate)
    with pytest.raises(EncodeError) as template_said:
        templates.encode(surrogate)
    assert str(template_said.value) == str(codec_said.value)
    assert templates.used == 0


def example() -> ExecutionRequested:
    ex = examples()["ExecutionRequested"]
    assert isinstance(ex, ExecutionRequested)
    return ex


def test_parts_that_do_not_join_into_the_full_bytes_make_no_template() -> None:
    """A field written otherwise than the template assumes (here the trigger's symbol) is
    found when the template is cut: no template, every run in full."""
    templates = Templates(CODEC)
    templates._trigger = dict.fromkeys(templates._trigger, b"\x7e")
    ex = example()
    again = ex.model_copy(update={"execution_id": "acme/job@2"})
    assert [templates.encode(ex), templates.encode(again)] == [
        CODEC.encode(ex),
        CODEC.encode(again),
    ]
    assert (templates.made, templates.used) == (0, 0)
