"""Rate limits per destination: when a due run may start without calling its destination more
often than its target's `rate_limit` allows (docs/execution.md, "Rate limits per destination").

A destination is opaque here (`Lane.key`): `destination_of` derives it, with its limit, from an
execution (today the tenant and the HTTP target's scheme, host and port; a named connection
with a limit of its own would be another branch there). Each destination has a generic cell rate
algorithm's schedule: a run may start `interval` after the previous one, or up to `burst - 1`
intervals earlier after a quiet spell. A start is taken when the run is handed out to start
(`Throttle.take`), never reserved ahead, so a worker that stalls (a slow commit, a tenant at its
cap) cannot release a pile of reserved starts at once afterwards: at most `burst`. The runs
that must wait queue per destination in due order (streams/worker/lanes.py).

The limit holds per worker. The executions topic is keyed by tenant, so one worker sees all of a
tenant's runs and its limit is the whole limit; a tenant spread over `n` shards
(`KADENCE_TENANT_SHARDS`) gets a limit of `1/n` per shard (its burst too, at least 1), each
shard's partition its own schedule, so the shards never exceed the limit together wherever they
run (and a destination called by one shard's jobs only gets that shard's share).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from kadence.models import ExecutionRequested, RateLimit

SWEEP_AT = 4_096
"""Schedules kept before the idle ones are forgotten (an idle schedule is a fresh one)."""
_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class Lane:
    """A destination and the limit its runs keep: `per_second` starts on average, `burst` of
    them at once after a quiet spell."""

    key: tuple[str, ...]
    per_second: float
    burst: int


@lru_cache(maxsize=4_096)
def _host(url: str) -> tuple[str, str, str]:
    parts = urlsplit(url)
    port = parts.port or _PORTS.get(parts.scheme, 0)
    return parts.scheme, (parts.hostname or "").lower(), str(port)


def destination_of(
    ex: ExecutionRequested, partition: int = 0, shards: Mapping[str, int] | None = None
) -> Lane | None:
    """The destination `ex` calls and the limit it keeps there, or None when its target has no
    limit (the common case costs one attribute read): the tenant's connection the target
    names, else the tenant's scheme, host and port of its URL. `partition`: where it was read;
    `shards`: tenant -> shards (`tenant_shards`), which divide the limit."""
    limit: RateLimit | None = getattr(ex.target, "rate_limit", None)
    if limit is None:
        return None
    connection: str | None = getattr(ex.target, "connection", None)
    if connection is not None:  # the connection is the destination, whatever its URLs' hosts
        key: tuple[str, ...] = (ex.tenant, "connection", connection)
    else:
        key = (ex.tenant, *_host(getattr(ex.target, "url", "")))
    n = (shards or {}).get(ex.tenant, 1)
    if n <= 1:
        return Lane(key, limit.per_second, limit.burst)
    return Lane((*key, str(partition)), limit.per_second / n, max(1, limit.burst // n))


@dataclass(slots=True)
class _Schedule:
    interval_ms: float
    burst: int
    next_ms: float
    """The theoretical start of the next run: one may start at `next_ms - (burst - 1) *
    interval_ms` at the earliest."""


class Throttle:
    """Every destination's schedule in one worker. Time is passed in (milliseconds)."""

    def __init__(self) -> None:
        self._schedules: dict[tuple[str, ...], _Schedule] = {}

    def take(self, lane: Lane, now_ms: int) -> int:
        """Start a run on `lane` at `now_ms` if the limit lets it (returns `now_ms`), or say
        when it may at the earliest (a later time; nothing taken). A destination named with
        different limits keeps the lowest while its schedule is busy."""
        interval = 1000.0 / lane.per_second
        sched = self._schedules.get(lane.key)
        if sched is None or sched.next_ms <= now_ms:  # quiet: the limit asked now applies
            if sched is None and len(self._schedules) >= SWEEP_AT:
                self.sweep(now_ms)
            sched = _Schedule(interval, lane.burst, now_ms)
            self._schedules[lane.key] = sched
        elif interval > sched.interval_ms or lane.burst < sched.burst:
            sched.interval_ms = max(sched.interval_ms, interval)
            sched.burst = min(sched.burst, lane.burst)
        earliest = math.ceil(sched.next_ms - (sched.burst - 1) * sched.interval_ms)
        if earliest > now_ms:
            return earliest
        sched.next_ms = max(sched.next_ms, now_ms) + sched.interval_ms
        return now_ms

    def earliest(self, lane: Lane, now_ms: int) -> int:
        """When `take` would start a run on `lane` at the earliest (`now_ms` at the soonest)."""
        sched = self._schedules.get(lane.key)
        if sched is None:
            return now_ms
        burst = min(sched.burst, lane.burst)
        interval = max(sched.interval_ms, 1000.0 / lane.per_second)
        return max(now_ms, math.ceil(sched.next_ms - (burst - 1) * interval))

    def sweep(self, now_ms: int) -> None:
        """Forget the schedules of destinations quiet since their last run's interval."""
        self._schedules = {k: s for k, s in self._schedules.items() if s.next_ms > now_ms}

    def __len__(self) -> int:
        return len(self._schedules)
