"""A tenant's connections: named credentials its HTTP targets use (`"connection": "billing-api"`)
and named signing secrets (`"secret_ref"`), created, rotated and deleted by the tenant through
the API, read by the workers from the connections topic.

What the tenant sends is a `Credential` (one model per kind). What the topic holds is a
`ConnectionRecord`: the name, the kind, what may be shown (`details`: never a secret), a
fingerprint, and the credential sealed (kadence/sealing.py) for this very record. A value is
never readable back: the API shows the record without its sealed part.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, field_validator

from kadence.models.base import Identifier, UtcDatetime, Version, WireModel
from kadence.models.targets import HeaderName, header_value_problem, http_url_parts

MAX_SECRET_CHARS = 8 * 1024
"""A token, an API key, a password or a signing secret: 8 KiB is more than any issuer's (JWTs
with many claims run to a few KiB), and a header of that size fits every receiver's limit."""
MAX_PEM_CHARS = 32 * 1024
"""A client certificate (with its chain) or its key, as PEM text."""
MAX_CA_PEM_CHARS = 256 * 1024
"""A CA bundle (a private CA, or a few of them; the system's roots are used without one)."""
MAX_SEALED_BYTES = 400 * 1024
"""A sealed credential: the largest (mTLS with a CA bundle) with room, far under 1 MiB."""
MAX_DETAILS = 8
MAX_DETAIL_CHARS = 1024


class ConnectionKind(StrEnum):
    api_key = "api_key"
    basic = "basic"
    bearer = "bearer"
    oauth2 = "oauth2"
    """OAuth2 client credentials (RFC 6749 4.4): a token fetched, cached, sent as a bearer."""
    mtls = "mtls"
    signing = "signing"
    """A signing secret: named by a target's `secret_ref`, not its `connection`."""


def _header_safe(value: SecretStr) -> SecretStr:
    """A value that goes into a header: the header rules, without echoing the value."""
    problem = header_value_problem(value.get_secret_value())
    if problem is not None:
        at = problem.rsplit(" at character ", 1)[-1].split(":", 1)[0]
        raise ValueError(
            f"holds a character a header value cannot carry at character {at} "
            "(visible ASCII, spaces and tabs only)"
        )
    return value


SecretText = Annotated[SecretStr, Field(min_length=1, max_length=MAX_SECRET_CHARS)]
HeaderSecret = Annotated[SecretText, AfterValidator(_header_safe)]
Scopes = Annotated[str, Field(max_length=1024, pattern=r"^[\x21\x23-\x5b\x5d-\x7e ]*$")]
"""OAuth2 scope tokens (RFC 6749 3.3: visible ASCII but `"` and `\\`), space-separated."""
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


class _Credential(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ApiKeyCredential(_Credential):
    """A key sent with every request, in a header (`X-Api-Key: <value>`) or a query parameter."""

    kind: Literal["api_key"] = "api_key"
    placement: Literal["header", "query"] = "header"
    param: Annotated[str, Field(min_length=1, max_length=256)] = "X-Api-Key"
    """The header's name (a token), or the query parameter's."""
    value: HeaderSecret

    @field_validator("param")
    @classmethod
    def _param(cls, param: str) -> str:
        if not re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}", param):
            raise ValueError(
                "must be a header name or query parameter of letters, digits and "
                "!#$%&'*+-.^_`|~ (no spaces, '=', '&' or control characters)"
            )
        return param


class BasicCredential(_Credential):
    """HTTP Basic (RFC 7617): `Authorization: Basic base64(username:password)`."""

    kind: Literal["basic"] = "basic"
    username: Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[^:\x00-\x1f\x7f]+$")]
    """No colon (it separates the two) and no control characters."""
    password: Annotated[SecretStr, Field(max_length=1024)]

    @field_validator("password")
    @classmethod
    def _password(cls, password: SecretStr) -> SecretStr:
        if re.search(r"[\x00-\x1f\x7f]", password.get_secret_value()):
            raise ValueError("holds a control character")
        return password


class BearerCredential(_Credential):
    """A static token: `Authorization: Bearer <token>`."""

    kind: Literal["bearer"] = "bearer"
    token: SecretText

    @field_validator("token")
    @classmethod
    def _token68(cls, token: SecretStr) -> SecretStr:
        if not _TOKEN68.fullmatch(token.get_secret_value()):
            raise ValueError(
                "a bearer token is letters, digits and -._~+/ with = at its end (RFC 6750 2.1)"
            )
        return token


class OAuth2Credential(_Credential):
    """OAuth2 client credentials: the workers fetch a token from `token_url`, keep it until
    shortly before it expires, and send it as a bearer token."""

    kind: Literal["oauth2"] = "oauth2"
    token_url: Annotated[str, Field(min_length=1, max_length=2048)]
    client_id: Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[\x20-\x7e]+$")]
    client_secret: HeaderSecret
    scope: (
        Annotated[str, Field(max_length=1024, pattern=r"^[\x21\x23-\x5b\x5d-\x7e ]*$")] | None
    ) = None
    """Space-separated scopes (RFC 6749 3.3)."""
    audience: Annotated[str, Field(max_length=1024, pattern=r"^[\x20-\x7e]*$")] | None = None
    """Sent as `audience` when set (Auth0, Okta and others want it)."""
    client_auth: Literal["basic", "body"] = "basic"
    """How the client authenticates to the token endpoint: HTTP Basic (client_secret_basic,
    the RFC's default) or in the form body (client_secret_post)."""

    @field_validator("token_url")
    @classmethod
    def _url(cls, url: str) -> str:
        parts = http_url_parts(url, "client_id and client_secret")
        if parts.fragment:
            raise ValueError("must not have a fragment")
        return url


class MtlsCredential(_Credential):
    """A client certificate and its key, and optionally the CA bundle the server's certificate
    must chain to (else the system's roots). For https:// targets only."""

    kind: Literal["mtls"] = "mtls"
    cert_pem: Annotated[str, Field(min_length=1, max_length=MAX_PEM_CHARS)]
    key_pem: Annotated[SecretStr, Field(min_length=1, max_length=MAX_PEM_CHARS)]
    ca_pem: Annotated[str, Field(min_length=1, max_length=MAX_CA_PEM_CHARS)] | None = None


class SigningCredential(_Credential):
    """A webhook signing secret (`webhook-signature`, Standard Webhooks): raw text, or
    `whsec_<base64>`."""

    kind: Literal["signing"] = "signing"
    secret: HeaderSecret


Credential = Annotated[
    ApiKeyCredential
    | BasicCredential
    | BearerCredential
    | OAuth2Credential
    | MtlsCredential
    | SigningCredential,
    Field(discriminator="kind"),
]


class ConnectionRecord(WireModel):
    """One connection of one tenant on the connections topic, keyed `tenant/name`; a tombstone
    deletes it. Written by the API only."""

    avro_name = "Connection"

    tenant: Identifier
    name: Identifier
    kind: ConnectionKind
    version: Version
    """1 when created, one more at each rotation."""
    changed_at: UtcDatetime
    fingerprint: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]
    """A keyed digest of the credential (kadence/sealing.py): changes when the value does."""
    details: Annotated[
        dict[
            Annotated[str, Field(min_length=1, max_length=64)],
            Annotated[str, Field(max_length=MAX_DETAIL_CHARS)],
        ],
        Field(max_length=MAX_DETAILS),
    ] = Field(default_factory=dict)
    """What may be shown of it: never a secret (an API key's header name, an OAuth2 token URL
    and client id, a certificate's subject and expiry)."""
    key_id: Identifier
    """The secrets key that sealed it."""
    nonce: Annotated[bytes, Field(min_length=12, max_length=12)]
    sealed: Annotated[bytes, Field(min_length=16, max_length=MAX_SEALED_BYTES)]

    def aad(self) -> bytes:
        """What the seal is bound to: this tenant, name, kind and version."""
        return f"{self.tenant}/{self.name}/{self.kind.value}/{self.version}".encode()


def connection_key(tenant: str, name: str) -> str:
    return f"{tenant}/{name}"


__all__ = [
    "ApiKeyCredential",
    "BasicCredential",
    "BearerCredential",
    "ConnectionKind",
    "ConnectionRecord",
    "Credential",
    "HeaderName",
    "MtlsCredential",
    "OAuth2Credential",
    "SigningCredential",
    "connection_key",
]
