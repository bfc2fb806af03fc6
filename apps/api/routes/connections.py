"""A tenant's connections and signing secrets: create or rotate (PUT), list, show, delete.

A value goes in and never comes out: every answer shows a connection's name, kind, version,
fingerprint, when it changed and its `details` (never a secret). The credential is sealed
(kadence/connections.py) before it leaves this process; a refused body is answered naming the
field and the rule, never echoing what was sent. A write answers once this API's own reader
of the connections topic has read it, so the next GET shows it; the workers use it from their
next run that reads it (within the moment the broker takes to hand it to them).
"""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Body, HTTPException, Response
from pydantic import BaseModel, ValidationError

from apps.api.auth import Manager, Reader, tenant_of
from apps.api.deps import Services, Svc, invalid
from connectors.ssrf import AddressPolicy
from kadence.connections import CREDENTIAL, seal
from kadence.models.base import IDENT_RE
from kadence.models.connections import (
    ConnectionKind,
    ConnectionRecord,
    OAuth2Credential,
    connection_key,
)
from streams.connections import ConnectionStore

router = APIRouter(tags=["connections"])

READ_WAIT_S = 10.0
BODY_DOC = (
    "The credential, by kind: api_key {placement: header|query, param, value}, basic "
    "{username, password}, bearer {token}, oauth2 {token_url, client_id, client_secret, scope, "
    "audience, client_auth: basic|body}, mtls {cert_pem, key_pem, ca_pem}, signing {secret}. "
    "See docs/api.md."
)


class ConnectionShown(BaseModel):
    name: str
    kind: ConnectionKind
    version: int
    fingerprint: str
    """A keyed digest of the value: it changes when the value does."""
    changed_at: datetime
    details: dict[str, str]
    """What may be shown: never a secret."""


def shown(record: ConnectionRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "kind": record.kind,
        "version": record.version,
        "fingerprint": record.fingerprint,
        "changed_at": record.changed_at,
        "details": record.details,
    }


def check_name(name: str) -> None:
    if not IDENT_RE.fullmatch(name):
        raise HTTPException(
            422,
            [
                {
                    "loc": ["path", "name"],
                    "msg": "a connection name is 1-128 letters, digits, '.', '_' or '-', "
                    "starting with a letter or digit",
                }
            ],
        )


def store_of(svc: Services) -> ConnectionStore:
    store = svc.connections
    if store is None:
        raise HTTPException(
            503,
            "connections are not enabled: the operator sets KADENCE_SECRETS_KEYS on the API "
            'and the workers (docs/security.md, "Connections")',
        )
    if not store.wait_ready(READ_WAIT_S):
        raise HTTPException(503, "the connections topic has not been read yet; try again")
    return store


def refuse_literal_address(svc: Services, tenant: str, credential: object) -> None:
    """A token endpoint named by a literal address the workers would refuse (private,
    metadata): refused now, not at the first run. Names are checked at each fetch."""
    if not isinstance(credential, OAuth2Credential):
        return
    parts = urlsplit(credential.token_url)
    try:
        address = ipaddress.ip_address(parts.hostname or "")
    except ValueError:
        return
    settings = svc.settings
    policy = AddressPolicy(settings.target_allow_cidrs, settings.target_allow_cidrs_by_tenant)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    why = policy.why_refused(address, port, tenant)
    if why is not None:
        raise HTTPException(
            422,
            [
                {
                    "loc": ["body", "token_url"],
                    "msg": f"token_url: {address} is {why}; the workers may not reach it",
                }
            ],
        )


@router.get(
    "/v1/connections", response_model=list[ConnectionShown], response_model_exclude_unset=True
)
def list_connections(svc: Svc, who: Reader) -> list[dict[str, Any]]:
    """The tenant's connections and signing secrets, by name, without their values."""
    return [shown(r) for r in store_of(svc).of_tenant(tenant_of(who))]


@router.get("/v1/connections/{name}", response_model=ConnectionShown)
def get_connection(svc: Svc, who: Reader, name: str) -> dict[str, Any]:
    check_name(name)
    tenant = tenant_of(who)
    record = store_of(svc).get(tenant, name)
    if record is None:
        raise HTTPException(404, f"no connection {name!r}")
    return shown(record)


@router.put("/v1/connections/{name}", response_model=ConnectionShown)
def put_connection(
    svc: Svc,
    who: Manager,
    name: str,
    body: Annotated[dict[str, Any], Body(description=BODY_DOC)],
    response: Response,
) -> dict[str, Any]:
    """Create the connection (201) or rotate it (200, the next version): the next run of
    every job naming it uses the new value."""
    check_name(name)
    tenant = tenant_of(who)
    try:
        credential = CREDENTIAL.validate_python(body)
    except ValidationError as exc:
        raise invalid(exc) from None
    refuse_literal_address(svc, tenant, credential)
    store = store_of(svc)
    keyring = svc.settings.keyring()
    assert keyring is not None  # the store exists only with keys
    current = store.get(tenant, name)
    try:
        record = seal(
            keyring,
            credential,
            tenant=tenant,
            name=name,
            version=current.version + 1 if current else 1,
            changed_at=datetime.now(UTC),
        )
    except ValueError as exc:  # an mTLS certificate or key that does not load
        raise HTTPException(422, [{"loc": ["body"], "msg": str(exc)}]) from None
    key = connection_key(tenant, name)
    written = svc.write(lambda: svc.client.put_connection(key, record))
    store.wait_for(written.offset, READ_WAIT_S)
    response.status_code = 200 if current else 201
    return shown(record)


@router.delete("/v1/connections/{name}", status_code=204)
def delete_connection(svc: Svc, who: Manager, name: str) -> Response:
    """Delete it: the runs of jobs that still name it fail, saying it was deleted."""
    check_name(name)
    tenant = tenant_of(who)
    store = store_of(svc)
    if store.get(tenant, name) is None:
        raise HTTPException(404, f"no connection {name!r}")
    written = svc.write(lambda: svc.client.put_connection(connection_key(tenant, name), None))
    store.wait_for(written.offset, READ_WAIT_S)
    return Response(status_code=204)
