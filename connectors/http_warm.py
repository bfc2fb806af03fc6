"""Connections opened before runs are due, so a burst of webhooks at the top of a second spends
its time sending requests, not in TCP (and TLS) handshakes with a receiver that is accepting
thousands of connections at once.

The worker reads executions up to the dispatch look-ahead (30 s) before they are due and tells
the target (`HttpCaller.prepare`, the `Prepares` protocol). For each (scheme, host, port,
tenant) the warmer counts the runs due in each second; from `lead` before a second it opens
connections to the addresses the tenant's policy allows (the same resolver and check a run
uses; a connection serves only runs of the tenant it was opened for, connectors/http_pool.py)
until the pool holds as many as the busiest second due within `lead` will run, at most `cap`:
one first, the rest once it connected. A refused address or a failed lookup opens nothing (the
run reports it); a failed connect leaves that endpoint alone for `BACKOFF_S`. Connections
nobody uses close after the pool's idle limit.

All of it runs on the targets' event loop (connectors/aio.py); `expect` only counts, under a
lock, on the worker's thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Coroutine
from urllib.parse import urlsplit

from connectors.aio import EventLoop
from connectors.http_dns import Resolver
from connectors.http_pool import IDLE_S, MAX_IDLE_PER_KEY, ConnectionPool, Key
from connectors.ssrf import AddressRefused

log = logging.getLogger(__name__)

Endpoint = tuple[str, str, int, str]
"""(scheme, host, port, tenant): the tenant because the policy's allow-lists are per tenant, and
a tenant's runs use only its own connections (connectors/http_pool.py)."""

LEAD_S = 2.0
"""Connections are opened this long before the second their runs are due in (default)."""
TICK_S = 0.1
OPENING_AT_ONCE = 64
"""Connects under way at once (a receiver's accept queue is not flooded ahead either)."""
CONNECT_TIMEOUT_S = 5.0
BACKOFF_S = 5.0
"""An address a connect failed to (or a host refused or not resolved) is not warmed again for
this long."""
RESOLVED_S = 1.0
"""An endpoint's checked address is looked up again after this long (each run still checks
its own)."""
SECONDS_TRACKED = 20_000
"""(endpoint, second) counts kept at most: past it new expectations are not counted (a run
then opens its own connection, as without warming)."""


class Warmer:
    def __init__(
        self,
        pool: ConnectionPool,
        resolver: Resolver,
        loop: EventLoop,
        lead_s: float = LEAD_S,
        cap: int = MAX_IDLE_PER_KEY,
    ) -> None:
        if lead_s >= IDLE_S:
            raise ValueError(f"lead_s must be under the pool's idle limit ({IDLE_S} s)")
        self.pool = pool
        self.resolver = resolver
        self.loop = loop
        self.lead_s = lead_s
        self.cap = cap
        self._lock = threading.Lock()
        self._due: dict[Endpoint, Counter[int]] = {}
        self._tracked = 0
        self._running = False
        self._opening: Counter[Endpoint] = Counter()
        self._resting: dict[Endpoint, float] = {}
        """Endpoints a connect failed to lately, and until when they are left alone."""
        self._keys: dict[Endpoint, tuple[list[Key], float]] = {}
        """Each endpoint's checked addresses lately (none: refused), and until when they hold."""
        self._gate: asyncio.Semaphore | None = None
        self._tasks: set[asyncio.Future[None]] = set()
        self.warmed = 0
        """Connections opened ahead so far (for tests and metrics)."""

    def expect(self, url: str, tenant: str, due_s: float) -> None:
        """A run to `url` of `tenant` is due at `due_s` (epoch seconds). Any thread; never
        raises on a URL it cannot use (the run reports that)."""
        if self.lead_s <= 0:
            return
        try:
            parts = urlsplit(url)
            scheme, host = parts.scheme, parts.hostname
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            return
        if scheme not in ("http", "https") or not host:
            return
        endpoint = (scheme, host, port, tenant)
        second = int(due_s)
        with self._lock:
            seconds = self._due.get(endpoint)
            if seconds is None or second not in seconds:
                if self._tracked >= SECONDS_TRACKED:
                    return
                self._tracked += 1
                seconds = self._due.setdefault(endpoint, Counter())
            seconds[second] += 1
            wake, self._running = not self._running, True
        if wake:
            self.loop.loop.call_soon_threadsafe(self._begin)

    def _begin(self) -> None:
        self._spawn(self._ticks())

    def _spawn(self, work: Coroutine[None, None, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._tasks.discard)

    async def _ticks(self) -> None:
        """Every TICK_S while runs are expected: open what the seconds due soon lack."""
        try:
            while (wanted := self.wanted(time.time())) is not None:
                for endpoint, want in wanted.items():
                    try:
                        keys = await self._keys_of(endpoint)
                    except Exception:  # a hint only: it must never stop the loop's runs
                        log.exception("could not warm connections to %s", endpoint[1])
                        continue
                    if keys:
                        self._fill(endpoint, keys, min(want, self.cap))
                await asyncio.sleep(TICK_S)
        except BaseException:
            with self._lock:
                self._running = False  # the next expectation starts the ticks again
            raise

    def wanted(self, now: float) -> dict[Endpoint, int] | None:
        """Connections each endpoint wants open now (its busiest second due within the lead,
        at most `cap`); seconds past are forgotten. None, and the ticks stop, once nothing is
        expected any more."""
        wanted: dict[Endpoint, int] = {}
        with self._lock:
            for endpoint, seconds in list(self._due.items()):
                for second in [s for s in seconds if s + 1 <= now]:
                    del seconds[second]
                    self._tracked -= 1
                if not seconds:
                    del self._due[endpoint]
                    continue
                soon = max((n for s, n in seconds.items() if s <= now + self.lead_s), default=0)
                if soon:
                    wanted[endpoint] = min(soon, self.cap)
            if not self._due:
                self._running = False
                return None
        return wanted

    async def _keys_of(self, endpoint: Endpoint) -> list[Key]:
        """The pool's keys for the addresses the policy allows `endpoint`'s tenant to reach now
        (kept for RESOLVED_S); none when refused or not resolved (tried again after
        BACKOFF_S)."""
        now = time.monotonic()
        known = self._keys.get(endpoint)
        if known is not None and known[1] > now:
            return known[0]
        if len(self._keys) > SECONDS_TRACKED:
            self._keys = {e: kept for e, kept in self._keys.items() if kept[1] > now}
        scheme, host, port, tenant = endpoint
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                addresses = await self.resolver.addresses(host, port, tenant)
        except (AddressRefused, OSError, ValueError, TimeoutError):
            self._keys[endpoint] = ([], now + BACKOFF_S)
            return []
        keys = [(scheme, host, port, address, tenant) for address in addresses]
        self._keys[endpoint] = (keys, now + RESOLVED_S)
        return keys

    def _fill(self, endpoint: Endpoint, keys: list[Key], want: int) -> None:
        if self._resting.get(endpoint, 0.0) > time.monotonic():
            return
        live = sum(self.pool.live.get(key, 0) for key in keys)
        missing = want - live - self._opening[endpoint]
        if not live:  # one connection first: a receiver that is down costs one try, not `want`
            missing = min(missing, 1 - self._opening[endpoint])
        for _ in range(max(0, missing)):
            self._opening[endpoint] += 1
            self._spawn(self._open(endpoint, keys))

    async def _open(self, endpoint: Endpoint, keys: list[Key]) -> None:
        if self._gate is None:
            self._gate = asyncio.Semaphore(OPENING_AT_ONCE)
        try:
            async with self._gate:
                if self._resting.get(endpoint, 0.0) > time.monotonic():
                    return
                try:
                    async with asyncio.timeout(CONNECT_TIMEOUT_S):
                        key, conn = await self.pool.open(keys)
                except Exception as exc:  # refused, unreachable, a bad certificate, too slow
                    log.info("could not warm a connection to %s: %r", endpoint[1], exc)
                    self._rest(endpoint)
                    return
        finally:
            self._opening[endpoint] -= 1
            if self._opening[endpoint] <= 0:
                del self._opening[endpoint]
        self.warmed += 1
        self.pool.give(key, conn, reusable=True)

    def _rest(self, endpoint: Endpoint) -> None:
        now = time.monotonic()
        if len(self._resting) > SECONDS_TRACKED:
            self._resting = {k: until for k, until in self._resting.items() if until > now}
        self._resting[endpoint] = now + BACKOFF_S
