"""Chain links' identities and payloads (docs/execution.md, "Chaining").

A link's trigger has a request id derived from the run that ended, the way it ended and the
job it names, so a trigger written again (a scheduler that crashed before its commit reads the
outcome again) is the same command, and its run the same execution
(`<job key>@manual:<request id>`). The request id also carries the chain's depth: every retry,
redelivery, dead letter and replay of the run keeps its execution id, so the depth travels with
the run to its outcome, where the next link is decided, with nothing kept beside it."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import BaseModel

from kadence.headers import iso_utc
from kadence.models import MAX_CHAIN_DEPTH, MAX_PAYLOAD_BYTES, ExecutionOutcome, RunResult

SUCCESS = "success"
FAILURE = "failure"
_CHAINED = re.compile(r"@manual:chain-(\d{1,2})-[0-9a-f]{32}\Z")


def chain_request_id(upstream: str, how: str, job_id: str, depth: int) -> str:
    """The request id of the trigger of `job_id` after run `upstream` ended `how`
    (SUCCESS or FAILURE): `chain-<depth>-<32 hex digits>`."""
    digest = hashlib.blake2b(f"{upstream}\n{how}\n{job_id}".encode(), digest_size=16)
    return f"chain-{depth}-{digest.hexdigest()}"


def chain_depth_of(execution_id: str) -> int:
    """The chain depth of a run (0: not triggered by a link). A user's trigger whose request id
    has a link's shape gets that depth: it can only shorten the user's own chain."""
    found = _CHAINED.search(execution_id)
    return 0 if found is None else min(int(found.group(1)), MAX_CHAIN_DEPTH)


def result_payload(outcome: ExecutionOutcome, limit: int = MAX_PAYLOAD_BYTES) -> bytes:
    """The JSON document a `pass_result` link sends: the run that ended, its status and error,
    and its result when the outcome carries one (a field outcomes do not have yet: read with
    getattr so this works before and after it lands). At most `limit` bytes: a result that does
    not fit is left out, and `result_truncated` says so."""
    doc: dict[str, Any] = {
        "execution_id": outcome.execution_id,
        "job_id": outcome.job_id,
        "status": outcome.status.value,
        "attempt": outcome.attempt,
        "nominal_at": iso_utc(outcome.nominal_at),
        "finished_at": iso_utc(outcome.finished_at),
        "error": None if outcome.error is None else outcome.error.model_dump(mode="json"),
    }
    result = getattr(outcome, "result", None)
    if result is not None:
        doc["result"] = _shown(result)
    text = _dumps(doc)
    if len(text) > limit and "result" in doc:
        del doc["result"]
        doc["result_truncated"] = True
        text = _dumps(doc)
    return text


def _shown(result: Any) -> Any:
    """A result as the API shows it: a body that is not UTF-8 goes as base64 (a plain dump
    decoded it as UTF-8 and raised, so a binary answer broke every `pass_result` chain)."""
    if isinstance(result, RunResult):
        return result.shown()
    return result.model_dump(mode="json") if isinstance(result, BaseModel) else result


def _dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), default=str).encode()
