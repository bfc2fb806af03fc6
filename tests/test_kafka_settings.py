"""Kafka client security and tuning from the settings (issue 18, item 1): what every client's
librdkafka config gets, and what is refused at start-up, naming the setting, never a secret."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from kadence.settings import KadenceSettings


def test_sasl_ssl_and_options_reach_every_clients_config(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    s = KadenceSettings(
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username="kadence",
        kafka_sasl_password=SecretStr("s3cret"),
        kafka_ssl_ca_location=ca,
        kafka_options={"socket.keepalive.enable": "true", "client.id": "mine"},
    )
    common = s.kafka_common()
    assert common["security.protocol"] == "SASL_SSL"
    assert (common["sasl.mechanism"], common["sasl.username"]) == ("SCRAM-SHA-512", "kadence")
    assert common["sasl.password"] == "s3cret"
    assert common["ssl.ca.location"] == str(ca)
    assert common["socket.keepalive.enable"] == "true"
    assert common["client.id"] == "mine"  # the pass-through comes last
    assert "s3cret" not in repr(s)


def test_defaults_are_plaintext_with_nothing_else() -> None:
    common = KadenceSettings().kafka_common()
    assert common["security.protocol"] == "PLAINTEXT"
    assert not any(k.startswith(("sasl.", "ssl.")) for k in common)


def test_what_cannot_work_is_refused_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KADENCE_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("KADENCE_KAFKA_SASL_USERNAME", "kadence")
    with pytest.raises(ValidationError, match="KADENCE_KAFKA_SASL_MECHANISM") as missing:
        KadenceSettings()
    assert "KADENCE_KAFKA_SASL_PASSWORD" in str(missing.value)
    monkeypatch.setenv("KADENCE_KAFKA_SASL_MECHANISM", "PLAIN")
    monkeypatch.setenv("KADENCE_KAFKA_SASL_PASSWORD", "hunter2")
    monkeypatch.setenv("KADENCE_KAFKA_SSL_CA_LOCATION", str(tmp_path / "nowhere.pem"))
    with pytest.raises(ValidationError, match="no file at") as no_file:
        KadenceSettings()
    assert "hunter2" not in str(no_file.value)
    monkeypatch.delenv("KADENCE_KAFKA_SSL_CA_LOCATION")
    monkeypatch.setenv("KADENCE_KAFKA_SASL_MECHANISM", "GSSAPI")  # not one Kadence supports
    with pytest.raises(ValidationError, match="kafka_sasl_mechanism"):
        KadenceSettings()
    monkeypatch.setenv("KADENCE_KAFKA_SASL_MECHANISM", "PLAIN")
    key = tmp_path / "client.key"
    key.write_text("k")
    monkeypatch.setenv("KADENCE_KAFKA_SSL_KEY_LOCATION", str(key))
    with pytest.raises(ValidationError, match="go together"):
        KadenceSettings()
