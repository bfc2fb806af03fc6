"""Which partition a key lands on: Kafka's murmur2 partitioner, bit for bit.

Kadence chooses partitions itself (a job with a `concurrency_key` is routed by that key, not
its record key), so every producer must agree. We use the Java client's default so that Java,
librdkafka (`partitioner=murmur2_random`) and Kadence land the same key on the same partition.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


_WORDS = [struct.Struct(f"<{n}I") for n in range(64)]
"""Little-endian 32-bit words: the whole blocks of a key unpacked in one call."""


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2) as an unsigned 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n = length >> 2
    words = _WORDS[n].unpack_from(data) if n < 64 else struct.unpack_from(f"<{n}I", data)
    for word in words:
        k = (word * _M) & _MASK
        k ^= k >> 24
        h = ((h * _M) ^ (k * _M)) & _MASK  # masking commutes with the xor
    end = n << 2
    rest = length - end
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for(key: str | bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for `key` among `partitions`."""
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    data = key.encode() if isinstance(key, str) else key
    return (murmur2(data) & 0x7FFFFFFF) % partitions


def execution_route(tenant: str, job_id: str, shards: Mapping[str, int]) -> str:
    """The key that picks an execution's partition on the tenant-keyed executions topic: the
    tenant, or for a tenant spread over `n` shards (`KADENCE_TENANT_SHARDS`) the tenant and a
    shard chosen by its job id, so one job's executions (and their revocations) always share
    a partition while a wide tenant's jobs spread over several."""
    n = shards.get(tenant, 1)
    if n <= 1:
        return tenant
    return f"{tenant}~{(murmur2(job_id.encode()) & 0x7FFFFFFF) % n}"
