"""Faults a test arms on the in-memory cluster: the next N calls of a method fail, or hang.

Errors are real `confluent_kafka.KafkaError`s, so the production error handling
(streams/kafkaio/errors.py) classifies them as it would a broker's: retriable, requires
abort, or fatal. A hang blocks the calling thread until the test releases it, which is how a
librdkafka call that ignores its timeout looks from the caller.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaError


def retriable_error(reason: str = "injected: coordinator not available") -> KafkaError:
    """A call that has not failed: making it again resumes it (a broker outage, a timeout)."""
    return KafkaError(KafkaError._TIMED_OUT, reason, retriable=True)


def abort_error(reason: str = "injected: transaction must be aborted") -> KafkaError:
    """The transaction cannot commit; the producer is fine once it aborts."""
    return KafkaError(KafkaError._STATE, reason, txn_requires_abort=True)


def fatal_error(reason: str = "injected: producer fenced") -> KafkaError:
    """The producer is unusable: only a new one goes on."""
    return KafkaError(KafkaError._FENCED, reason, fatal=True)


@dataclass
class Hang:
    """A call held until `release()`; `entered` is set once a call is held."""

    entered: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()


@dataclass
class _Armed:
    method: str
    client: str | None
    times: int
    error: KafkaError | None = None
    hang: Hang | None = None
    action: Callable[[], object] | None = None


class Faults:
    """What the next calls of a method do instead of their work; every call is counted."""

    def __init__(self) -> None:
        self._armed: list[_Armed] = []
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        """Calls by method name, whoever made them."""
        self._hangs: list[Hang] = []

    def fail(
        self, method: str, error: KafkaError, *, times: int = 1, client: str | None = None
    ) -> None:
        """The next `times` calls of `method` (by the client named `client`, a client id or
        transactional id, or by any client) raise `KafkaException(error)`; a consumer's
        `consume` hands the error back as a message instead, as librdkafka does."""
        with self._lock:
            self._armed.append(_Armed(method, client, times, error=error))

    def hang(self, method: str, *, times: int = 1, client: str | None = None) -> Hang:
        """The next `times` calls of `method` block until the returned hang is released; then
        they do their work (a producer fenced meanwhile then raises its fatal error)."""
        hang = Hang()
        with self._lock:
            self._armed.append(_Armed(method, client, times, hang=hang))
            self._hangs.append(hang)
        return hang

    def on(
        self,
        method: str,
        action: Callable[[], object],
        *,
        times: int = 1,
        client: str | None = None,
    ) -> None:
        """Run `action()` as the next `times` calls of `method` begin, before they do their
        work (and before an armed failure or hang): a rebalance right before offsets are sent,
        time passing during a retried commit."""
        with self._lock:
            self._armed.append(_Armed(method, client, times, action=action))

    def clear(self) -> None:
        """Disarm everything and release every hang (a test's teardown)."""
        with self._lock:
            self._armed.clear()
            hangs, self._hangs = self._hangs, []
        for hang in hangs:
            hang.release()

    def check(self, method: str, client: str) -> KafkaError | None:
        """Called by the fake clients at the start of every call: waits out an armed hang,
        and returns the error the call must fail with, if one is armed."""
        with self._lock:
            self.calls[method] += 1
            matching = [a for a in self._armed if a.method == method and a.client in (None, client)]
            actions = [a for a in matching if a.action is not None]
            armed = next((a for a in matching if a.action is None), None)
            for used in [*actions, *([armed] if armed else [])]:
                used.times -= 1
                if used.times == 0:
                    self._armed.remove(used)
        for a in actions:
            assert a.action is not None
            a.action()
        if armed is None:
            return None
        if armed.hang is not None:
            armed.hang.entered.set()
            armed.hang.released.wait()
        return armed.error
