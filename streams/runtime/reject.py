"""Turning an unusable input record into a `rejected` record, inside the open transaction."""

from __future__ import annotations

import logging

from kadence import rejects
from kadence.codec import Codec
from kadence.errors import KadenceError
from kadence.log_limit import LogLimit
from kadence.models import WireModel
from streams.runtime.context import ProcessorContext
from streams.runtime.records import InputRecord

log = logging.getLogger(__name__)
_LIMIT = LogLimit()
"""A flood of bad records is a few lines a minute per topic and reason, not one per record
(each is on `rejected`, with its reason, anyway)."""


def why_refused(record: InputRecord, exc: Exception) -> tuple[str, str]:
    """The `rejected` code and reason for an input whose processing raised `exc` (and was
    undone): a Kadence error keeps its own code; anything else is a bug, logged with its
    traceback."""
    code = getattr(exc, "code", None)
    if isinstance(exc, KadenceError) and isinstance(code, str):
        return code, f"applying it failed: {exc}"
    if _LIMIT.allow((record.topic, type(exc))):
        log.error(
            "processing %s[%d]@%d failed (%d similar lines held back)",
            record.topic,
            record.partition,
            record.offset,
            _LIMIT.take_held_back(),
            exc_info=exc,
        )
    return "processing_error", f"{type(exc).__name__}: {exc} (a Kadence bug; please report it)"


def reject(
    ctx: ProcessorContext,
    codec: Codec,
    *,
    to_topic: str,
    processor: str,
    record: InputRecord,
    code: str,
    reason: str,
    now_ms: int,
) -> None:
    if _LIMIT.allow((processor, record.topic, code)):
        log.warning(
            "%s rejected %s[%d]@%d: %s: %r (%d similar lines held back)",
            processor,
            record.topic,
            record.partition,
            record.offset,
            code,
            reason[:1000],
            _LIMIT.take_held_back(),
        )
    value = record.value
    if value is None and isinstance(record.decoded, WireModel):  # an entry of a batch: its own
        value = codec.encode(record.decoded)
    key, value, headers = rejects.rejected_record(
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        key=record.key,
        value=value,
        headers=record.headers,
        code=code,
        reason=reason,
        processor=processor,
        now_ms=now_ms,
        codec=codec,
        to_topic=to_topic,
        limit=ctx.record_limit,
    )
    ctx.forward(to_topic, ctx.partition, key, value, headers)
