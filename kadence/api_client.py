"""The SDK's reading half: jobs, runs and history through the HTTP API (KADENCE_API_URL and a
tenant's token), so code that updates a job reads its current version instead of guessing it.

    api = ApiClient("http://127.0.0.1:8080", token)
    job = api.job("weekday-report")              # definition, version, state, next runs
    api.update("weekday-report", {**spec, "description": "v2"})   # the API picks the version
    for job in api.jobs():                         # every job, a page at a time
        ...

Writes through the API answer once the query view shows them (409 when the scheduler refused);
`KadenceClient` writes straight to Kafka instead. Every call raises `ApiError` with the status
and the API's detail on a refusal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

EXIT = {401: 5, 403: 5, 404: 4, 409: 6, 413: 3, 422: 3, 429: 7}
"""The `kadence` CLI's exit code for each refusal (2 for the rest)."""
PAGE = 100


class ApiError(Exception):
    def __init__(self, status: int, detail: Any, retry_after_s: float | None = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.retry_after_s = retry_after_s
        """A 429's Retry-After: waiting this long helps (None: it does not)."""

    @property
    def exit_code(self) -> int:
        return EXIT.get(self.status, 2)


class ApiClient:
    def __init__(self, url: str, token: str | None, timeout_s: float = 30) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=timeout_s)

    def call(self, method: str, path: str, **kw: Any) -> Any:
        if "json" in kw:  # escaped: httpx writes raw UTF-8, which has no code for "\ud800"
            kw["content"] = json.dumps(kw.pop("json")).encode()
            kw["headers"] = {**kw.get("headers", {}), "content-type": "application/json"}
        try:
            r = self.http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise ApiError(0, f"cannot reach the API at {self.http.base_url}: {exc}") from exc
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except (ValueError, AttributeError):
                detail = r.text
            raise ApiError(r.status_code, detail, retry_after(r.headers.get("retry-after")))
        return None if r.status_code == 204 else r.json()

    # -- reading -----------------------------------------------------------------------------

    def job(self, job_id: str) -> dict[str, Any]:
        """The job: `version`, `definition`, `state`, `next_runs`, `last_run` (404: ApiError)."""
        return self.call("GET", f"/v1/jobs/{_part(job_id)}")  # type: ignore[no-any-return]

    def jobs(self, page: int = PAGE, label: str = "") -> Iterator[dict[str, Any]]:
        """Every job of the tenant, in key order, `page` at a time; with `label`, those whose
        labels meet that selector (`team=data,env!=dev`: kadence/labels.py)."""
        after = ""
        while True:
            params = {"limit": page, "after": after, **({"label": label} if label else {})}
            got = self.call("GET", "/v1/jobs", params=params)
            yield from got
            if len(got) < page:
                return
            after = f"{got[-1]['tenant']}/{got[-1]['job_id']}"

    def runs(self, job_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """One entry per occurrence, newest first (full execution ids)."""
        path = f"/v1/jobs/{_part(job_id)}/runs"
        return self.call("GET", path, params={"limit": limit})  # type: ignore[no-any-return]

    def history(self, job_id: str, limit: int = 100) -> list[dict[str, Any]]:
        path = f"/v1/jobs/{_part(job_id)}/history"
        return self.call("GET", path, params={"limit": limit})  # type: ignore[no-any-return]

    def dead_letters(self, page: int = 200, **match: str) -> Iterator[dict[str, Any]]:
        """Every dead letter of the tenant in execution id order, `page` at a time; `match`
        (job_id, state, reason) keeps those whose field equals it."""
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
        return self.call("POST", f"/v1/jobs/{_part(job_id)}", json=dict(spec))  # type: ignore[no-any-return]

    def update(self, job_id: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """The next version of the job (the API takes the current one and adds one)."""
        return self.call("PUT", f"/v1/jobs/{_part(job_id)}", json=dict(spec))  # type: ignore[no-any-return]

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


def _part(job_id: str) -> str:
    return quote(job_id, safe="")
