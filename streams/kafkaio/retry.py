"""Client calls that outlive a leader election or a broker restart.

A metadata or offset query that meets a partition whose leader is being elected (a topic just
created, a broker restarting) fails with NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE,
OFFSET_NOT_AVAILABLE (the new leader's high watermark not caught up: a standby's watermark
query killed a scheduler so when a broker of three was killed), a timeout or a transport
error. Those pass within seconds, so the call is simply made again,
with a log line, until it succeeds or `give_up_after_s` has gone by. librdkafka does not flag
every one of them retriable (a watermark query's NOT_LEADER is not), so they are named here.
Any other error is raised at once: it is a real problem, not a passing one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

log = logging.getLogger(__name__)
T = TypeVar("T")

PASSING_CODES = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.OFFSET_NOT_AVAILABLE,  # a new leader's high watermark not caught up yet
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,  # the client's metadata just after a broker restart:
        KafkaError._UNKNOWN_TOPIC,  # a standby's watermark query killed a reaper so (chaos)
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._WAIT_COORD,
    }
)
"""Errors of a cluster that is electing leaders or restarting: they pass."""
GIVE_UP_AFTER_S = 120.0
PAUSE_S = 0.5


def passing(exc: BaseException) -> bool:
    """True for a Kafka error that goes away by itself (see `PASSING_CODES`)."""
    if not isinstance(exc, KafkaException):
        return False
    err = exc.args[0] if exc.args else None
    if not isinstance(err, KafkaError) or err.fatal():
        return False
    return err.code() in PASSING_CODES or bool(err.retriable())


def retrying(
    call: Callable[[], T],
    what: str,
    *,
    give_up_after_s: float = GIVE_UP_AFTER_S,
    sleep: Callable[[float], None] | None = None,
) -> T:
    """`call()`, made again while it fails with a passing error, for up to `give_up_after_s`."""
    deadline = time.monotonic() + give_up_after_s
    while True:
        try:
            return call()
        except KafkaException as exc:
            if not passing(exc) or time.monotonic() > deadline:
                raise
            log.warning("%s: %s; retrying (a leader election or a broker restart)", what, exc)
            (sleep or time.sleep)(PAUSE_S)
