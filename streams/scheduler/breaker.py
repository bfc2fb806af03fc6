"""A per-tenant circuit breaker over retries: when a tenant's attempts keep failing, its retries
pause (history says why) until a cool-down probe succeeds.

It sees the outcomes of the tenant's jobs on one scheduler partition (the jobs of a tenant
spread over partitions; each partition's breaker decides for the jobs it owns). Only retries
pause: scheduled occurrences still fire, and their outcomes are what closes the breaker too.

closed --(failure ratio >= threshold over >= min attempts in the window)--> open
open   --(cool-down over)--> half-open: the next due retry fires as the probe, others wait
probe succeeded --> closed; probe failed --> open again
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace

from kadence.models import ExecutionOutcome, OutcomeStatus


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
    """Execution id of the retry fired as the half-open probe, until its outcome."""

    def record(
        self, execution_id: str, failed: bool, now_ms: int, cfg: BreakerConfig
    ) -> str | None:
        """Count an outcome; returns what changed, for the log ("opened", "closed")."""
        if self.probe == execution_id:
            self.probe = None
            if failed:
                self.open_until_ms = now_ms + cfg.cooldown_ms
                return "opened"
            self._reset(now_ms)
            return "closed"
        if now_ms - self.window_start_ms >= cfg.window_ms:
            self.window_start_ms, self.attempts, self.failures = now_ms, 0, 0
        self.attempts += 1
        self.failures += int(failed)
        tripped = (
            self.attempts >= cfg.min_attempts and self.failures >= cfg.failure_ratio * self.attempts
        )
        if self.open_until_ms is None and tripped:
            self.open_until_ms = now_ms + cfg.cooldown_ms
            return "opened"
        return None

    def gate(self, now_ms: int, cfg: BreakerConfig) -> Gate:
        if self.open_until_ms is None:
            return Gate()
        if now_ms < self.open_until_ms or self.probe is not None:
            reason = (
                f"tenant circuit open: {self.failures} of {self.attempts} attempts failed "
                "recently; retries wait for a successful probe"
            )
            later = self.open_until_ms if now_ms < self.open_until_ms else now_ms + cfg.cooldown_ms
            return Gate(closed=False, reason=reason, retry_at_ms=later)
        return Gate(closed=False, probe=True)

    def _reset(self, now_ms: int) -> None:
        self.window_start_ms, self.attempts, self.failures = now_ms, 0, 0
        self.open_until_ms = None

    def dump(self) -> bytes:
        body = {name: getattr(self, name) for name in _BREAKER_FIELDS}  # asdict deep-copies
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def load(cls, raw: bytes | None) -> Breaker:
        return cls(**json.loads(raw)) if raw else cls()


_BREAKER_FIELDS = tuple(f.name for f in fields(Breaker))


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
    the tenant's target works."""
    if outcome.status in (OutcomeStatus.lease_lost, OutcomeStatus.cancelled):
        return None
    counted = replace(breaker)
    failed = outcome.status is not OutcomeStatus.succeeded
    return counted, counted.record(outcome.execution_id, failed, now_ms, cfg)


DEFAULTS = BreakerConfig()
