"""docs/configuration.md is generated from kadence/settings.py (`python -m apps.settings_doc >
docs/configuration.md`): current, and every setting has a description."""

from __future__ import annotations

from pathlib import Path

from apps.settings_doc import descriptions, document
from kadence.settings import KadenceSettings

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_every_setting_is_described() -> None:
    docs = descriptions()
    assert [n for n in KadenceSettings.model_fields if not docs.get(n)] == []


def test_the_document_is_current() -> None:
    assert DOC.read_text() == document(), (
        "docs/configuration.md is stale: python -m apps.settings_doc > docs/configuration.md"
    )


def test_a_run_of_fields_shares_the_docstring_after_it() -> None:
    docs = descriptions()
    assert docs["breaker_failure_ratio"] == docs["breaker_window_ms"] == docs["breaker_cooldown_ms"]
    assert "password" in docs["kafka_sasl_username"]
    assert docs["bootstrap_servers"] != docs["kafka_security_protocol"]
