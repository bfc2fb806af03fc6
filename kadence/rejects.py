"""The `rejected` record every processor writes for input it cannot use.

A rejected record is evidence for an operator, and it must always fit on the broker however
large or strange the input was: the original value, headers and key are kept up to a fixed
budget (`EVIDENCE_BYTES` in all), cut at that point, and `truncated` says that they were.
Header values that are not UTF-8 are kept as escaped text (`\\xff`), never as U+FFFD that
would triple their size. With the reason capped too, a rejected record stays far below the
broker's limit whatever it describes.
"""

from __future__ import annotations

from collections.abc import Sequence

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.headers import Headers, headers_for
from kadence.models import Rejected
from kadence.models.base import MAX_OFFSET, MAX_PARTITION
from kadence.models.records import EVIDENCE_BYTES, HEADER_NAME_CHARS, HEADERS_KEPT
from kadence.sizing import RECORD_LIMIT, HeaderList, record_bytes

__all__ = ["EVIDENCE_BYTES", "HEADERS_KEPT", "HEADER_NAME_CHARS", "rejected", "rejected_record"]
KEY_BYTES = 1024
"""A rejected record is keyed by the original key, cut to this many bytes."""
REASON_LIMIT = 8192


def _text(raw: str | bytes, budget: int) -> tuple[str, bool]:
    """At most `budget` bytes of UTF-8 text for a header value; True when something was cut."""
    text = raw.decode("utf-8", errors="backslashreplace") if isinstance(raw, bytes) else _utf8(raw)
    data = text.encode()
    if len(data) <= budget:
        return text, False
    return data[: max(0, budget)].decode("utf-8", errors="ignore"), True


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
    budget = EVIDENCE_BYTES
    cut = False
    kept_value = value
    if value is not None and len(value) > budget // 2:
        kept_value, cut = value[: budget // 2], True
    budget -= len(kept_value or b"")
    kept: dict[str, str] = {}
    dropped = 0
    for name, raw in headers:
        if raw is None:
            continue
        if len(kept) >= HEADERS_KEPT or budget <= 0:
            dropped += 1
            continue
        short_name, name_cut = _text(name, HEADER_NAME_CHARS)
        text, value_cut = _text(raw, budget - len(short_name.encode()))
        kept[short_name] = text
        budget -= len(short_name.encode()) + len(text.encode())
        cut = cut or name_cut or value_cut
    if dropped:
        cut = True
    notes = []
    if cut:
        size = len(value or b"")
        notes.append(f"evidence truncated: value {size} bytes, {len(headers)} headers")
        if dropped:
            notes.append(f"{dropped} headers not kept")
    full_reason = "; ".join([reason, *notes]) if notes else reason
    return Rejected(
        source_topic=_utf8(topic)[:249],
        partition=min(max(partition, -1), MAX_PARTITION),
        offset=min(max(offset, -1), MAX_OFFSET),
        code=_utf8(code)[:64],
        reason=_utf8(full_reason)[:REASON_LIMIT],
        processor=_utf8(processor)[:128],
        rejected_at=ms_to_datetime(now_ms),
        original_value=kept_value,
        original_headers=kept,
        truncated=cut,
    )


def _utf8(text: str) -> str:
    """`text` with what UTF-8 cannot carry (lone surrogates, from a JSON `"\\ud800"` in the
    input a reason quotes) escaped: the evidence of bad input must never be bad itself."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode(errors="backslashreplace").decode()
    return text


def rejected_key(key: bytes | None) -> bytes | None:
    """The key a rejected record is written under: the original, cut to `KEY_BYTES`."""
    return key[:KEY_BYTES] if key is not None else None


def encoded(
    codec: Codec,
    record: Rejected,
    *,
    topic: str,
    key: bytes | None,
    headers: HeaderList,
    limit: int = RECORD_LIMIT,
) -> bytes:
    """The rejected record's bytes; without its evidence should even the bounded evidence not
    fit `limit` (a topic configured with a small `max.message.bytes`)."""
    value = codec.encode(record)
    if record_bytes(key, value, headers) <= limit:
        return value
    bare = record.model_copy(
        update={"original_value": None, "original_headers": {}, "truncated": True}
    )
    return codec.encode(bare)


def rejected_record(
    *,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, str | bytes | None]],
    code: str,
    reason: str,
    processor: str,
    now_ms: int,
    codec: Codec,
    to_topic: str,
    limit: int = RECORD_LIMIT,
) -> tuple[bytes | None, bytes, Headers]:
    """The one reject path: the (key, value, headers) of the `rejected` record, for `to_topic`,
    that says why the input at `topic`[`partition`]@`offset` could not be used."""
    record = rejected(
        topic=topic,
        partition=partition,
        offset=offset,
        value=value,
        headers=headers,
        code=code,
        reason=reason,
        processor=processor,
        now_ms=now_ms,
    )
    out_headers = headers_for(record, codec.schema_fingerprint(Rejected))
    out_key = rejected_key(key)
    out_value = encoded(
        codec, record, topic=to_topic, key=out_key, headers=out_headers, limit=limit
    )
    return out_key, out_value, out_headers
