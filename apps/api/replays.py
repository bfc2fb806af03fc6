"""One replay of a dead letter at a time: the API's side of replay deduplication.

A replay's request id derives from the letter (its execution id, how often it died, how often
it was replayed), so two replays of the same letter carry the same id and the scheduler applies
the second as a no-op; the API also answers the second with 409 naming the first's id while
the first is pending (sent, not yet fired: held here) or running (the query view says
`replayed`). Once the replay ended (the view says `succeeded`, or the execution died again) a
new replay gets a new id. Held per API process; several API processes still agree on the id.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import HTTPException

PENDING_S = 600.0
"""How long a replay sent by this process counts as pending while the view shows no change
(it normally fires within a second; a scheduler that is down holds it longer)."""
HELD_AT_MOST = 10_000


def letter_request_id(dead: dict[str, Any]) -> str:
    """The request id of a replay of this dead letter as the view shows it now."""
    digest = hashlib.sha256(str(dead["execution_id"]).encode()).hexdigest()[:40]
    return f"replay:{dead.get('deaths', 0)}.{dead.get('replays', 0)}:{digest}"


@dataclass
class ReplayGuard:
    clock: Callable[[], float] = time.monotonic
    _pending: dict[tuple[str, str], tuple[str, str, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, tenant: str, dead: dict[str, Any]) -> None:
        """Raise 409 when a replay of this letter is pending or running."""
        execution_id = str(dead["execution_id"])
        if dead.get("state") == "replayed":
            raise _conflict(execution_id, "running", self._first(tenant, dead))
        with self._lock:
            held = self._pending.get((tenant, execution_id))
        if held is not None:
            request_id, seen, at = held
            if seen == _seen(dead) and self.clock() - at < PENDING_S:
                raise _conflict(execution_id, "pending", request_id)

    def sent(self, tenant: str, dead: dict[str, Any], request_id: str) -> None:
        with self._lock:
            if len(self._pending) >= HELD_AT_MOST:
                cutoff = self.clock() - PENDING_S
                self._pending = {k: v for k, v in self._pending.items() if v[2] > cutoff}
            key = (tenant, str(dead["execution_id"]))
            self._pending[key] = (request_id, _seen(dead), self.clock())

    def _first(self, tenant: str, dead: dict[str, Any]) -> str:
        with self._lock:
            held = self._pending.get((tenant, str(dead["execution_id"])))
        if held is not None:
            return held[0]
        before = {**dead, "replays": max(0, int(dead.get("replays", 0)) - 1)}
        return letter_request_id(before)  # the view counted the replay when it fired


def _seen(dead: dict[str, Any]) -> str:
    """What the view said of the letter when the replay was sent: a change means it fired."""
    return f"{dead.get('state')}:{dead.get('deaths', 0)}:{dead.get('replays', 0)}"


def _conflict(execution_id: str, how: str, request_id: str) -> HTTPException:
    return HTTPException(
        409,
        {
            "msg": f"a replay of {execution_id} is already {how} (request {request_id}); "
            "replay it again once that run has ended",
            "request_id": request_id,
        },
    )
