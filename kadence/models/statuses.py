"""HTTP status sets of a webhook target: which answers succeed (`success_statuses`) and which
failures are retried (`retryable_statuses`), as short text entries a person writes and reads:

- `"204"`: one status;
- `"4xx"`: a class (`1xx` to `5xx`);
- `"200-204"`: a range, both ends included.

A JSON number (`204`) is taken for its text. Every status is within 100-599 (RFC 9110 15), a
list holds at most MAX_STATUS_ENTRIES entries. A set is parsed once per distinct list
(`status_set`): a job's runs all carry the same one.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field

MAX_STATUS_ENTRIES = 32
"""Entries in one list at most (ranges cover the rest)."""
DEFAULT_SUCCESS = frozenset(range(200, 300))
"""Any 2xx succeeds when a target names no `success_statuses`."""
DEFAULT_RETRYABLE = frozenset({408, 425, 429, *range(500, 600)})
"""Failing statuses retried when a target names no `retryable_statuses`: Request Timeout, Too
Early, Too Many Requests and every 5xx."""
_ENTRY = re.compile(r"([1-5])xx|([1-5][0-9][0-9])(?:-([1-5][0-9][0-9]))?")


def _as_text(value: object) -> object:
    """A JSON number is taken as its text (`204` is `"204"`); a bool never is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value.lower() if isinstance(value, str) else value


def _entry(value: str) -> str:
    if _codes(value) is None:
        raise ValueError(
            f"{value!r} is not an HTTP status entry: a status (`204`), a class (`2xx`) or a "
            "range (`200-204`), each status within 100-599"
        )
    return value


StatusEntry = Annotated[str, BeforeValidator(_as_text), Field(max_length=7), AfterValidator(_entry)]


def _codes(entry: str) -> range | None:
    """The statuses `entry` names, or None when it names none that exist."""
    found = _ENTRY.fullmatch(entry)
    if found is None:
        return None
    klass, first, last = found.groups()
    if klass is not None:
        start = int(klass) * 100
        return range(start, start + 100)
    low, high = int(first), int(last or first)
    return range(low, high + 1) if low <= high else None


@functools.lru_cache(maxsize=1_024)
def _parsed(entries: tuple[str, ...]) -> frozenset[int]:
    return frozenset(code for entry in entries for code in _codes(entry) or ())


def status_set(entries: list[str] | None, default: frozenset[int]) -> frozenset[int]:
    """The statuses `entries` name (validated ones: the model checked them), or `default`."""
    return default if entries is None else _parsed(tuple(entries))


def status_problem(success: list[str] | None, retryable: list[str] | None) -> str | None:
    """Why these lists cannot go together, or None. Retried statuses are failures a receiver
    may answer differently next time: 4xx and 5xx only, never a status that succeeds."""
    if retryable is None:
        return None
    retried = status_set(retryable, DEFAULT_RETRYABLE)
    below = sorted(code for code in retried if code < 400)
    if below:
        return (
            f"retryable_statuses name {_shown(below)}: only 4xx and 5xx answers are failures "
            "that may be retried"
        )
    both = sorted(retried & status_set(success, DEFAULT_SUCCESS))
    if both:
        return f"{_shown(both)} both succeed and retry: name each status in one list only"
    return None


def _shown(codes: list[int]) -> str:
    return ", ".join(map(str, codes[:5])) + (f" (and {len(codes) - 5} more)" if codes[5:] else "")
