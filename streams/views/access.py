"""Who may ask the query view: the API, proving it with the shared token, by a loopback name.

The view answers every tenant's jobs and dead letters, payloads included, so "it listens on
127.0.0.1" is not enough: any local process could ask, and so could a web page in a local
browser whose name was rebound to 127.0.0.1 (DNS rebinding). The Host header must be a loopback
name or one configured in KADENCE_VIEW_HOSTS (a rebinding page sends its own name), and the
X-Kadence-View-Token header must equal KADENCE_VIEW_TOKEN (compared in constant time).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from kadence.errors import KadenceError

TOKEN_HEADER = "X-Kadence-View-Token"  # noqa: S105 - a header name, not a secret
LOOPBACK_NAMES = frozenset({"127.0.0.1", "::1", "localhost"})


class ViewTokenMissingError(KadenceError):
    """The view was started without a token: it would have answered anyone."""


@dataclass(frozen=True)
class Refusal:
    status: int
    detail: str


def host_name(host: str) -> str:
    """The name in a Host header, without its port: `[::1]:8766` -> `::1`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class ViewAccess:
    def __init__(self, token: str, hosts: Iterable[str] = ()) -> None:
        if not token:
            raise ViewTokenMissingError(
                "the query view needs a token, or it answers every tenant's data to anyone on "
                "this host. Fix: set KADENCE_VIEW_TOKEN to the same secret for the view and the "
                "API (`make run` makes one for its children)."
            )
        self._token = token.encode()
        self.hosts = LOOPBACK_NAMES | {host_name(h) for h in hosts}

    def refusal(self, host: str | None, token: str | None) -> Refusal | None:
        """Why a request with these Host and token headers is refused (Host first: a rebinding
        page cannot have the token anyway), or None to answer it."""
        if host is None or host_name(host) not in self.hosts:
            return Refusal(403, "this Host is not the query view's (KADENCE_VIEW_HOSTS)")
        if token is None or not hmac.compare_digest(token.encode(), self._token):
            return Refusal(401, f"missing or wrong {TOKEN_HEADER}")
        return None
