"""Issue 28, item 7: `make run`'s development token (.run/dev-token) is an API credential. It
must never be readable by another user of the machine, not even for the instant between
writing it and narrowing its mode, whatever the umask."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from apps import stack
from apps.api.auth import token_hash
from kadence.settings import KadenceSettings


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / ".run" / "dev-token"
    monkeypatch.setattr(stack, "DEV_TOKEN_FILE", path)
    old = os.umask(0)  # the worst case: nothing masked off what the file is created with
    try:
        yield path
    finally:
        os.umask(old)


def test_the_token_file_is_created_private_not_narrowed_after(
    token_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With every later chmod disabled, what is left is the mode the file was created with.
    monkeypatch.setattr(os, "fchmod", lambda fd, mode: None)
    monkeypatch.setattr(os, "chmod", lambda *args, **kwargs: None)
    monkeypatch.setattr(Path, "chmod", lambda self, mode, **kwargs: None)
    settings = stack.dev_tokens(KadenceSettings())
    assert mode(token_file) == 0o600
    token = token_file.read_text().strip()
    assert settings.api_tokens == {token_hash(token): "demo"}


def test_the_token_file_is_0600_right_after_writing(token_file: Path) -> None:
    stack.dev_tokens(KadenceSettings())
    assert mode(token_file) == 0o600


def test_an_existing_token_file_readable_by_others_is_narrowed(token_file: Path) -> None:
    token_file.parent.mkdir(parents=True)
    token_file.write_text("kdn_old\n")
    token_file.chmod(0o644)
    settings = stack.dev_tokens(KadenceSettings())
    assert mode(token_file) == 0o600
    assert settings.api_tokens == {token_hash("kdn_old"): "demo"}


def test_make_runs_starting_at_once_agree_on_one_value(tmp_path: Path) -> None:
    path = tmp_path / ".run" / "value"
    made = iter(range(1000))
    start = threading.Barrier(8)

    def one() -> str:
        start.wait()
        return stack.kept_private(path, lambda: f"value-{next(made)}")

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: one(), range(8)))
    assert len(set(got)) == 1 and path.read_text() == got[0] + "\n"
    assert mode(path) == 0o600


def test_the_dev_webhook_secret_is_private_kept_and_loopback_opens_to_demo_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_file = tmp_path / ".run" / "dev-webhook-secret"
    monkeypatch.setattr(stack, "DEV_WEBHOOK_SECRET_FILE", secret_file)
    old = os.umask(0)
    try:
        first = stack.dev_webhooks(KadenceSettings())
    finally:
        os.umask(old)
    assert mode(secret_file) == 0o600
    secret = secret_file.read_text().strip()
    assert len(secret) >= 32
    assert first.webhook_secrets["demo"]["demo-hooks"].get_secret_value() == secret
    assert first.target_allow_cidrs_by_tenant == {"demo": ["127.0.0.1/32"]}
    assert first.target_allow_cidrs == []  # no other tenant may reach loopback
    again = stack.dev_webhooks(KadenceSettings())
    assert again.webhook_secrets["demo"]["demo-hooks"].get_secret_value() == secret  # kept
    configured = KadenceSettings(
        webhook_secrets={"demo": {"demo-hooks": "mine"}, "acme": {"a": "b"}},
        target_allow_cidrs_by_tenant={"demo": ["10.0.0.0/8:443"]},
    )
    kept = stack.dev_webhooks(configured)
    assert kept.webhook_secrets["demo"]["demo-hooks"].get_secret_value() == "mine"
    assert kept.webhook_secrets["acme"]["a"].get_secret_value() == "b"
    assert kept.target_allow_cidrs_by_tenant == {"demo": ["10.0.0.0/8:443"]}
