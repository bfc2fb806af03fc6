"""The `rejected` record every processor writes for input it cannot use."""

from __future__ import annotations

from collections.abc import Sequence

from kadence.clock import ms_to_datetime
from kadence.models import Rejected

KEEP_BYTES = 512 * 1024
"""A rejected record keeps at most this much of the original value (the broker caps at 1 MiB)."""
REASON_LIMIT = 8192


def rejected(
    *,
    topic: str,
    partition: int,
    offset: int,
    value: bytes | None,
    headers: Sequence[tuple[str, str | bytes | None]],
    code: str,
    reason: str,
    processor: str,
    now_ms: int,
) -> Rejected:
    return Rejected(
        source_topic=topic,
        partition=partition,
        offset=offset,
        code=code,
        reason=reason[:REASON_LIMIT],
        processor=processor,
        rejected_at=ms_to_datetime(now_ms),
        original_value=value[:KEEP_BYTES] if value else value,
        original_headers={
            k: (v.decode(errors="replace") if isinstance(v, bytes) else str(v))
            for k, v in headers
            if v is not None
        },
    )
