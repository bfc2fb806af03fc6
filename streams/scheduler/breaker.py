"""A per-tenant circuit breaker over retries: when a tenant's attempts keep failing, its retries
pause (history says why) until a cool-down probe succeeds.

A tenant has one circuit. Each scheduler partition counts the outcomes of the tenant's jobs it
owns (the jobs of a tenant spread over partitions) and keeps a copy of the circuit; when its
count opens the circuit, or a probe's success closes it, it tells every other partition
(`TenantCircuit` on the scheduler-control topic, which no tenant may write), which applies the
change unless its own copy changed later (`heard`). So the tenant's retries wait everywhere,
not only where the failures were counted. Only retries pause: scheduled occurrences still fire,
and their outcomes are what closes the breaker too.

closed --(failure ratio >= threshold over >= min attempts in the window)--> open
open   --(cool-down over)--> half-open: the next due retry fires as the probe, others wait
probe succeeded --> closed; probe failed --> open again
probe cancelled, lease lost, or no outcome by its deadline (its job's timeout + lease + the
cool-down) --> half-open again: the next due retry is a new probe (a probe whose run was
cancelled or whose job was deleted used to hold the tenant's retries forever)
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import orjson

from kadence.models import ExecutionOutcome, OutcomeStatus
from kadence.notifications import is_notification


@dataclass(frozen=True)
class BreakerConfig:
    failure_ratio: float = 0.5
    min_attempts: int = 10
    window_ms: int = 60_000
    cooldown_ms: int = 30_000


@dataclass
class Breaker:
    window_start_ms: int = 0
    attempts: int = 0
    failures: int = 0
    open_until_ms: int | None = None
    probe: str | None = None
    """Execution id of the retry fired as the half-open probe, until its outcome. While it is
    out, `open_until_ms` is its deadline."""
    changed_ms: int = 0
    """When this copy of the tenant's circuit last opened or closed (here, or as heard from
    another partition): an older change heard later is not applied."""

    def copy(self) -> Breaker:
        """A copy to change (`record` changes it in place): one `__dict__` copy, a tenth of
        `dataclasses.replace`'s time, which inspects the fields on every call; it runs at
        every outcome."""
        new: Breaker = _new(Breaker)
        new.__dict__.update(self.__dict__)
        return new

    def probing(self, execution_id: str, now_ms: int, wait_ms: int) -> Breaker:
        """The breaker with `execution_id` out as the probe, awaited until now + wait."""
        return replace(self, probe=execution_id, open_until_ms=now_ms + wait_ms)

    def probe_gone(self, execution_id: str, now_ms: int) -> str | None:
        """The probe ended without saying whether the target works (cancelled, lease lost):
        half-open again at once."""
        if self.probe != execution_id:
            return None
        self.probe = None
        self.open_until_ms = now_ms
        return "half-open again (the probe ended without a verdict)"

    def record(
        self, execution_id: str, failed: bool, now_ms: int, cfg: BreakerConfig
    ) -> str | None:
        """Count an outcome; returns what changed, for the log ("opened", "closed")."""
        if self.probe == execution_id:
            self.probe = None
            self.changed_ms = now_ms
            if failed:
                self.open_until_ms = now_ms + cfg.cooldown_ms
                return "opened"
            self._reset(now_ms)
            return "closed"
        start, attempts, failures, trips = self._counted(failed, now_ms, cfg)
        self.window_start_ms, self.attempts, self.failures = start, attempts, failures
        if trips:
            self.open_until_ms = now_ms + cfg.cooldown_ms
            self.changed_ms = now_ms
            return "opened"
        return None

    def count_quiet_success(self, execution_id: str, now_ms: int, cfg: BreakerConfig) -> bool:
        """Count a success in place when `record` would change nothing but the counts (True);
        False, counting nothing, when it would close the circuit (the probe's) or open it."""
        if self.probe == execution_id:
            return False
        start, attempts, failures, trips = self._counted(False, now_ms, cfg)
        if trips:
            return False
        self.window_start_ms, self.attempts, self.failures = start, attempts, failures
        return True

    def _counted(self, failed: bool, now_ms: int, cfg: BreakerConfig) -> tuple[int, int, int, bool]:
        """The window's start and counts with one more outcome (a new window once this one is
        over), and whether they open the circuit: what `record` and `count_quiet_success`
        share, changing nothing."""
        if now_ms - self.window_start_ms >= cfg.window_ms:
            start, attempts, failures = now_ms, 1, int(failed)
        else:
            start, attempts, failures = (
                self.window_start_ms,
                self.attempts + 1,
                self.failures + int(failed),
            )
        trips = (
            self.open_until_ms is None
            and attempts >= cfg.min_attempts
            and failures >= cfg.failure_ratio * attempts
        )
        return start, attempts, failures, trips

    def heard(self, open_until_ms: int | None, at_ms: int) -> str | None:
        """Another partition opened (until `open_until_ms`) or closed the tenant's circuit at
        `at_ms`: applied unless this copy changed later. Returns what it did, for the log."""
        if at_ms < self.changed_ms:
            return None
        self.changed_ms = at_ms
        if open_until_ms is None:
            if self.open_until_ms is None:
                return None
            self._reset(at_ms)
            self.probe = None
            return "closed (as another partition)"
        if self.open_until_ms is not None and self.open_until_ms >= open_until_ms:
            return None
        self.open_until_ms = open_until_ms
        return "opened (as another partition)"

    def gate(self, now_ms: int, cfg: BreakerConfig) -> Gate:
        if self.open_until_ms is None:
            return Gate()
        if now_ms < self.open_until_ms:
            reason = (
                f"tenant circuit open: {self.failures} of {self.attempts} attempts failed "
                "recently; retries wait for a successful probe"
            )
            later = self.open_until_ms
            if self.probe is not None:  # look again after a cool-down: the probe may be back
                reason += f" (probe {self.probe} is out)"
                later = min(later, now_ms + cfg.cooldown_ms)
            return Gate(closed=False, reason=reason, retry_at_ms=later)
        return Gate(closed=False, probe=True)  # half-open, or the probe is past its deadline

    def _reset(self, now_ms: int) -> None:
        self.window_start_ms, self.attempts, self.failures = now_ms, 0, 0
        self.open_until_ms = None

    def dump(self) -> bytes:
        """JSON (orjson: the breaker is written once a transaction, and on every open or
        close); without `changed_ms` while it is 0 (what a previous release reads)."""
        body = {name: getattr(self, name) for name in _BREAKER_FIELDS}  # asdict deep-copies
        if not self.changed_ms:
            del body["changed_ms"]
        return orjson.dumps(body)

    @classmethod
    def load(cls, raw: bytes | None) -> Breaker:
        return cls(**orjson.loads(raw)) if raw else cls()


_BREAKER_FIELDS = tuple(f.name for f in fields(Breaker))
_new = object.__new__


@dataclass(frozen=True)
class Gate:
    """What the breaker lets through now: everything (closed), one probe, or nothing."""

    closed: bool = True
    probe: bool = False
    reason: str = ""
    retry_at_ms: int = 0


def after_outcome(
    breaker: Breaker, outcome: ExecutionOutcome, now_ms: int, cfg: BreakerConfig
) -> tuple[Breaker, str | None] | None:
    """The breaker after counting `outcome`, and what changed ("opened", "closed", or None);
    None when the outcome does not count: a lost lease or a cancel says nothing about whether
    the tenant's target works (but if it ended the probe, a new probe may go); nor does a
    notification's call (a `notify` webhook is not the tenant's target, and must not open it)."""
    if is_notification(outcome.execution_id):
        return None
    if outcome.status in (OutcomeStatus.lease_lost, OutcomeStatus.cancelled):
        if breaker.probe != outcome.execution_id:
            return None
        cleared = breaker.copy()
        return cleared, cleared.probe_gone(outcome.execution_id, now_ms)
    counted = breaker.copy()
    failed = outcome.status is not OutcomeStatus.succeeded
    return counted, counted.record(outcome.execution_id, failed, now_ms, cfg)


DEFAULTS = BreakerConfig()
