"""Reading a batch without waiting for it to fill.

librdkafka's `consume(n, timeout)` returns once n records have come or the timeout has passed:
with fewer waiting, it holds on to them for the whole timeout (measured against the broker:
one record waiting, `consume(5000, 1.0)` returned it after 1.0 s). A loop that reads with
`consume(500, 0.2)` so sees a lone record up to 0.2 s late. `ready` takes what is there, or
waits for the first record only, then takes what else has come. `usable` tells a record
from the errors a batch may carry.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import KafkaError

from streams.kafkaio.ports import ConsumerLike, MessageLike

log = logging.getLogger(__name__)


def ready(consumer: ConsumerLike, limit: int, timeout: float) -> Sequence[MessageLike]:
    """Up to `limit` records: those waiting now, else the first to come within `timeout` and
    any that came with it. Never waits once it has one."""
    msgs = consumer.consume(limit, 0)
    if msgs or timeout <= 0:
        return msgs
    first = consumer.consume(1, timeout)
    if not first or limit <= 1:
        return first
    return [*first, *consumer.consume(limit - 1, 0)]


def usable(msg: MessageLike) -> bool:
    """`msg` is a record, not an error; an error other than the end of a partition is logged."""
    err = msg.error()
    if err is None:
        return True
    if err.code() != KafkaError._PARTITION_EOF:
        log.warning("consumer error: %s", err)
    return False
