"""The ingress's one question to the query view per batch (`POST /jobs-known`): which of the
batch's jobs exist, at which version and on which `home` partition, and how many jobs the
batch's tenants have. The answers let the ingress count creates against the jobs quota and
send a delete to one partition, without a remote call per record.

A view that does not answer (down, still reading from the start, refusing the token) is
`ViewUnavailableError`; the caller decides what is safe without it (streams/ingress/quotas.py,
streams/ingress/placement.py). After a failure the view is not asked again for `BACKOFF_S`:
a view that hangs costs the ingress one `TIMEOUT_S` wait per `BACKOFF_S`, not one per batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import httpx

from kadence.errors import KadenceError
from streams.views.access import TOKEN_HEADER

TIMEOUT_S = 1.0
"""The longest a batch waits for the view (it answers from its local store in milliseconds)."""
BACKOFF_S = 5.0


class ViewUnavailableError(KadenceError):
    """The query view did not answer; the message says why."""


@dataclass(frozen=True, slots=True)
class Known:
    """A job the view shows: its version, and `home`, the one partition every definition of it
    came from (None: it came from more than one, or the view does not know)."""

    version: int
    home: int | None


@dataclass(frozen=True, slots=True)
class Answer:
    jobs: Mapping[str, Known | None]
    """Each job key asked (tenant/job_id): what the view shows, None for no such job."""
    counts: Mapping[str, int]
    """Each tenant asked: its jobs, counted up to the limit asked."""


class JobLookup(Protocol):
    def ask(self, jobs: Sequence[str], counts: Mapping[str, int]) -> Answer:
        """Raises ViewUnavailableError."""
        ...


class ViewLookup:
    """The query view over its local endpoint, shown the shared token (KADENCE_VIEW_TOKEN)."""

    def __init__(
        self, base_url: str, token: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.http = httpx.Client(
            base_url=base_url, timeout=TIMEOUT_S, headers={TOKEN_HEADER: token}
        )
        self.token = token
        self.clock = clock
        self._down_until = 0.0
        self._why = ""

    def ask(self, jobs: Sequence[str], counts: Mapping[str, int]) -> Answer:
        if not self.token:
            raise ViewUnavailableError("KADENCE_VIEW_TOKEN is not set: the view answers no one")
        now = self.clock()
        if now < self._down_until:
            raise ViewUnavailableError(self._why)
        try:
            r = self.http.post("/jobs-known", json={"jobs": list(jobs), "counts": dict(counts)})
            if r.status_code != 200:
                raise ViewUnavailableError(
                    f"the query view answered {r.status_code}: {r.text[:200]}"
                )
            doc = r.json()
            return Answer(
                {
                    k: None if v is None else Known(int(v["version"]), _home(v.get("home")))
                    for k, v in doc["jobs"].items()
                },
                {t: int(n) for t, n in doc["counts"].items()},
            )
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self._failed(now, f"the query view is unreachable: {exc}")
            raise ViewUnavailableError(self._why) from exc
        except ViewUnavailableError as exc:
            self._failed(now, str(exc))
            raise

    def _failed(self, now: float, why: str) -> None:
        self._down_until = now + BACKOFF_S
        self._why = f"{why} (not asked again for {BACKOFF_S:.0f} s)"

    def close(self) -> None:
        self.http.close()


def _home(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
