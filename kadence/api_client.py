"""The tenant's SDK: a job's whole life through the HTTP API (KADENCE_API_URL and the tenant's
token), with the API's tenancy, scopes, quotas and history of who did what.

    with ApiClient("http://127.0.0.1:8080", token) as api:
        api.create("nightly", {"schedule": {...}, "target": {...}})
        run = api.trigger("nightly", wait_s=30)["run"]     # its status, result, error
        api.pause("nightly", reason="ticket 42"); api.resume("nightly")
        api.backfill("nightly", start, end, run=True)       # a dry run without run=True
        for letter in api.dead_letters(job_id="nightly"):
            api.replay(letter["execution_id"])
        api.put_connection("billing", {"kind": "bearer", "token": token_of_billing})

Writes answer once the query view shows them (409 when the scheduler refused); commands once
they are on their topic. Each refusal raises an `ApiError` subclass (kadence/api_errors.py) with
the status and the API's reason; input out of the API's bounds is refused before sending, by the
same models (kadence/api_requests.py). `KadenceClient` writes straight to Kafka instead (an
operator's tool, for loading many jobs at once).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from kadence.api_errors import (
    EXIT,
    ApiError,
    InvalidRequestError,
    UnreachableError,
    api_error,
)
from kadence.api_requests import BackfillIn, RequestIn, TriggerIn, window_problems
from kadence.models.base import IDENT_RE, Payload

__all__ = ["EXIT", "ApiClient", "ApiError", "RunTimeoutError", "retry_after"]
PAGE = 100
FINAL = frozenset({"succeeded", "failed", "timed_out", "cancelled", "not_run", "dead_lettered"})
"""Run statuses nothing follows (a failed attempt with retries left shows `retrying`)."""
LETTER_GRACE_S = 5.0
"""How long a wait for a run that failed waits for its dead letter to show."""
_PAYLOAD: TypeAdapter[bytes] = TypeAdapter(Payload)


class RunTimeoutError(ApiError):
    """A run waited for was not final in time (`detail` says its last status)."""

    def __init__(self, detail: str, run: dict[str, Any] | None) -> None:
        super().__init__(0, detail)
        self.run = run
        """The run as last seen (None: not seen yet)."""


class ApiClient:
    def __init__(self, url: str, token: str | None, timeout_s: float = 30) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=timeout_s)

    def call(self, method: str, path: str, **kw: Any) -> Any:
        """One request; the answer's JSON (None for 204), or the ApiError for its refusal."""
        if "json" in kw:  # escaped: httpx writes raw UTF-8, which has no code for "\ud800"
            kw["content"] = json.dumps(kw.pop("json")).encode()
            kw["headers"] = {**kw.get("headers", {}), "content-type": "application/json"}
        try:
            r = self.http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise UnreachableError(
                0, f"cannot reach the API at {self.http.base_url}: {exc}"
            ) from exc
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except (ValueError, AttributeError):
                detail = r.text
            raise api_error(r.status_code, detail, retry_after(r.headers.get("retry-after")))
        return None if r.status_code == 204 else r.json()

    # -- reading -----------------------------------------------------------------------------

    def job(self, job_id: str) -> dict[str, Any]:
        """The job: `version`, `definition`, `state`, `next_runs`, `last_run` (404: ApiError)."""
        return self.call("GET", _job(job_id))  # type: ignore[no-any-return]

    def jobs(self, page: int = PAGE, label: str = "") -> Iterator[dict[str, Any]]:
        """Every job of the tenant, in key order, `page` at a time; with `label`, those whose
        labels meet that selector (`team=data,env!=dev`: kadence/labels.py)."""
        _bounded("limit", page, 1, 1000)
        after = ""
        while True:
            params = {"limit": page, "after": after, **({"label": label} if label else {})}
            got = self.call("GET", "/v1/jobs", params=params)
            yield from got
            if len(got) < page:
                return
            after = f"{got[-1]['tenant']}/{got[-1]['job_id']}"

    def next(self, job_id: str, n: int = 10) -> list[str]:
        """The next `n` (1-100) due times, UTC, ISO 8601."""
        _bounded("n", n, 1, 100)
        return self.call("GET", f"{_job(job_id)}/next", params={"n": n})  # type: ignore[no-any-return]

    def runs(self, job_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """One entry per occurrence, newest first (full execution ids), at most `limit` (500)."""
        _bounded("limit", limit, 1, 500)
        path = f"{_job(job_id)}/runs"
        return self.call("GET", path, params={"limit": limit})  # type: ignore[no-any-return]

    def history(self, job_id: str, limit: int = 100) -> list[dict[str, Any]]:
        """Every recorded event of the job, newest first, at most `limit` (1000)."""
        _bounded("limit", limit, 1, 1000)
        path = f"{_job(job_id)}/history"
        return self.call("GET", path, params={"limit": limit})  # type: ignore[no-any-return]

    def dead_letters(self, page: int = 200, **match: str) -> Iterator[dict[str, Any]]:
        """Every dead letter of the tenant in execution id order, `page` at a time; `match`
        (job_id, state, reason) keeps those whose field equals it."""
        _bounded("limit", page, 1, 1000)
        after = ""
        while True:
            params = {"limit": page, "after": after, **{k: v for k, v in match.items() if v}}
            got = self.call("GET", "/v1/dead-letters", params=params)
            yield from got
            if len(got) < page:
                return
            after = got[-1]["execution_id"]

    # -- writing -----------------------------------------------------------------------------

    def create(self, job_id: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """A new job from a definition without tenant, job_id and version (409 if it exists)."""
        return self.call("POST", _job(job_id), json=dict(spec))  # type: ignore[no-any-return]

    def update(self, job_id: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """The next version of the job (the API takes the current one and adds one)."""
        return self.call("PUT", _job(job_id), json=dict(spec))  # type: ignore[no-any-return]

    def delete(self, job_id: str) -> None:
        """Delete the job: it fires no more (404 if there is none)."""
        self.call("DELETE", _job(job_id))

    # -- commands: each answers once on its topic, idempotent by request_id -----------------

    def pause(self, job_id: str, reason: str = "", request_id: str | None = None) -> dict[str, Any]:
        """Stop firing until resumed; `reason` is kept in the history and shown while paused."""
        body = _body(RequestIn, request_id=request_id, reason=reason)
        return self.call("POST", f"{_job(job_id)}/pause", json=body)  # type: ignore[no-any-return]

    def resume(
        self, job_id: str, reason: str = "", request_id: str | None = None
    ) -> dict[str, Any]:
        """Fire again from the next occurrence (what fell due while paused stays skipped)."""
        body = _body(RequestIn, request_id=request_id, reason=reason)
        return self.call("POST", f"{_job(job_id)}/resume", json=body)  # type: ignore[no-any-return]

    def trigger(
        self,
        job_id: str,
        payload: str | dict[str, Any] | list[Any] | None = None,
        request_id: str | None = None,
        wait_s: float = 0,
    ) -> dict[str, Any]:
        """Run the job once now (`payload` replaces its payload for this run): `request_id`,
        `execution_id`. With `wait_s`, also `run`: the run once final (any status; a failed one
        with its dead letter), or RunTimeoutError after `wait_s` seconds."""
        body = _body(TriggerIn, request_id=request_id, payload=payload)
        if payload is not None:
            _check(lambda: _PAYLOAD.validate_python(payload), ["body", "payload"])
        got: dict[str, Any] = self.call("POST", f"{_job(job_id)}/trigger", json=body)
        if wait_s > 0:
            got["run"] = self.wait_run(job_id, got["execution_id"], wait_s)
        return got

    def wait_run(self, job_id: str, run_id: str, timeout_s: float) -> dict[str, Any]:
        """The run `run_id` once final; one that failed waits a moment (LETTER_GRACE_S, never
        past the deadline) for the dead letter that follows, which is the whole story."""
        deadline = time.monotonic() + timeout_s
        letter_by: float | None = None
        while True:
            run = next((r for r in self.runs(job_id) if r["execution_id"] == run_id), None)
            if run is not None and run["status"] == "failed":
                letter_by = letter_by or min(deadline, time.monotonic() + LETTER_GRACE_S)
                if time.monotonic() >= letter_by:
                    return run
            elif run is not None and run["status"] in FINAL:
                return run
            if time.monotonic() > deadline:
                status = run["status"] if run else "not seen yet"
                raise RunTimeoutError(
                    f"run {run_id} not finished after {timeout_s:g} s ({status})", run
                )
            time.sleep(0.25)

    def cancel(
        self, job_id: str, run_id: str, reason: str = "", request_id: str | None = None
    ) -> dict[str, Any]:
        """Stop a run in flight, a pending retry, or a run dispatched ahead of its due time."""
        body = _body(RequestIn, request_id=request_id, reason=reason)
        path = f"{_job(job_id)}/runs/{_run(run_id)}/cancel"
        return self.call("POST", path, json=body)  # type: ignore[no-any-return]

    def backfill(
        self,
        job_id: str,
        start: datetime,
        end: datetime,
        *,
        run: bool = False,
        force: bool = False,
        max_occurrences: int = 1_000,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """The occurrences in [start, end) a real run fires (a dry run); with `run`, fire them
        (at most `max_occurrences`, 422 past them: split the window) and follow them with
        `backfill_progress(job_id, answer["request_id"])`. `force`: also those dispatched."""
        given = {
            "start": start,
            "end": end,
            "dry_run": not run,
            "force": force,
            "max_occurrences": max_occurrences,
            **({"request_id": request_id} if request_id is not None else {}),
        }
        checked: BackfillIn = _check(lambda: BackfillIn.model_validate(given), ["body"])
        problems = window_problems(checked.start, checked.end)
        if problems:
            raise InvalidRequestError(422, problems)
        body = checked.model_dump(mode="json", include=set(given))
        return self.call("POST", f"{_job(job_id)}/backfill", json=body)  # type: ignore[no-any-return]

    def backfill_progress(self, job_id: str, request_id: str) -> dict[str, Any]:
        """A real backfill's runs fired so far and whether it is done (404 until its first
        step)."""
        _body(RequestIn, request_id=request_id)
        path = f"{_job(job_id)}/backfill/{request_id}"
        return self.call("GET", path)  # type: ignore[no-any-return]

    def replay(self, run_id: str, request_id: str | None = None) -> dict[str, Any]:
        """Run a dead-lettered execution again (same execution id, attempt 1); by default a
        replay sent twice runs once (409 while one is pending)."""
        body = _body(RequestIn, request_id=request_id)
        path = f"/v1/dead-letters/{_run(run_id)}/replay"
        return self.call("POST", path, json=body)  # type: ignore[no-any-return]

    # -- connections: the credentials a tenant's jobs call with (no value is ever shown) -------

    def connections(self) -> list[dict[str, Any]]:
        """The tenant's connections and signing secrets: kind, version, fingerprint, details."""
        return self.call("GET", "/v1/connections")  # type: ignore[no-any-return]

    def connection(self, name: str) -> dict[str, Any]:
        return self.call("GET", _connection(name))  # type: ignore[no-any-return]

    def put_connection(self, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Create the connection, or rotate it (its version goes up): `{"kind": "bearer",
        "token": ...}` and the other kinds of docs/api.md."""
        return self.call("PUT", _connection(name), json=dict(spec))  # type: ignore[no-any-return]

    def delete_connection(self, name: str) -> None:
        """Delete it: the runs of jobs that still name it fail, saying so."""
        self.call("DELETE", _connection(name))

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the API sends seconds, never a date)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _body(model: type[BaseModel], **fields: Any) -> dict[str, Any]:
    """`fields` checked by the API's own body model; what the API would refuse with 422 is
    refused here, in its shape, before anything is sent."""
    given = {k: v for k, v in fields.items() if v is not None}
    checked = _check(lambda: model.model_validate(given), ["body"])
    return checked.model_dump(mode="json", include=set(given))  # type: ignore[no-any-return]


def _check(validate: Any, where: list[str]) -> Any:
    try:
        return validate()
    except ValidationError as exc:
        detail = [
            {"loc": [*where, *e["loc"]], "msg": e["msg"], "type": e["type"]} for e in exc.errors()
        ]
        raise InvalidRequestError(422, detail) from None


def _bounded(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        msg = f"{name} must be from {low} to {high}, not {value}"
        raise InvalidRequestError(422, [{"loc": ["query", name], "msg": msg}])


def _job(job_id: str) -> str:
    return f"/v1/jobs/{_ident(job_id, 'job_id')}"


def _connection(name: str) -> str:
    return f"/v1/connections/{_ident(name, 'name')}"


def _ident(value: str, where: str) -> str:
    """`value` as a path part if it is an identifier, as the API checks (422 otherwise)."""
    if not IDENT_RE.fullmatch(value):
        msg = "not an identifier: 1-128 letters, digits, '.', '_' or '-', from a letter or digit"
        raise InvalidRequestError(422, [{"loc": ["path", where], "msg": msg}])
    return quote(value, safe="")


def _run(run_id: str) -> str:
    return quote(run_id, safe="@/")
