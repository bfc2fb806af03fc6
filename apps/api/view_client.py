"""The API's reads: the query view process over its local JSON endpoint, shown the shared
token (KADENCE_VIEW_TOKEN) on every request."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import HTTPException

from kadence.client import Written
from streams.views.access import TOKEN_HEADER


class ViewClient:
    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=20, headers={TOKEN_HEADER: token})

    def get(self, path: str, waits: list[Written] | None = None, **params: Any) -> Any:
        query: list[tuple[str, str | int | float | bool | None]] = [
            (k, str(v)) for k, v in params.items() if v is not None
        ]
        query += [("wait", f"{w.topic}:{w.partition}:{w.offset}") for w in waits or []]
        try:
            r = self.http.get(path, params=query)
        except httpx.HTTPError as exc:
            raise HTTPException(503, f"the query view is unavailable: {exc}") from exc
        if r.status_code == 404:
            raise HTTPException(404, r.json().get("detail", "not found"))
        if r.status_code in (401, 403):
            raise HTTPException(
                503,
                f"the query view refused the API ({r.status_code}): give both the same "
                "KADENCE_VIEW_TOKEN, and a view_url host the view accepts (KADENCE_VIEW_HOSTS)",
            )
        if r.status_code != 200:
            raise HTTPException(503, f"the query view answered {r.status_code}: {r.text[:200]}")
        return r.json()

    def maybe(self, path: str, waits: list[Written] | None = None) -> Any | None:
        try:
            return self.get(path, waits)
        except HTTPException as exc:
            if exc.status_code == 404:
                return None
            raise

    def close(self) -> None:
        self.http.close()
