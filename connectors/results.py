"""A run's result as the targets make it, cut to the bounds of kadence/models/results.py.

- An HTTP answer (webhook, SQS): its status code, the first RESULT_BODY_BYTES of its body as
  bytes (`body_truncated` when there was more), and the headers the target names in
  `result_headers` that the answer has, each value cut to RESULT_HEADER_CHARS (`note` says so).
- A handler's return value: JSON-encoded (compact, UTF-8); one that is not JSON (a set, an
  object, NaN) or whose JSON is over RESULT_VALUE_BYTES is not kept, and `note` says why. The
  run's status does not change: the handler did its work, only its value is missing.

Built without pydantic's validation (every part is cut to its bound here): a worker makes one
per webhook.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from kadence.models.results import (
    RESULT_BODY_BYTES,
    RESULT_HEADER_CHARS,
    RESULT_NOTE_CHARS,
    RESULT_VALUE_BYTES,
    RunResult,
)


def _result(
    status_code: int | None = None,
    *,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    body_truncated: bool = False,
    value: str | None = None,
    note: str = "",
) -> RunResult:
    return RunResult.model_construct(
        status_code=status_code,
        headers={} if headers is None else headers,
        body=body,
        body_truncated=body_truncated,
        value=value,
        note=note[:RESULT_NOTE_CHARS],
    )


def http_result(
    status: int, answer_headers: Mapping[str, str], body: bytes, names: Sequence[str]
) -> RunResult:
    """The result of an HTTP answer. `answer_headers`: its lower-cased names; `names`: the
    target's `result_headers` (any case, validated by its model)."""
    if not names:
        return _result(
            status, body=body[:RESULT_BODY_BYTES], body_truncated=len(body) > RESULT_BODY_BYTES
        )
    kept: dict[str, str] = {}
    cut: list[str] = []
    for name in names:
        low = name.lower()
        value = answer_headers.get(low)
        if value is None:
            continue
        if len(value) > RESULT_HEADER_CHARS:
            value = value[:RESULT_HEADER_CHARS]
            cut.append(low)
        kept[low] = value
    note = f"header values cut to {RESULT_HEADER_CHARS} characters: {', '.join(cut)}" if cut else ""
    return _result(
        status,
        headers=kept,
        body=body[:RESULT_BODY_BYTES],
        body_truncated=len(body) > RESULT_BODY_BYTES,
        note=note,
    )


def value_result(value: object) -> RunResult:
    """The result of a handler that returned `value` (not None)."""
    what = type(value).__name__
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        size = len(text.encode())
    except UnicodeEncodeError:  # a lone surrogate: escaped, as JSON allows
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
        size = len(text)
    except (TypeError, ValueError, RecursionError) as exc:
        return _result(note=f"not kept: the handler returned a {what}, not JSON ({exc})")
    if size > RESULT_VALUE_BYTES:
        return _result(
            note=f"not kept: the handler's {what} is {size} bytes as JSON, "
            f"more than {RESULT_VALUE_BYTES}"
        )
    return _result(value=text)
