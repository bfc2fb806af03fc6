"""`kadence token`: a fresh token and the hash that configures it, matching what the API checks."""

from __future__ import annotations

import pytest

from apps import cli
from apps.api.auth import token_hash


def test_token_prints_a_token_and_its_hash(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["token"]) == 0
    lines = dict(line.split(":", 1) for line in capsys.readouterr().out.splitlines() if ":" in line)
    token, digest = lines["token"].strip(), lines["hash"].strip()
    assert token.startswith("kdn_")
    assert len(token) > 40
    assert token_hash(token) == digest
    assert cli.main(["token"]) == 0
    assert token not in capsys.readouterr().out  # a new one each time
