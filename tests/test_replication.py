"""Replication of the topics Kadence creates, from the settings or the cluster's size (issue
18, item 2): 3 copies with 2 in sync from three brokers up, never more copies than brokers,
and fewer than the cluster allows only when the settings say so."""

from __future__ import annotations

from typing import Any

import pytest

from kadence.errors import TopicError
from kadence.replication import Replication, replication_for, warn_under_replicated
from kadence.settings import KadenceSettings


@pytest.mark.parametrize(
    ("brokers", "want"),
    [
        (1, Replication(1, 1)),
        (2, Replication(2, 1)),
        (3, Replication(3, 2)),
        (9, Replication(3, 2)),
    ],
)
def test_the_default_follows_the_cluster_up_to_three_copies(
    brokers: int, want: Replication
) -> None:
    assert replication_for(KadenceSettings(), brokers) == want


def test_settings_choose_within_what_the_cluster_can_hold() -> None:
    five = KadenceSettings(replication_factor=5, min_insync_replicas=3)
    assert replication_for(five, 6) == Replication(5, 3)
    with pytest.raises(TopicError, match=r"needs 5 brokers .* has 3 broker"):
        replication_for(five, 3)
    with pytest.raises(TopicError, match="above the replication factor 3"):
        replication_for(KadenceSettings(replication_factor=3, min_insync_replicas=4), 3)


def test_fewer_copies_than_the_cluster_allows_are_refused_unless_allowed() -> None:
    one = KadenceSettings(replication_factor=1)
    assert replication_for(one, 1) == Replication(1, 1)  # a single broker: nothing better
    with pytest.raises(TopicError, match="KADENCE_ALLOW_UNDER_REPLICATED=true"):
        replication_for(one, 3)
    allowed = KadenceSettings(replication_factor=1, allow_under_replicated=True)
    assert replication_for(allowed, 3) == Replication(1, 1)


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KADENCE_REPLICATION_FACTOR", "2")
    monkeypatch.setenv("KADENCE_MIN_INSYNC_REPLICAS", "2")
    monkeypatch.setenv("KADENCE_ALLOW_UNDER_REPLICATED", "true")
    s = KadenceSettings()
    assert replication_for(s, 5) == Replication(2, 2)


def test_an_existing_topic_with_too_few_copies_is_used_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Part:
        def __init__(self, copies: int) -> None:
            self.replicas = list(range(copies))

    class Meta:
        def __init__(self, copies: int) -> None:
            self.partitions = {0: Part(copies), 1: Part(copies)}

    existing: dict[str, Any] = {"ns.schedules": Meta(1), "ns.history": Meta(3)}
    warn_under_replicated(existing, ["ns.schedules", "ns.history", "ns.absent"], 3)
    [warning] = caplog.records
    assert "ns.schedules has 1 copy of each partition on a cluster of 3 brokers" in warning.message
