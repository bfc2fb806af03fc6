"""Tokens configured (kadence/api_tokens.py) and managed without a restart
(apps/api/token_book.py): the two forms of an entry, the file read again when it changes (a
rotation with no restart), a bad file keeping the tokens the API had, and the hostile
configurations refused at start with a clear reason that never shows a token's hash."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from apps import cli
from apps.api.token_book import TokenBook, TokenFileError, token_hash
from kadence.api_tokens import MAX_FILE_BYTES, parse_tokens
from kadence.settings import KadenceSettings


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def write(path: Path, entries: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries))
    tmp.replace(path)  # as an operator (or a secret mount) swaps it


def test_the_first_form_keeps_every_scope_and_is_named_by_its_hash_never_the_token() -> None:
    digest = token_hash("kdn_secret")
    book = TokenBook({digest: "acme"})
    token = book.get(digest)
    assert token is not None
    assert (token.tenant, set(token.scopes)) == ("acme", {"read", "operate", "manage"})
    assert token.actor == f"token:sha256:{digest[:12]}"
    assert "kdn_secret" not in token.actor


def test_a_rotated_file_is_read_without_a_restart(tmp_path: Path) -> None:
    path, clock = tmp_path / "tokens.json", Clock()
    old, new = token_hash("old"), token_hash("new")
    write(path, {old: {"name": "ci", "tenant": "acme", "scopes": ["read"]}})
    book = TokenBook({token_hash("env"): "globex"}, path, clock)
    assert book.get(old) is not None and book.get(new) is None
    write(path, {new: {"name": "ci", "tenant": "acme", "scopes": ["read", "operate"]}})
    clock.now = 0.5
    assert book.get(new) is None  # checked at most once a second
    clock.now = 1.0
    token = book.get(new)
    assert token is not None and token.scopes == {"read", "operate"}
    assert book.get(old) is None  # revoked
    assert book.get(token_hash("env")) is not None  # the setting's tokens stay


@pytest.mark.parametrize(
    "bad",
    [
        "{not json",
        '{"' + "0" * 64 + '": {"name": "x", "tenant": "acme", "scopes": [1]}}',
        '{"' + "0" * 64 + '": {"name": "x", "tenant": "acme", "scopes": ["root"]}}',
        '{"' + "0" * 64 + '": "kadence-api"}',
        '{"short": "acme"}',
        "",
    ],
    ids=["not-json", "non-string-scope", "unknown-scope", "reserved-tenant", "bad-hash", "empty"],
)
def test_a_bad_file_keeps_the_tokens_the_api_had_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad: str
) -> None:
    path, clock = tmp_path / "tokens.json", Clock()
    kept = token_hash("kept")
    write(path, {kept: "acme"})
    book = TokenBook({}, path, clock)
    path.write_text(bad)
    clock.now = 2
    with caplog.at_level(logging.ERROR):
        assert book.get(kept) is not None
    assert "keeping the previous tokens" in caplog.text
    path.unlink()  # gone: still kept
    clock.now = 4
    assert book.get(kept) is not None
    with pytest.raises(TokenFileError, match="KADENCE_API_TOKENS_FILE"):
        TokenBook({}, path)  # at start it must be there and valid


def test_a_file_may_not_take_a_name_or_hash_the_setting_has(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    write(path, {token_hash("b"): {"name": "ci", "tenant": "acme", "scopes": ["read"]}})
    with pytest.raises(TokenFileError, match="'ci' is also in KADENCE_API_TOKENS"):
        TokenBook({token_hash("a"): {"name": "ci", "tenant": "acme", "scopes": ["read"]}}, path)


def test_hostile_files_are_refused_without_showing_a_hash(tmp_path: Path) -> None:
    digest = token_hash("t")
    cases = {
        "huge": " " * (MAX_FILE_BYTES + 1),
        "name": json.dumps({digest: {"name": "n" * 10_000, "tenant": "acme", "scopes": ["read"]}}),
        "extra": json.dumps(
            {digest: {"name": "a", "tenant": "acme", "scopes": ["read"], "admin": True}}
        ),
        "dup": json.dumps({digest: {"name": "a", "tenant": "acme", "scopes": ["read", "read"]}}),
        "names": json.dumps(
            {
                digest: {"name": "a", "tenant": "acme", "scopes": ["read"]},
                token_hash("u"): {"name": "a", "tenant": "globex", "scopes": ["read"]},
            }
        ),
        "list": "[1, 2]",
        "no-scopes": json.dumps({digest: {"name": "a", "tenant": "acme", "scopes": []}}),
    }
    for what, text in cases.items():
        with pytest.raises(ValueError, match=r"\w") as refused:
            parse_tokens(text)
        assert digest not in str(refused.value), what
        assert len(str(refused.value)) < 500, what


def test_bad_settings_fail_at_start_naming_the_setting() -> None:
    for tokens in (
        {"not-a-hash": "acme"},
        {token_hash("t"): {"name": "a", "tenant": "*x", "scopes": ["read"]}},
        {token_hash("t"): {"name": "a b", "tenant": "acme", "scopes": ["read"]}},
    ):
        with pytest.raises(ValidationError, match="api_tokens"):
            KadenceSettings.model_validate({"api_tokens": tokens})
    with pytest.raises(ValidationError, match="api_jwt_issuer and api_jwt_audience"):
        KadenceSettings(api_jwks_url="https://idp.example/jwks")
    with pytest.raises(ValidationError, match="http or https"):
        KadenceSettings(api_jwks_url="file:///etc/passwd", api_jwt_issuer="i", api_jwt_audience="a")
    with pytest.raises(ValidationError):
        KadenceSettings.model_validate({"api_jwt_algorithms": ["HS256"]})
    with pytest.raises(ValidationError):
        KadenceSettings.model_validate({"api_jwt_algorithms": ["none"]})


def test_kadence_token_makes_a_named_scoped_entry_the_api_takes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["token", "--tenant", "acme", "--name", "oncall", "--scope", "read"]
    assert cli.main([*argv, "--scope", "operate", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    book = TokenBook(KadenceSettings.model_validate({"api_tokens": made["entry"]}).api_tokens)
    token = book.get(token_hash(made["token"]))
    assert token is not None
    assert (token.name, token.tenant, set(token.scopes)) == ("oncall", "acme", {"read", "operate"})
    assert cli.main(["token", "--tenant", "acme", "--name", "on call"]) == 3
    assert "name" in capsys.readouterr().err
    assert cli.main(["token", "--name", "x"]) == 3  # a named token needs its tenant
