"""Tenant side of the HTTP target: is this request Kadence's, signed with our secret?

    from connectors.webhook_verify import verify

    if not verify(secret, request.headers, body):   # the raw body, before any parsing
        return 401

Kadence signs as Standard Webhooks do (connectors/http.py): `webhook-signature` holds
`v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">` (several, space
separated, while a secret is being rotated); a secret starting `whsec_` is base64. A request
is genuine when one signature matches (compared in constant time) and its timestamp is within
`tolerance_s` of now (a captured request replayed later is refused). The same run may arrive
more than once (at least once): `webhook-id` is its idempotency key.
"""

from __future__ import annotations

import hmac
import re
import time
from collections.abc import Mapping

from connectors.http import sign

TOLERANCE_S = 300
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
"""Unix seconds in ASCII digits: `str.isdigit` takes `²` and `٣`, which `int` refuses or reads
as a number no sender wrote, and 5 000 digits make `int` raise."""


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance_s: int = TOLERANCE_S,
    now_s: float | None = None,
) -> bool:
    """Whether `body` with `headers` (any case) is signed with `secret` and recent."""
    lower = {k.lower(): v for k, v in headers.items()}
    msg_id = lower.get("webhook-id")
    stamp = lower.get("webhook-timestamp", "")
    given = lower.get("webhook-signature", "")
    if not msg_id or not _TIMESTAMP.fullmatch(stamp) or not given:
        return False
    timestamp = int(stamp)
    if abs((time.time() if now_s is None else now_s) - timestamp) > tolerance_s:
        return False
    expected = sign(secret, msg_id, timestamp, body)
    return any(hmac.compare_digest(expected, s) for s in given.split())
