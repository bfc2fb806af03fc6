"""Transactional producer errors, and calls that survive a broker outage.

librdkafka's rule: a transactional call that fails with a *retriable* error (the broker or the
coordinator is unreachable, the call timed out) has not failed; calling it again resumes it.
One that *requires abort* must be followed by `abort_transaction`; a *fatal* one leaves the
producer unusable (the process must restart). These helpers keep calling while the error is
retriable, so an outage is a pause, not a crash.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException

log = logging.getLogger(__name__)
RETRY_PAUSE_S = 0.5
OFFSETS_CALL_TIMEOUT_S = 5.0
"""The timeout given to send_offsets_to_transaction (a retriable timeout is simply retried)."""
HUNG_AFTER_S = 15.0
"""A transactional call given `OFFSETS_CALL_TIMEOUT_S` that has not returned after this long
ignores its timeout (the librdkafka hang below): its producer is replaced. The chaos suite's
network cuts hit it; a per-attempt limit finds it in 15 s instead of after every retry."""


def error_of(exc: KafkaException) -> KafkaError | None:
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else None


def retriable(exc: KafkaException) -> bool:
    err = error_of(exc)
    return err is not None and err.retriable() and not err.fatal()


def fatal(exc: KafkaException) -> bool:
    """The producer is unusable (fenced by a newer epoch, e.g. after an outage longer than the
    transaction timeout): only a new producer continues."""
    err = error_of(exc)
    return err is not None and err.fatal()


def requires_abort(exc: KafkaException) -> bool:
    err = error_of(exc)
    return err is not None and err.txn_requires_abort()


def until_done(
    call: Callable[[], None],
    what: str,
    *,
    between: Callable[[], None] = lambda: None,
    give_up_after_s: float | None = None,
    attempt_timeout_s: float | None = None,
) -> None:
    """`call()` again while it fails retriably (`between()` runs in the pauses); raises the
    first non-retriable error, or the last one after `give_up_after_s`. With
    `attempt_timeout_s`, each attempt runs under `within` (ProducerStuckError if one hangs)."""
    started = time.monotonic()
    while True:
        try:
            if attempt_timeout_s is None:
                call()
            else:
                within(call, attempt_timeout_s, what)
            return
        except KafkaException as exc:
            late = give_up_after_s is not None and time.monotonic() - started > give_up_after_s
            if not retriable(exc) or late:
                raise
            log.warning("%s: %s; retrying (the broker may be restarting)", what, error_of(exc))
            between()
            time.sleep(RETRY_PAUSE_S)


class ProducerStuckError(Exception):
    """A transactional call did not return in time (librdkafka can hang in
    send_offsets_to_transaction after a coordinator moves or a broker restarts, ignoring its
    timeout: librdkafka issues 5456 and 5511). The producer must be replaced."""


def within(call: Callable[[], None], seconds: float, what: str) -> None:
    """Run `call` on a helper thread; raise ProducerStuckError if it has not returned in
    `seconds` (the thread and its producer are abandoned), or re-raise what it raised."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, name=f"txn-{what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        raise ProducerStuckError(f"{what} did not return within {seconds:.0f} s")
    if outcome[0] is not None:
        raise outcome[0]
