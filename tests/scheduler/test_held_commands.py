"""The stored form of commands held for a job not yet read (streams/scheduler/held_commands.py):
what `dump` writes `load` gives back, record for record; a version it does not know is an error,
not a misread."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kadence.errors import DecodeError
from streams.runtime.records import InputRecord
from streams.scheduler.held_commands import Held, dump, load

KEY = b"acme/job"
instants = st.integers(min_value=0, max_value=2**62)


@given(st.lists(st.tuples(instants, instants, instants, st.binary(max_size=300)), max_size=20))
def test_what_dump_writes_load_gives_back(raw: list[tuple[int, int, int, bytes]]) -> None:
    held = [
        Held(at, InputRecord("drv.commands", 3, offset, KEY, value, [], ts))
        for at, offset, ts, value in raw
    ]
    assert load(dump(held), topic="drv.commands", partition=3, key=KEY) == held


def test_an_unknown_version_is_an_error() -> None:
    stored = dump([Held(1, InputRecord("c", 0, 0, KEY, b"x", [], 1))])
    with pytest.raises(DecodeError, match="newer build"):
        load(b"\x02" + stored[1:], topic="c", partition=0, key=KEY)
    assert load(None, topic="c", partition=0, key=KEY) == []
