"""An input record as processors see it, read off a consumed message."""

from __future__ import annotations

from dataclasses import dataclass

from streams.kafkaio.ports import MessageLike
from streams.runtime.context import Headers

__all__ = ["Headers", "InputRecord", "record_of"]


@dataclass(slots=True)
class InputRecord:
    """Never changed once made (`dataclasses.replace` makes another). Not frozen: a frozen
    dataclass of eight fields costs four times as much to make, and the scheduler makes one
    per outcome of a worker's batch (`Splitting`)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int
    decoded: object = None
    """The record's model when it is already decoded: one entry of a record that carries
    several (`Splitting`), or the record itself decoded once; None: decode `value`."""


def record_of(msg: MessageLike, now_ms: int) -> InputRecord:
    """The record in `msg`; one without a timestamp is stamped `now_ms`."""
    ts_type, ts = msg.timestamp()
    raw = msg.headers() or []
    headers: Headers = list(raw.items()) if isinstance(raw, dict) else list(raw)
    return InputRecord(
        topic=msg.topic() or "",
        partition=msg.partition() or 0,
        offset=msg.offset() or 0,
        key=msg.key(),
        value=msg.value(),
        headers=headers,
        timestamp_ms=ts if ts_type != 0 else now_ms,
    )
