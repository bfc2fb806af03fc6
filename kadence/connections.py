"""A connection's life outside the topic: sealed into a record when the tenant writes it, opened
by the worker that uses it, and what a reader of the connections topic offers the targets.

The record's `details` hold what may be shown (never a secret); the credential itself is sealed
(kadence/sealing.py) with the record's identity as associated data, so the API and every worker
that holds the operator's key can open it, and nobody else can, whatever they read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from pydantic import TypeAdapter, ValidationError

from kadence.models.connections import (
    ApiKeyCredential,
    BasicCredential,
    BearerCredential,
    ConnectionKind,
    ConnectionRecord,
    Credential,
    MtlsCredential,
    OAuth2Credential,
    SigningCredential,
)
from kadence.sealing import Keyring, Sealed, SealingError

CREDENTIAL: TypeAdapter[Credential] = TypeAdapter(Credential)


class ConnectionSource(Protocol):
    """What a target needs of the connections a process has read (streams/connections.py)."""

    def get(self, tenant: str, name: str) -> ConnectionRecord | None:
        """The tenant's connection of that name as last written, None if it has none."""
        ...

    def deleted_at(self, tenant: str, name: str) -> datetime | None:
        """When the tenant's connection of that name was deleted, if this process saw it."""
        ...

    def ready(self) -> bool:
        """Whether everything written before this process started has been read."""
        ...


def details_of(credential: Credential) -> dict[str, str]:
    """What may be shown of a credential: never a secret. Raises ValueError for an mTLS
    certificate or key that cannot be read, or a key that is not the certificate's."""
    match credential:
        case ApiKeyCredential(placement=placement, param=param):
            return {"placement": placement, "param": param}
        case BasicCredential(username=username):
            return {"username": username}
        case OAuth2Credential() as oauth:
            shown = {"token_url": oauth.token_url, "client_id": oauth.client_id}
            if oauth.scope:
                shown["scope"] = oauth.scope
            return shown
        case MtlsCredential() as mtls:
            return _certificate_details(mtls)
        case BearerCredential() | SigningCredential():
            return {}


def _certificate_details(mtls: MtlsCredential) -> dict[str, str]:
    try:
        cert = x509.load_pem_x509_certificate(mtls.cert_pem.encode())
    except ValueError:
        raise ValueError("cert_pem: not a PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(
            mtls.key_pem.get_secret_value().encode(), password=None
        )
    except (ValueError, TypeError):
        raise ValueError("key_pem: not an unencrypted PEM private key") from None
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    pem = serialization.Encoding.PEM
    if key.public_key().public_bytes(pem, public) != cert.public_key().public_bytes(pem, public):
        raise ValueError("key_pem: not the key of the certificate in cert_pem")
    if mtls.ca_pem is not None:
        try:
            x509.load_pem_x509_certificates(mtls.ca_pem.encode())
        except ValueError:
            raise ValueError("ca_pem: not PEM certificates") from None
    return {
        "subject": cert.subject.rfc4514_string()[:1024],
        "not_after": cert.not_valid_after_utc.isoformat(),
    }


def seal(
    keyring: Keyring,
    credential: Credential,
    *,
    tenant: str,
    name: str,
    version: int,
    changed_at: datetime,
) -> ConnectionRecord:
    """The record of `credential` as the tenant's connection `name`, at `version`."""
    plaintext = _revealed_json(credential)
    draft = ConnectionRecord(
        tenant=tenant,
        name=name,
        kind=ConnectionKind(credential.kind),
        version=version,
        changed_at=changed_at,
        fingerprint=keyring.fingerprint(plaintext),
        details=details_of(credential),
        key_id=keyring.current,
        nonce=b"\0" * 12,
        sealed=b"\0" * 16,
    )
    sealed = keyring.seal(plaintext, draft.aad())
    return draft.model_copy(update={"nonce": sealed.nonce, "sealed": sealed.ciphertext})


def _revealed_json(credential: Credential) -> bytes:
    """The credential as JSON with its secrets in clear (only ever sealed, never written)."""
    fields = {
        name: value.get_secret_value() if hasattr(value, "get_secret_value") else value
        for name, value in credential
    }
    return CREDENTIAL_JSON.dump_json(fields)


def open_record(keyring: Keyring, record: ConnectionRecord) -> Credential:
    """The credential sealed in `record`. Raises SealingError when it does not open for this
    record (tampered, copied from another record, or a key this process lacks)."""
    plaintext = keyring.open(Sealed(record.key_id, record.nonce, record.sealed), record.aad())
    try:
        credential = CREDENTIAL.validate_json(plaintext)
    except ValidationError:
        raise SealingError("the sealed credential is not one this release reads") from None
    if credential.kind != record.kind.value:
        raise SealingError("the sealed credential is not of the record's kind")
    return credential


CREDENTIAL_JSON: TypeAdapter[dict[str, object]] = TypeAdapter(dict[str, object])
