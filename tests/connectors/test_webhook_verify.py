"""A receiver tells Kadence's signed requests from anything else (connectors/webhook_verify.py):
the signature the worker's HTTP target makes verifies; a changed body, id or timestamp, another
secret, an old timestamp or a missing header do not."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from connectors.http import sign
from connectors.webhook_verify import verify

NOW = 1_800_000_000


def signed(
    secret: str, body: bytes, msg_id: str = "acme/j@2026-12-01T09:00:00.000Z"
) -> dict[str, str]:
    return {
        "Webhook-Id": msg_id,
        "Webhook-Timestamp": str(NOW),
        "Webhook-Signature": sign(secret, msg_id, NOW, body),
    }


@given(st.binary(max_size=512), st.text(min_size=1, max_size=40))
def test_what_kadence_signs_verifies_and_nothing_else(body: bytes, secret: str) -> None:
    h = signed(secret, body)
    assert verify(secret, h, body, now_s=NOW)
    assert not verify(secret + "x", h, body, now_s=NOW)
    assert not verify(secret, h, body + b"!", now_s=NOW)
    assert not verify(secret, {**h, "Webhook-Id": "acme/other@1"}, body, now_s=NOW)
    assert not verify(secret, {**h, "Webhook-Timestamp": str(NOW + 1)}, body, now_s=NOW)


def test_a_replay_later_than_the_tolerance_is_refused() -> None:
    h = signed("s3cret", b"{}")
    assert verify("s3cret", h, b"{}", now_s=NOW + 299)
    assert not verify("s3cret", h, b"{}", now_s=NOW + 301)
    assert not verify("s3cret", h, b"{}", now_s=NOW - 301)
    assert verify("s3cret", h, b"{}", now_s=NOW + 3_000, tolerance_s=3_600)


def test_standard_webhooks_secrets_and_rotation() -> None:
    raw = b"\x01" * 24
    whsec = "whsec_" + base64.b64encode(raw).decode()
    h = signed(whsec, b"payload")
    assert verify(whsec, h, b"payload", now_s=NOW)
    rotated = {**h, "Webhook-Signature": "v1,bm90IGl0 " + h["Webhook-Signature"]}
    assert verify(whsec, rotated, b"payload", now_s=NOW)  # one of several matches


def test_missing_or_malformed_headers_are_refused() -> None:
    h = signed("k", b"x")
    for name in ("Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"):
        assert not verify("k", {k: v for k, v in h.items() if k != name}, b"x", now_s=NOW)
    assert not verify("k", {**h, "Webhook-Timestamp": "soon"}, b"x", now_s=NOW)
    assert not verify("k", {**h, "Webhook-Signature": ""}, b"x", now_s=NOW)


def test_a_timestamp_of_anything_but_ascii_digits_is_refused_not_raised() -> None:
    """`str.isdigit` says yes to each of these; each is a clean refusal, never an exception."""
    h = signed("k", b"x")
    for stamp in (
        "\u00b2",
        "1\u00b2",
        "\u0663" * 10,
        "\uff11" * 10,
        "9" * 5_000,
        "+1",
        " 1",
        "1.0",
    ):
        assert not verify("k", {**h, "Webhook-Timestamp": stamp}, b"x", now_s=NOW), stamp
    arabic = "".join(chr(0x0660 + int(d)) for d in str(NOW))  # reads as NOW to int()
    signed_arabic = {**h, "Webhook-Timestamp": arabic}
    signed_arabic["Webhook-Signature"] = sign("k", h["Webhook-Id"], NOW, b"x")
    assert not verify("k", signed_arabic, b"x", now_s=NOW)
