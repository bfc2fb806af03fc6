"""The JSON envelope a Kafka target with `"format": "json"` receives, and whether a payload
fits in it (docs/kafka.md).

The envelope writes the payload as a JSON string, so it can be several times the payload:
JSON escapes a control character as `\\u00XX` (6 bytes for 1), a quote or a backslash as 2
bytes, and, since it writes ASCII only, a non-ASCII character as one or two `\\uXXXX` (up to 3
times its UTF-8); a payload that is not UTF-8 goes as base64 (4 bytes for 3). A payload the
model accepts (up to MAX_PAYLOAD_BYTES) could therefore make a record the broker refuses:
every door that pairs a payload with a JSON target asks `payload_refusal`, and the target
(connectors/kafka_topic.py, which writes the envelope) checks the record itself before it
produces.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from kadence.sizing import RECORD_LIMIT

ENVELOPE_ROOM = 8 * 1024
"""Bytes of a JSON-target record besides the payload's JSON string, at most: the key, the
headers and the envelope's other fields with the longest values the model allows
(tests/test_envelope.py measures it)."""
PAYLOAD_ROOM = RECORD_LIMIT - ENVELOPE_ROOM
"""The most bytes the payload may take in the envelope, as its JSON string."""
WORST_EXPANSION = 6
"""Bytes of JSON string per payload byte at most (a control character: `\\u0001`)."""
BASE64_MEMBER = len(',"payload_encoding":"base64"')
QUOTES = 2
CHEAP_LIMIT = (PAYLOAD_ROOM - QUOTES - BASE64_MEMBER) // WORST_EXPANSION
"""A payload of at most this many bytes fits whatever its bytes are: not encoded to check."""
TOO_LARGE = "RecordTooLarge"
"""The error kind of a run whose record would exceed the broker's limit: failed for good (not
retried), so dead-lettered at once."""
TOO_LARGE_FIX = (
    'a "format": "json" envelope writes the payload as a JSON string (control characters 6 '
    "bytes each): shorten the payload or change the target's format, then replay the run"
)


_STORED: ContextVar[bool] = ContextVar("stored_definitions", default=False)


@contextmanager
def stored_definitions() -> Iterator[None]:
    """Read definitions a scheduler accepted before (its state): `payload_refusal` is not asked
    again, so a job stored before this check existed still reads, can be updated or deleted,
    and its runs meet the target's own check (failed for good: `TOO_LARGE`)."""
    token = _STORED.set(True)
    try:
        yield
    finally:
        _STORED.reset(token)


def checked_at_the_door() -> bool:
    """False inside `stored_definitions`."""
    return not _STORED.get()


def payload_json_bytes(payload: bytes) -> int:
    """The bytes `payload` takes in the envelope, exactly as connectors/kafka_topic.py's
    `envelope_json` writes it (tests/test_envelope.py compares the two): its
    JSON string, plus the `payload_encoding` member when it goes as base64."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return QUOTES + 4 * ((len(payload) + 2) // 3) + BASE64_MEMBER
    return len(json.dumps(text))


def payload_refusal(payload: bytes) -> str | None:
    """Why `payload` cannot go to a JSON-format Kafka target (its encoded size and the limit),
    or None when it fits. Encodes nothing for a payload of at most CHEAP_LIMIT bytes."""
    if len(payload) <= CHEAP_LIMIT:
        return None
    size = payload_json_bytes(payload)
    if size <= PAYLOAD_ROOM:
        return None
    return (
        f"the {len(payload)}-byte payload is {size} bytes as the JSON string of a "
        f'"format": "json" Kafka target\'s envelope (control characters take 6 bytes each, '
        f"quotes and backslashes 2, non-ASCII characters up to 3 times their UTF-8), over "
        f"the {PAYLOAD_ROOM} bytes that fit the {RECORD_LIMIT}-byte record limit; shorten or "
        'escape it, or use "format": "avro" or "payload"'
    )
