"""A webhook run's credentials: the connection its target names, and the signing secret its
`secret_ref` names, looked up for the run's own tenant and opened (kadence/connections.py).

What a connection adds to the request: a header (`api_key` in a header, `basic`, `bearer`,
`oauth2`'s token), a query parameter (`api_key` in the query), or a pool whose connections
present a client certificate (`mtls`). Every refusal is the run's failure, for good, naming the
connection: unknown, deleted (and when), of the wrong kind, or sealed so that it does not open
here. The same words whether or not another tenant has a connection of that name.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from connectors.http_dns import Resolver
from connectors.http_pool import ConnectionPool
from connectors.mtls import MtlsPools
from connectors.oauth2 import OAuth2Tokens, TokenError
from kadence.connections import ConnectionSource, open_record
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
from kadence.sealing import Keyring, SealingError
from kadence.targets import Result

OPENED_KEPT = 10_000
READY_POLL_S = 0.05


@dataclass
class Applied:
    """What a connection adds to one request."""

    headers: dict[str, str] = field(default_factory=dict)
    query: list[tuple[str, str]] = field(default_factory=list)
    pool: ConnectionPool | None = None
    """A pool of its own (mTLS); None: the caller's."""
    oauth2: tuple[tuple[str, str, bytes], str] | None = None
    """The token sent and its cache key, so that a 401 can drop it."""


class ConnectionRefused(Exception):  # noqa: N818 - a verdict the target turns into an outcome
    def __init__(self, result: Result) -> None:
        super().__init__(result.error.message if result.error else "connection refused")
        self.result = result


def _refused(kind: str, message: str) -> ConnectionRefused:
    return ConnectionRefused(Result.failed(kind, message, retryable=False))


class Credentials:
    def __init__(
        self,
        source: ConnectionSource | None,
        keyring: Keyring | None,
        pool: ConnectionPool,
        resolver: Resolver,
    ) -> None:
        self.source = source
        self.keyring = keyring
        self.tokens = OAuth2Tokens(pool, resolver)
        self.mtls = MtlsPools()
        self._opened: OrderedDict[tuple[str, str], tuple[bytes, Credential]] = OrderedDict()

    async def record(
        self, tenant: str, name: str, deadline: float, field_name: str
    ) -> ConnectionRecord:
        """The tenant's record named `name`, once this process has read the topic; raises
        ConnectionRefused."""
        if self.source is None or self.keyring is None:
            raise _refused(
                "UnknownConnection",
                f"{field_name} {name!r}: the workers hold no connections "
                "(KADENCE_SECRETS_KEYS is not set on them)",
            )
        while not self.source.ready():
            if time.monotonic() >= deadline:
                raise ConnectionRefused(
                    Result.failed(
                        "UnknownConnection",
                        f"{field_name} {name!r}: the connections were not read before the "
                        "run's deadline",
                        retryable=True,
                    )
                )
            await asyncio.sleep(READY_POLL_S)
        record = self.source.get(tenant, name)
        if record is None:
            gone = self.source.deleted_at(tenant, name)
            if gone is not None:
                raise _refused(
                    "ConnectionDeleted",
                    f"{field_name} {name!r} of tenant {tenant!r} was deleted at "
                    f"{gone.isoformat(timespec='seconds')}",
                )
            raise _refused(
                "UnknownConnection", f"{field_name} {name!r} is unknown for tenant {tenant!r}"
            )
        return record

    def opened(self, record: ConnectionRecord) -> Credential:
        """The record's credential, opened once per sealed value."""
        key = (record.tenant, record.name)
        kept = self._opened.get(key)
        if kept is not None and kept[0] == record.nonce:
            return kept[1]
        assert self.keyring is not None
        try:
            credential = open_record(self.keyring, record)
        except SealingError as exc:
            raise _refused("ConnectionUnreadable", f"connection {record.name!r}: {exc}") from None
        self._opened[key] = (record.nonce, credential)
        while len(self._opened) > OPENED_KEPT:
            self._opened.popitem(last=False)
        return credential

    async def signing_secret(self, tenant: str, name: str, deadline: float) -> str | None:
        """The tenant's own signing secret `name` (None when it has no connection of that
        name, so the workers' KADENCE_WEBHOOK_SECRETS are asked next)."""
        if self.source is None or self.keyring is None:
            return None
        try:
            record = await self.record(tenant, name, deadline, "secret_ref")
        except ConnectionRefused as refused:
            if refused.result.error and refused.result.error.type == "UnknownConnection":
                return None
            raise
        if record.kind is not ConnectionKind.signing:
            raise _refused(
                "WrongConnectionKind",
                f"secret_ref {name!r} names a {record.kind.value} connection, not a signing secret",
            )
        credential = self.opened(record)
        assert isinstance(credential, SigningCredential)
        return credential.secret.get_secret_value()

    async def apply(self, tenant: str, name: str, url: str, deadline: float) -> Applied:
        """What the connection `name` adds to a request to `url`; raises ConnectionRefused."""
        record = await self.record(tenant, name, deadline, "connection")
        if record.kind is ConnectionKind.signing:
            raise _refused(
                "WrongConnectionKind",
                f"connection {name!r} is a signing secret: name it with secret_ref",
            )
        credential = self.opened(record)
        applied = Applied()
        match credential:
            case ApiKeyCredential(placement="header", param=param, value=value):
                applied.headers[param] = value.get_secret_value()
            case ApiKeyCredential(param=param, value=value):
                applied.query.append((param, value.get_secret_value()))
            case BasicCredential(username=user, password=password):
                pair = f"{user}:{password.get_secret_value()}".encode()
                applied.headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
            case BearerCredential(token=bearer):
                applied.headers["Authorization"] = "Bearer " + bearer.get_secret_value()
            case OAuth2Credential() as oauth:
                key = (tenant, name, record.nonce)
                try:
                    token = await self.tokens.token(key, oauth, deadline)
                except TokenError as exc:
                    raise ConnectionRefused(exc.result) from None
                applied.headers["Authorization"] = "Bearer " + token
                applied.oauth2 = (key, token)
            case MtlsCredential() as mtls:
                if not url.startswith("https://"):
                    raise _refused(
                        "InvalidRequest",
                        f"connection {name!r} is mTLS: the target's URL must be https://",
                    )
                try:
                    applied.pool = self.mtls.pool((tenant, name), record.nonce, mtls)
                except (ssl.SSLError, ValueError) as exc:
                    raise _refused(
                        "ConnectionUnreadable", f"connection {name!r}: certificate: {exc}"
                    ) from None
        return applied

    def refused_by_target(self, applied: Applied) -> None:
        """The target answered 401: an OAuth2 token it refused is not used again."""
        if applied.oauth2 is not None:
            self.tokens.drop(*applied.oauth2)
