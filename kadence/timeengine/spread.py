"""Spread: a deterministic, forward-only offset that flattens identical schedules.

Ten thousand `0 0 * * *` jobs with `spread_s=60` are due across the first minute instead of the
first millisecond. The offset is a hash of the job key, so it is stable across runs and
processes; it only ever moves the due time later, and the nominal instant (the identity) stays.
"""

from __future__ import annotations

import hashlib


def spread_offset_ms(job_key: str, spread_s: int) -> int:
    """Offset in [0, spread_s * 1000) ms, a pure function of the job key."""
    if spread_s <= 0:
        return 0
    digest = hashlib.blake2b(job_key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (spread_s * 1000)
