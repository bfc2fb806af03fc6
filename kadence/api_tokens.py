"""API tokens as configured (KADENCE_API_TOKENS, KADENCE_API_TOKENS_FILE): the SHA-256 of a
token -> what it may do. Two forms of an entry, in one JSON object:

- `"<sha256 hex>": "acme"` (the first form, kept): every scope of tenant `acme` (`*`: admin),
  named `sha256:` and the first 12 hex digits of its hash (never the token);
- `"<sha256 hex>": {"name": "ci-deploy", "tenant": "acme", "scopes": ["read", "operate"]}`.

Scopes: `read` (every GET of the tenant), `operate` (pause, resume, trigger, cancel, backfill,
replay), `manage` (create, update and delete jobs and the tenant's other definitions). A name is
what the audit trail records as the actor (`token:<name>`), so names are unique."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from kadence.models.base import IDENT_RE
from kadence.tenant_ids import reserved_tenant

Scope = Literal["read", "operate", "manage"]
SCOPES: tuple[Scope, ...] = ("read", "operate", "manage")
ADMIN = "*"
MAX_TOKENS = 10_000
"""Entries one configuration (the setting, or the file) holds at most."""
MAX_FILE_BYTES = 4 * 1024 * 1024
"""KADENCE_API_TOKENS_FILE's size at most (10 000 entries of the long form fit)."""
TOKEN_HASH = re.compile(r"[0-9a-f]{64}")
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
LEGACY_PREFIX = "sha256:"


def check_tenant(tenant: str) -> str:
    """A tenant a token (or a JWT) may act as: an identifier none of Kadence's own, or `*`."""
    if tenant == ADMIN:
        return tenant
    if not IDENT_RE.fullmatch(tenant):
        raise ValueError(f'{tenant[:80]!r} is neither a tenant identifier nor "*" (admin)')
    why = reserved_tenant(tenant)
    if why is not None:
        raise ValueError(why)
    return tenant


class TokenSpec(BaseModel):
    """The long form of an entry: a named token of one tenant with some scopes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    """1-64 letters, digits, `.`, `_`, `-`: the actor history records (`token:<name>`)."""
    tenant: Annotated[str, Field(max_length=128)]
    scopes: Annotated[list[Scope], Field(min_length=1, max_length=len(SCOPES))]

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, tenant: str) -> str:
        return check_tenant(tenant)

    @field_validator("scopes")
    @classmethod
    def _unique(cls, scopes: list[Scope]) -> list[Scope]:
        if len(set(scopes)) != len(scopes):
            raise ValueError("a scope is named twice")
        return scopes


TokenEntry = str | TokenSpec
"""The tenant (every scope), or the long form."""
_ENTRIES: TypeAdapter[dict[str, TokenEntry]] = TypeAdapter(
    Annotated[dict[str, TokenEntry], Field(max_length=MAX_TOKENS)]
)


@dataclass(frozen=True)
class Token:
    """What one configured token may do."""

    name: str
    tenant: str
    """The tenant it acts as; `*`: admin."""
    scopes: frozenset[str]

    @property
    def actor(self) -> str:
        return f"token:{self.name}"


def tokens_of(entries: Mapping[str, TokenEntry | Mapping[str, object]]) -> dict[str, Token]:
    """The tokens of a configuration, by hash; ValueError naming the first bad entry (by its
    position and name, never its hash)."""
    if len(entries) > MAX_TOKENS:
        raise ValueError(f"{len(entries)} tokens: at most {MAX_TOKENS}")
    typed = {d: e for d, e in entries.items() if isinstance(e, str | TokenSpec)}
    if len(typed) != len(entries):
        return tokens_of(_validated(entries))
    out: dict[str, Token] = {}
    names: set[str] = set()
    for i, (digest, entry) in enumerate(typed.items(), 1):
        if not TOKEN_HASH.fullmatch(digest):
            raise ValueError(
                f"entry {i}: the key must be a token's SHA-256 in 64 lowercase hex digits "
                "(`kadence token` prints it)"
            )
        if isinstance(entry, str):
            token = Token(LEGACY_PREFIX + digest[:12], check_tenant(entry), frozenset(SCOPES))
        else:
            token = Token(entry.name, entry.tenant, frozenset(entry.scopes))
        if token.name in names:
            raise ValueError(f"entry {i}: the name {token.name!r} is taken by another token")
        names.add(token.name)
        out[digest] = token
    return out


def parse_tokens(text: str | bytes) -> dict[str, Token]:
    """A token file's JSON (KADENCE_API_TOKENS_FILE): ValueError saying what is wrong."""
    if len(text) > MAX_FILE_BYTES:
        raise ValueError(f"over {MAX_FILE_BYTES} bytes")
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    return tokens_of(_validated(raw))


def _validated(raw: object) -> dict[str, TokenEntry]:
    try:
        return _ENTRIES.validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        parts = [str(p) for p in first["loc"] if str(p) not in ("str", "TokenSpec")]
        where = ".".join("<hash>" if TOKEN_HASH.fullmatch(p) else p[:64] for p in parts)
        raise ValueError(
            f"not a JSON object of hash -> tenant or {{name, tenant, scopes}}: "
            f"{first['msg'][:200]} (at {where or 'the top'}; {exc.error_count()} errors)"
        ) from None
