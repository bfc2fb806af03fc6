"""A worker's graceful stop: claim nothing new, finish what runs, leave the rest to others."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Protocol

from kadence.clock import Clock
from kadence.models import OutcomeStatus
from streams.worker.active import ActiveRun, TxnWork
from streams.worker.holding import Holdings
from streams.worker.inbox import Inbox, Item
from streams.worker.inflight import InFlight

log = logging.getLogger(__name__)


class Worker(Protocol):
    """What draining needs of the worker loop (streams/worker/loop.py)."""

    clock: Clock
    inbox: Inbox
    inflight: InFlight
    holdings: Holdings

    @property
    def runs(self) -> Mapping[str, ActiveRun]: ...

    def police(self, now: int) -> None: ...

    def due(self, now: int, paced: bool = False) -> list[Item]: ...

    def start(self, run: ActiveRun) -> None: ...

    def commit(self, txn: TxnWork, now: int, offsets: dict[int, tuple[int, str]]) -> None: ...


def drain(worker: Worker, grace: timedelta) -> None:
    """Claim nothing new, but start each claim ahead at its due instant as usual; let running
    invocations finish (renewing their leases) for up to `grace` and report them. What still
    runs after that is stopped without an outcome, and a claim ahead due after it is left to
    its lease: both expire and the reaper redelivers them. Executions read but not claimed are
    the next owner's (their positions never moved), Kafka-topic runs not yet delivered too."""
    w = worker
    deadline = time.monotonic() + grace.total_seconds()
    w.inbox.serve_claimed_only()
    while _draining(w, deadline):
        now = w.clock.now_ms()
        w.police(now)
        w.inflight.collect()
        for item in w.due(now):
            ahead = w.holdings.starting(item)
            if ahead is not None:
                w.start(ahead)
        txn = TxnWork()
        w.inflight.report(txn)
        w.holdings.snapshot(txn, now, w.runs.values())
        if txn.finished or txn.renewals or txn.held is not None:
            w.commit(txn, now, w.inbox.offsets())
        w.inflight.wait(0.005 if w.holdings.claimed else 0.05)
    if w.runs or w.holdings.claimed:
        log.warning(
            "%d runs still going and %d claimed ahead at shutdown; their leases expire and "
            "the reaper redelivers them",
            len(w.runs),
            len(w.holdings.claimed),
        )
        for run in w.runs.values():
            run.stop.set(OutcomeStatus.cancelled)


def _draining(w: Worker, deadline: float) -> bool:
    """Runs still going, or a claim ahead due before the grace runs out."""
    left_ms = (deadline - time.monotonic()) * 1000
    if left_ms <= 0:
        return False
    until = w.clock.now_ms() + left_ms
    return bool(w.runs) or any(r.item.due_ms <= until for r in w.holdings.claimed.values())
