"""What an attempt returned: an HTTP answer's status code, the start of its body and the headers
the job chose, or a handler's return value. Carried by the attempt's `ExecutionOutcome` on the
`outcomes` topic (Kadence's own; no tenant reads it) and shown, to the job's tenant only, by the
API, the CLI and the dashboard (docs/execution.md, "Results").

Every part is bounded here so that an outcome with the largest result still fits the broker's
record limit many times over; the targets cut what they are given to fit (connectors/results.py)
and say so (`body_truncated`, `note`), so a result is never a reason for a run to fail.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from kadence.models.base import WireModel

RESULT_BODY_BYTES = 1024
"""Bytes of an answer's body an attempt keeps (its start)."""
RESULT_HEADERS = 16
"""Headers of an answer an attempt keeps at most (the ones the target names)."""
RESULT_HEADER_CHARS = 1024
"""Characters of one kept header's value at most (longer ones are cut)."""
RESULT_VALUE_BYTES = 4096
"""A handler's return value, as UTF-8 JSON text, at most (a larger one is not kept)."""
RESULT_NOTE_CHARS = 512

ResultHeaderName = Annotated[str, Field(pattern=r"^[!#$%&'*+\-.^_`|~0-9a-z]{1,256}$")]
"""An HTTP header name in lower case (answers' names are compared that way)."""
ResultHeaderValue = Annotated[str, Field(max_length=RESULT_HEADER_CHARS)]


def _json_text(value: str) -> str:
    if len(value.encode(errors="surrogatepass")) > RESULT_VALUE_BYTES:
        raise ValueError(f"a result value is at most {RESULT_VALUE_BYTES} bytes of JSON")
    try:
        json.loads(value)
    except ValueError:
        raise ValueError("a result value is JSON text") from None
    return value


JsonText = Annotated[str, Field(max_length=RESULT_VALUE_BYTES), AfterValidator(_json_text)]


class RunResult(WireModel):
    """What one attempt returned (the HTTP fields or `value`, as the target has them)."""

    avro_name = "RunResult"

    status_code: Annotated[int, Field(ge=100, le=999)] | None = None
    """The HTTP answer's status (webhook and SQS targets)."""
    headers: Annotated[
        dict[ResultHeaderName, ResultHeaderValue], Field(max_length=RESULT_HEADERS)
    ] = Field(default_factory=dict)
    """The answer's headers the target names in `result_headers` that it sent, lower-cased."""
    body: Annotated[bytes, Field(max_length=RESULT_BODY_BYTES)] = b""
    """The start of the answer's body, as bytes (`shown` makes it text or base64)."""
    body_truncated: bool = False
    """The answer's body was longer than `body`."""
    value: JsonText | None = None
    """A handler's return value as JSON text."""
    note: Annotated[str, Field(max_length=RESULT_NOTE_CHARS)] = ""
    """What was left out or cut, and why (a value too large or not JSON, a header cut)."""

    def json_value(self) -> Any:
        """The handler's return value decoded (None when there is none): what a chained job
        would take as its payload."""
        return None if self.value is None else json.loads(self.value)

    def shown(self) -> dict[str, Any]:
        """As the API shows it. The body is text when it is UTF-8 (a character the cut split at
        its end dropped), else base64 with `body_encoding: "base64"`; empty parts are left out."""
        doc: dict[str, Any] = {}
        if self.status_code is not None:
            doc["status_code"] = self.status_code
        if self.headers:
            doc["headers"] = dict(self.headers)
        if self.body:
            text = _utf8(self.body, cut=self.body_truncated)
            if text is None:
                doc["body"] = base64.b64encode(self.body).decode()
                doc["body_encoding"] = "base64"
            else:
                doc["body"] = text
        if self.body_truncated:
            doc["body_truncated"] = True
        if self.value is not None:
            doc["value"] = json.loads(self.value)
        if self.note:
            doc["note"] = self.note
        return doc


def _utf8(body: bytes, *, cut: bool) -> str | None:
    """`body` as text, or None when it is not UTF-8. A body cut at RESULT_BODY_BYTES may end in
    the first bytes of a character: those (at most three) are dropped, not taken as binary."""
    try:
        return body.decode()
    except UnicodeDecodeError as exc:
        if cut and exc.reason == "unexpected end of data" and exc.start >= len(body) - 3:
            return _utf8(body[: exc.start], cut=False)
        return None
