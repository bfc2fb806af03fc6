"""Kadence routes records itself; it must agree with Kafka's Java default partitioner."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kadence.partitioning import murmur2, partition_for

# Computed with org.apache.kafka.common.utils.Utils.murmur2 from kafka-clients 4.1.2.
JAVA_MURMUR2 = {
    b"": 275646681,
    b"a": -1563381124,
    b"ab": 316155434,
    b"abc": 479470107,
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"acme/nightly-report": -608833011,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
}


@pytest.mark.parametrize(("data", "signed"), JAVA_MURMUR2.items())
def test_murmur2_matches_the_java_client(data: bytes, signed: int) -> None:
    assert murmur2(data) == signed & 0xFFFFFFFF


def _murmur2_byte_by_byte(data: bytes) -> int:
    """Utils.murmur2 transcribed literally (a byte at a time): the reference for the fast one."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = data[length - length % 4 :]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if len(tail) >= 1:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


@given(st.binary(max_size=600))
def test_murmur2_word_at_a_time_equals_byte_at_a_time(data: bytes) -> None:
    """Whole blocks are unpacked in one call (keys up to and past 256 bytes)."""
    assert murmur2(data) == _murmur2_byte_by_byte(data)


def test_partition_matches_java_to_positive_modulo() -> None:
    # Utils.toPositive(murmur2(key)) % 12, also from kafka-clients 4.1.2
    expected = {"": 9, "a": 4, "ab": 2, "abc": 3, "21": 0, "foobar": 6, "acme/nightly-report": 5}
    assert {k: partition_for(k, 12) for k in expected} == expected


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="partitions"):
        partition_for("x", 0)


def test_a_wide_tenant_spreads_over_shards_and_a_job_keeps_its_partition() -> None:
    from kadence.partitioning import execution_route  # noqa: PLC0415

    assert execution_route("acme", "job-1", {}) == "acme"
    assert execution_route("acme", "job-1", {"other": 8}) == "acme"
    routes = {execution_route("wide", f"job-{i}", {"wide": 4}) for i in range(200)}
    assert routes == {"wide~0", "wide~1", "wide~2", "wide~3"}
    assert execution_route("wide", "job-7", {"wide": 4}) == execution_route(
        "wide", "job-7", {"wide": 4}
    )
    partitions = {partition_for(r, 12) for r in routes}
    assert len(partitions) > 1  # more than one partition takes the tenant's work
