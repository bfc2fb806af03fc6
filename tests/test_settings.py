"""Settings come from KADENCE_* once, are frozen, and refuse nonsense."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kadence.kafka_options import kafka_config
from kadence.settings import DEFAULT_BOOTSTRAP, KadenceSettings


def test_defaults_point_at_the_local_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KADENCE_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("KADENCE_NAMESPACE", raising=False)
    s = KadenceSettings()
    assert s.bootstrap_servers == DEFAULT_BOOTSTRAP
    assert s.namespace == "kadence"


def test_environment_with_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KADENCE_NAMESPACE", "staging")
    monkeypatch.setenv("KADENCE_PARTITIONS", "48")
    s = KadenceSettings()
    assert (s.namespace, s.partitions) == ("staging", 48)


def test_frozen() -> None:
    s = KadenceSettings()
    with pytest.raises(ValidationError):
        s.namespace = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("namespace", "has space"),
        ("partitions", 0),
        ("bootstrap_servers", "  "),
        ("max_payload_bytes", 10 * 1024 * 1024),
    ],
)
def test_bad_values_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as err:
        KadenceSettings.model_validate({field: value})
    assert err.value.errors()[0]["loc"] == (field,)


def test_a_client_config_is_the_shared_options_then_the_roles() -> None:
    common = KadenceSettings(bootstrap_servers="b:1").kafka_common()
    config = kafka_config({**common, "security.protocol": "SSL"}, {"linger.ms": 2})
    assert config == {**common, "security.protocol": "SSL", "linger.ms": 2}
    assert kafka_config("h:9", {"group.id": "g"}) == {"bootstrap.servers": "h:9", "group.id": "g"}
