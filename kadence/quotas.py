"""Per-tenant quotas: jobs a tenant may have, and the backfill occurrences, trigger requests
and dead-letter replays it may send per minute. Each has a default and per-tenant overrides
(kadence/settings.py, `api_quota_*`, named for the API that had them first); 0 is no limit.
Both doors a tenant has use this one logic with the same settings: the API (apps/api/quotas.py
turns a refusal into HTTP 429) and the ingress of its Kafka topics (streams/ingress/quotas.py
turns it into a `rejected` record with code `quota_exceeded`).

The rates are token buckets, one per tenant and quota, held in the process that counts (several
API or ingress processes each allow the rate): a bucket holds one minute's worth and refills
continuously, so a tenant may send a minute's worth at once and then the rate, never more. A
refusal says which quota, its limit, and when to try again (`retry_after_s`); a request that
asks more than a whole minute's worth at once is refused without it (waiting would not help;
split it).

The job count is read from the query view by the caller; `JobQuota` only compares. The API
counts its creates in flight (`JobQuota.creating`), the ingress the creates it let through
that the view does not show yet, so neither overshoots the quota on its own.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kadence.errors import KadenceError
from kadence.settings import KadenceSettings

JOBS = "jobs_per_tenant"
BACKFILL = "backfill_occurrences_per_minute"
TRIGGERS = "triggers_per_minute"
REPLAYS = "replays_per_minute"
PRUNE_AT = 1_024
"""Buckets kept before full ones (as good as none) are dropped."""


class QuotaExceededError(KadenceError):
    """A tenant's request would pass one of its quotas: the message says which, its limit, and
    what to do (wait `retry_after_s`, split the request, or delete a job)."""

    code = "quota_exceeded"
    """The `rejected` record's code where the refusal is a record (the ingress)."""

    def __init__(self, quota: str, limit: int, message: str, retry_after_s: int | None) -> None:
        super().__init__(message)
        self.quota = quota
        self.limit = limit
        self.message = message
        self.retry_after_s = retry_after_s

    def detail(self) -> dict[str, Any]:
        return {
            "msg": self.message,
            "quota": self.quota,
            "limit": self.limit,
            "retry_after_s": self.retry_after_s,
        }


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class RateQuota:
    """Per-tenant token buckets of `limit(tenant)` per minute."""

    quota: str
    default: int
    overrides: Mapping[str, int] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    """Seconds, monotonic (tests pass a fake)."""
    unit: str = "requests"
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def limit(self, tenant: str) -> int:
        return self.overrides.get(tenant, self.default)

    def take(self, tenant: str, n: int = 1) -> None:
        """Spend `n` of the tenant's allowance, or raise QuotaExceededError (spending none)."""
        limit = self.limit(tenant)
        if limit == 0 or n <= 0:
            return
        if n > limit:
            raise QuotaExceededError(
                self.quota,
                limit,
                f"quota {self.quota}: {n} {self.unit} in one request, more than the {limit} "
                f"per minute tenant {tenant} may send; split it",
                None,
            )
        with self._lock:
            now = self.clock()
            bucket = self._buckets.get(tenant)
            tokens = float(limit) if bucket is None else bucket.tokens
            if bucket is not None:
                tokens = min(float(limit), tokens + (now - bucket.at) * limit / 60)
            if tokens < n:
                self._buckets[tenant] = _Bucket(tokens, now)
                wait = max(1, math.ceil((n - tokens) * 60 / limit))
                raise QuotaExceededError(
                    self.quota,
                    limit,
                    f"quota {self.quota}: tenant {tenant} may send {limit} {self.unit} per "
                    f"minute; try again in {wait} s",
                    wait,
                )
            self._buckets[tenant] = _Bucket(tokens - n, now)
            if len(self._buckets) > PRUNE_AT:
                self._prune(now)

    def _prune(self, now: float) -> None:
        for tenant, b in list(self._buckets.items()):
            limit = self.limit(tenant)
            if limit == 0 or b.tokens + (now - b.at) * limit / 60 >= limit:
                del self._buckets[tenant]


@dataclass
class JobQuota:
    """How many jobs a tenant may have. Creates in flight count too (`creating`): two creates
    at once cannot both pass at the last free place, and none waits for another."""

    default: int
    overrides: Mapping[str, int] = field(default_factory=dict)
    _creating: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def limit(self, tenant: str) -> int:
        return self.overrides.get(tenant, self.default)

    def check(self, tenant: str, count: int) -> None:
        """`count`: the tenant's jobs (and creates in flight). Raise if one more would pass the
        limit."""
        limit = self.limit(tenant)
        if limit and count >= limit:
            raise QuotaExceededError(
                JOBS,
                limit,
                f"quota {JOBS}: tenant {tenant} may have {limit} jobs; delete one, or ask the "
                "operator for a higher quota",
                None,
            )

    @contextmanager
    def creating(self, tenant: str, count: Callable[[int], int]) -> Iterator[None]:
        """Around one create: `count(limit)` says how many jobs the tenant has (counting up to
        `limit` is enough). Raises QuotaExceededError if there is no room for one more.

        The creates in flight are read before the jobs are counted: one that finishes in
        between was already in the view when it stopped counting as in flight, so none is
        missed (one may be counted twice: a refusal at the very limit, never an overshoot)."""
        limit = self.limit(tenant)
        if not limit:
            yield
            return
        with self._lock:
            others = self._creating.get(tenant, 0)
            self._creating[tenant] = others + 1
        try:
            self.check(tenant, count(limit) + others)
            yield
        finally:
            with self._lock:
                left = self._creating[tenant] - 1
                if left:
                    self._creating[tenant] = left
                else:
                    del self._creating[tenant]


@dataclass
class Quotas:
    jobs: JobQuota
    backfill: RateQuota
    triggers: RateQuota
    replays: RateQuota

    @classmethod
    def of(cls, settings: KadenceSettings, clock: Callable[[], float] = time.monotonic) -> Quotas:
        return cls(
            JobQuota(settings.api_quota_jobs, settings.api_quota_jobs_by_tenant),
            RateQuota(
                BACKFILL,
                settings.api_quota_backfill_per_minute,
                settings.api_quota_backfill_per_minute_by_tenant,
                clock,
                unit="occurrences",
            ),
            RateQuota(
                TRIGGERS,
                settings.api_quota_triggers_per_minute,
                settings.api_quota_triggers_per_minute_by_tenant,
                clock,
                unit="triggers",
            ),
            RateQuota(
                REPLAYS,
                settings.api_quota_replays_per_minute,
                settings.api_quota_replays_per_minute_by_tenant,
                clock,
                unit="replays",
            ),
        )
