"""How big a record is on the wire, and the limit every record Kadence writes is held to.

The broker refuses a record batch over the topic's `max.message.bytes` (1 MiB plus a little by
default) and librdkafka refuses a message over its own `message.max.bytes` (1 000 000 by
default) before sending it. Kadence checks the smaller of the two, with room for the batch and
record framing, before it produces anything, so a record that would not fit is a decision
(refuse the input, quarantine the job, truncate the evidence), never an exception in the
middle of a transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from kadence.errors import RecordTooLargeError

PRODUCER_MAX_BYTES = 1_000_000
"""librdkafka's default `message.max.bytes`, which the smallest default topic limit exceeds."""
FRAMING_BYTES = 512
"""Record batch header plus per-record varints and attributes, rounded up generously."""
RECORD_LIMIT = PRODUCER_MAX_BYTES - FRAMING_BYTES
"""Key, value and headers of one record together stay at or below this many bytes."""

HeaderList = Sequence[tuple[str, str | bytes | None]]


def record_bytes(key: bytes | None, value: bytes | None, headers: HeaderList = ()) -> int:
    """The bytes of one record that count against the limit: key, value and every header."""
    size = len(key or b"") + len(value or b"")
    for name, header in headers:
        size += len(name.encode()) + (
            len(header) if isinstance(header, bytes) else len(header.encode()) if header else 0
        )
    return size


def check_fits(
    topic: str,
    key: bytes | None,
    value: bytes | None,
    headers: HeaderList = (),
    limit: int = RECORD_LIMIT,
) -> None:
    """Raise `RecordTooLargeError` naming the topic and both sizes when the record won't fit."""
    size = record_bytes(key, value, headers)
    if size > limit:
        raise RecordTooLargeError(
            f"a record for {topic} would be {size} bytes, over the {limit}-byte limit "
            "(key, value and headers together)"
        )
