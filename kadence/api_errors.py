"""What `ApiClient` raises when the API refuses a call or cannot be reached: one class per kind
of refusal a caller handles differently, each with the HTTP status and the API's reason.

    try:
        api.trigger("nightly")
    except QuotaExceededError as exc:
        time.sleep(exc.retry_after_s or 60)
    except NotFoundError:
        ...                     # no such job for this token's tenant

A refusal the client can see before sending (a bad job id, a reason too long, a backfill window
without an offset) raises `InvalidRequestError` with the API's 422 shape, and nothing is sent.
"""

from __future__ import annotations

from typing import Any

from kadence.errors import KadenceError

EXIT = {401: 5, 403: 5, 404: 4, 409: 6, 413: 3, 422: 3, 429: 7}
"""The `kadence` CLI's exit code for each refusal (2 for the rest)."""


class ApiError(KadenceError):
    """The API refused a call (`status` its HTTP status; 0: it could not be reached)."""

    def __init__(self, status: int, detail: Any, retry_after_s: float | None = None) -> None:
        super().__init__(f"{status}: {reason_of(detail)}")
        self.status = status
        self.detail = detail
        """The API's answer as it sent it: a text, a list of field errors, a quota's fields."""
        self.retry_after_s = retry_after_s
        """A 429's Retry-After: waiting this long helps (None: it does not)."""

    @property
    def reason(self) -> str:
        """The API's reason in one line (field errors joined with "; ")."""
        return reason_of(self.detail)

    @property
    def exit_code(self) -> int:
        return EXIT.get(self.status, 2)


class UnreachableError(ApiError):
    """No answer: the URL is wrong, the API is down, or the network dropped the call."""


class NotAuthenticatedError(ApiError):
    """401: no token, or one the API does not know."""


class NotAllowedError(ApiError):
    """403: the token lacks the scope the call needs (read, operate, manage)."""


class NotFoundError(ApiError):
    """404: no such job, run or dead letter for this token's tenant."""


class ConflictError(ApiError):
    """409: the job exists, the scheduler refused the write, or a replay is still pending."""


class InvalidRequestError(ApiError):
    """413 or 422: the input is out of bounds; `detail` names each field (`loc`, `msg`)."""


class QuotaExceededError(ApiError):
    """429: over one of the tenant's quotas; `retry_after_s` says when trying again helps."""


class ServerError(ApiError):
    """5xx: the API or what it depends on failed; the call may be retried."""


_BY_STATUS: dict[int, type[ApiError]] = {
    401: NotAuthenticatedError,
    403: NotAllowedError,
    404: NotFoundError,
    409: ConflictError,
    413: InvalidRequestError,
    422: InvalidRequestError,
    429: QuotaExceededError,
}


def api_error(status: int, detail: Any, retry_after_s: float | None = None) -> ApiError:
    """The error for an answer with `status` (>= 400) and the API's `detail`."""
    kind = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return kind(status, detail, retry_after_s)


def reason_of(detail: Any) -> str:
    """A refusal's detail as one line: a quota's `msg`, field errors' messages with where."""
    if isinstance(detail, dict):
        return str(detail.get("msg", detail))
    if isinstance(detail, list):
        return "; ".join(_field(d) for d in detail)
    return str(detail)


def _field(d: Any) -> str:
    if not isinstance(d, dict):
        return str(d)
    loc = ".".join(str(p) for p in d.get("loc", ()) if p not in ("body", "query", "path"))
    msg = str(d.get("msg", d))
    return f"{loc}: {msg}" if loc else msg
