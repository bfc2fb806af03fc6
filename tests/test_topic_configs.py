"""Provisioning on a cluster of several brokers: a topic just created may be unknown to the
broker that answers the config request for a moment (seen on the three-node cluster of
`make bench-cluster`, where provisioning failed with UNKNOWN_TOPIC_OR_PART)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kadence.provisioning import _topic_configs


class Admin:
    def __init__(self, unknown_for: int, error: int = KafkaError.UNKNOWN_TOPIC_OR_PART) -> None:
        self.calls = 0
        self.unknown_for = unknown_for
        self.error = error

    def describe_configs(self, resources: list[Any], request_timeout: float) -> dict[Any, Any]:
        self.calls += 1
        out: dict[Any, Any] = {}
        for r in resources:
            f: Future[dict[str, str]] = Future()
            if self.calls <= self.unknown_for:
                f.set_exception(KafkaException(KafkaError(self.error)))
            else:
                f.set_result({"cleanup.policy": "compact"})
            out[r] = f
        return out


def test_a_topic_not_yet_known_to_the_answering_broker_is_asked_again() -> None:
    admin = Admin(unknown_for=2)
    got = _topic_configs(admin, ["ns.schedules"], timeout_s=5)  # type: ignore[arg-type]
    assert got == {"ns.schedules": {"cleanup.policy": "compact"}}
    assert admin.calls == 3


def test_any_other_error_is_not_retried() -> None:
    admin = Admin(unknown_for=1, error=KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        _topic_configs(admin, ["ns.schedules"], timeout_s=5)  # type: ignore[arg-type]
    assert admin.calls == 1
