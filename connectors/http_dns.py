"""Host names of HTTP and SQS targets to the addresses a tenant's runs may connect to.

- Lookups are asynchronous (c-ares, through aiodns): there is no thread pool for one tenant's
  slow names to fill. Lookups of one name at once are one lookup; a tenant has at most
  `per_tenant` names being looked up at once (its others wait, nobody else's).
- Answers are kept for their TTL, held between `ttl_min_s` and `ttl_max_s` (a TTL of 0 would
  look a name up for every run; a day-long one would keep a moved receiver's old address); a
  failed lookup is kept `ttl_min_s` (a name that does not resolve is not asked for again by
  every run of a burst).
- The caller bounds the wait with its run's deadline; a lookup it stops waiting for still
  completes (within `lookup_timeout_s`) and serves the runs after it.
- Every address of the answer is checked against the tenant's address policy
  (connectors/ssrf.py): a name with any address the tenant may not reach is refused whole, and
  the connection goes only to an address checked (connectors/http_pool.py tries each in turn).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiodns

from connectors.ssrf import AddressPolicy
from kadence.target_allow import IPAddress

Lookup = Callable[[str], Awaitable[list[tuple[IPAddress, float]]]]
"""A name's addresses, each with its TTL in seconds; OSError when it has none."""

TTL_MIN_S = 5.0
TTL_MAX_S = 300.0
PER_TENANT = 32
"""Names of one tenant being looked up at once."""
LOOKUP_TIMEOUT_S = 10.0
NAMES_KEPT = 10_000


class CaresLookup:
    """`Lookup` by c-ares (the system's resolv.conf and hosts file), on the running loop."""

    def __init__(self, timeout_s: float = 2.0, tries: int = 2) -> None:
        self.timeout_s, self.tries = timeout_s, tries
        self._resolver: aiodns.DNSResolver | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, host: str) -> list[tuple[IPAddress, float]]:
        loop = asyncio.get_running_loop()
        if self._resolver is None or self._loop is not loop:
            self._resolver = aiodns.DNSResolver(loop=loop, timeout=self.timeout_s, tries=self.tries)
            self._loop = loop
        try:
            answer = await self._resolver.getaddrinfo(host, type=socket.SOCK_STREAM)
        except aiodns.error.DNSError as exc:
            why = exc.args[1] if len(exc.args) > 1 else str(exc)
            raise OSError(f"cannot resolve {host}: {why}") from None
        return [(_address(node.addr[0]), float(node.ttl)) for node in answer.nodes]


@functools.lru_cache(maxsize=NAMES_KEPT)
def _literal(host: str) -> tuple[IPAddress, ...]:
    """`host` as an address if it is one (parsed once: a job's runs send to the same host),
    else () (a name to resolve)."""
    try:
        return (ipaddress.ip_address(host),)
    except ValueError:
        return ()


def _address(raw: bytes | str) -> IPAddress:
    text = raw.decode() if isinstance(raw, bytes) else raw
    return ipaddress.ip_address(text.split("%", 1)[0])  # no IPv6 zone


@dataclass(frozen=True, slots=True)
class _Kept:
    until: float
    addresses: tuple[IPAddress, ...]
    error: str | None = None


class Resolver:
    def __init__(
        self,
        policy: AddressPolicy,
        lookup: Lookup | None = None,
        *,
        ttl_min_s: float = TTL_MIN_S,
        ttl_max_s: float = TTL_MAX_S,
        per_tenant: int = PER_TENANT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self.lookup: Lookup = lookup or CaresLookup()
        self.ttl_min_s, self.ttl_max_s = ttl_min_s, ttl_max_s
        self.per_tenant = per_tenant
        self.clock = clock
        self.lookups = 0
        """Lookups made so far (for tests and metrics)."""
        self._kept: dict[str, _Kept] = {}
        self._pending: dict[str, asyncio.Future[_Kept]] = {}
        self._gates: dict[str, asyncio.Semaphore] = {}

    async def addresses(self, host: str, port: int, tenant: str) -> tuple[IPAddress, ...]:
        """Every address of `host` (an address: itself), each one a target of `tenant` may
        reach on `port`. Raises AddressRefused (ssrf) or OSError (no answer)."""
        found = _literal(host) or await self._answer(host, tenant)
        self.policy.check_all(host, port, found, tenant)
        return found

    async def _answer(self, host: str, tenant: str) -> tuple[IPAddress, ...]:
        kept = self._fresh(host)
        if kept is None:
            pending = self._pending.get(host)
            if pending is None:
                gate = self._gates.get(tenant)
                if gate is None:
                    gate = self._gates[tenant] = asyncio.Semaphore(self.per_tenant)
                async with gate:
                    kept = self._fresh(host)
                    if kept is None:
                        pending = self._pending.get(host) or self._start(host)
                        kept = await asyncio.shield(pending)
                if len(self._gates) > NAMES_KEPT:
                    self._gates = {t: g for t, g in self._gates.items() if g.locked()}
            else:
                kept = await asyncio.shield(pending)
        if kept.error is not None:
            raise OSError(kept.error)
        return kept.addresses

    def _fresh(self, host: str) -> _Kept | None:
        kept = self._kept.get(host)
        return kept if kept is not None and kept.until > self.clock() else None

    def _start(self, host: str) -> asyncio.Future[_Kept]:
        future = asyncio.ensure_future(self._look_up(host))
        self._pending[host] = future
        return future

    async def _look_up(self, host: str) -> _Kept:
        self.lookups += 1
        try:
            async with asyncio.timeout(LOOKUP_TIMEOUT_S):
                answer = await self.lookup(host)
            if not answer:
                raise OSError(f"cannot resolve {host}: no address")
            ttl = min(max(min(t for _, t in answer), self.ttl_min_s), self.ttl_max_s)
            kept = _Kept(self.clock() + ttl, tuple(dict.fromkeys(a for a, _ in answer)))
        except TimeoutError:
            why = f"cannot resolve {host}: no answer within {LOOKUP_TIMEOUT_S:.0f} s"
            kept = _Kept(self.clock() + self.ttl_min_s, (), why)
        except OSError as exc:
            kept = _Kept(self.clock() + self.ttl_min_s, (), str(exc))
        finally:
            self._pending.pop(host, None)
        if len(self._kept) >= NAMES_KEPT:
            now = self.clock()
            self._kept = {h: k for h, k in self._kept.items() if k.until > now}
            while len(self._kept) >= NAMES_KEPT:  # all fresh: the oldest half goes
                for name in list(self._kept)[: NAMES_KEPT // 2]:
                    del self._kept[name]
        self._kept[host] = kept
        return kept
