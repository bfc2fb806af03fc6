"""The tenant-side helpers: decode, skip what is not an execution, drop recent duplicates."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from connectors.consumer import RecentIds, executions
from kadence.codec import Codec
from kadence.examples import execution_requested


def test_the_async_adapter_decodes_and_drops_duplicates_and_garbage() -> None:
    ex = execution_requested()
    other = ex.model_copy(update={"execution_id": "acme/other@2026-03-29T00:30:00.000Z"})
    raw = [Codec().encode(r) for r in (ex, ex, other)]

    async def stream() -> AsyncIterator[bytes]:
        for value in (raw[0], b"\x00garbage", raw[1], raw[2]):
            yield value

    async def collect() -> list[str]:
        return [e.execution_id async for e in executions(stream(), tenant="acme")]

    assert asyncio.run(collect()) == [ex.execution_id, other.execution_id]


def test_recent_ids_are_bounded() -> None:
    recent = RecentIds(size=2)
    assert [recent.first_time(i) for i in ("a", "b", "a", "c", "b")] == [
        True,
        True,
        False,
        True,
        True,
    ]
