"""The test driver: Kadence's loops without a broker (an in-memory Kafka, a settable clock).

`Driver` (driver.py) is what tests use; `memkafka` is the in-memory cluster and its clients.
"""

from testkit.driver.driver import QUICK, START_MS, Driver
from testkit.driver.memkafka import (
    Cluster,
    MemoryClients,
    abort_error,
    fatal_error,
    retriable_error,
)

__all__ = [
    "QUICK",
    "START_MS",
    "Cluster",
    "Driver",
    "MemoryClients",
    "abort_error",
    "fatal_error",
    "retriable_error",
]
