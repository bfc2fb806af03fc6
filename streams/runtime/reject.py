"""Turning an unusable input record into a `rejected` record, inside the open transaction."""

from __future__ import annotations

import logging

from kadence import rejects
from kadence.codec import Codec
from kadence.headers import headers_for
from kadence.models import Rejected
from streams.runtime.runner import InputRecord, Task

log = logging.getLogger(__name__)


def reject(
    task: Task,
    codec: Codec,
    *,
    to_topic: str,
    processor: str,
    record: InputRecord,
    code: str,
    reason: str,
    now_ms: int,
) -> None:
    log.warning(
        "%s rejected %s[%d]@%d: %s: %s",
        processor,
        record.topic,
        record.partition,
        record.offset,
        code,
        reason,
    )
    rejected = rejects.rejected(
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        value=record.value,
        headers=record.headers,
        code=code,
        reason=reason,
        processor=processor,
        now_ms=now_ms,
    )
    headers = headers_for(rejected, codec.schema_fingerprint(Rejected))
    key = rejects.rejected_key(record.key)
    task.emit(to_topic, task.partition, key, codec.encode(rejected), headers)
