"""Sealing a tenant's credentials for the connections topic: AES-256-GCM with a key the operator
provides (KADENCE_SECRETS_KEYS), bound to the record it belongs to.

A sealed value names the key that sealed it (its id), so the operator rotates keys by adding a
new one, making it current (KADENCE_SECRETS_KEY_ID) and keeping the old ones until every record
has been written again. The associated data is the record's identity (tenant, name, kind and
version): a ciphertext copied into another tenant's record, another name or another version
does not open. A value's fingerprint is an HMAC under a key derived from the current key, so it
tells two values apart without letting anyone who reads the topic test guesses against it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
NONCE_BYTES = 12
FINGERPRINT_HEX = 16
_URLSAFE = str.maketrans("-_", "+/")


class SealingError(ValueError):
    """A key that is not one, a value sealed with a key this process lacks, or a ciphertext
    that does not open for the record it is in (tampered, or moved from another record)."""


@dataclass(frozen=True, slots=True)
class Sealed:
    key_id: str
    nonce: bytes
    ciphertext: bytes


def parse_key(key_id: str, text: str) -> bytes:
    """A key as configured: 32 bytes, base64 (standard or URL-safe); never echoed in errors."""
    text = text.strip()
    try:
        raw = base64.b64decode(text.translate(_URLSAFE), validate=True)
    except (binascii.Error, ValueError):
        raise SealingError(f"secrets key {key_id!r} is not base64") from None
    if len(raw) != KEY_BYTES:
        raise SealingError(
            f"secrets key {key_id!r} holds {len(raw)} bytes; it must be {KEY_BYTES} "
            "(`python -c 'import os,base64; print(base64.b64encode(os.urandom(32)).decode())'`)"
        )
    return raw


def new_key() -> str:
    """A fresh key, as KADENCE_SECRETS_KEYS takes it."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


class Keyring:
    """The keys one process holds; `current` seals, any of them opens what it sealed."""

    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        if current not in keys:
            raise SealingError(f"the current secrets key {current!r} is not among the keys")
        self._keys = {kid: AESGCM(key) for kid, key in keys.items()}
        self.current = current
        self._fingerprint_key = hmac.new(keys[current], b"kadence fingerprint", "sha256").digest()

    @classmethod
    def from_settings(cls, keys: Mapping[str, str], current: str | None) -> Keyring | None:
        """The keyring of KADENCE_SECRETS_KEYS / KADENCE_SECRETS_KEY_ID; None without keys."""
        if not keys:
            return None
        if current is None:
            if len(keys) > 1:
                raise SealingError(
                    "KADENCE_SECRETS_KEY_ID must name the current key when there are several"
                )
            current = next(iter(keys))
        return cls({kid: parse_key(kid, text) for kid, text in keys.items()}, current)

    def seal(self, plaintext: bytes, aad: bytes) -> Sealed:
        nonce = os.urandom(NONCE_BYTES)
        return Sealed(self.current, nonce, self._keys[self.current].encrypt(nonce, plaintext, aad))

    def open(self, sealed: Sealed, aad: bytes) -> bytes:
        aead = self._keys.get(sealed.key_id)
        if aead is None:
            raise SealingError(
                f"sealed with secrets key {sealed.key_id!r}, which this process does not hold "
                "(KADENCE_SECRETS_KEYS)"
            )
        try:
            return aead.decrypt(sealed.nonce, sealed.ciphertext, aad)
        except (InvalidTag, ValueError):
            raise SealingError(
                "the sealed value does not open for this record (changed, or copied from "
                "another record)"
            ) from None

    def fingerprint(self, plaintext: bytes) -> str:
        """A short keyed digest of a value: equal values, equal fingerprints."""
        return hmac.new(self._fingerprint_key, plaintext, hashlib.sha256).hexdigest()[
            :FINGERPRINT_HEX
        ]
