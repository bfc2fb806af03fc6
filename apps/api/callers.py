"""Who is calling: the caller an Authorization header names, by a static token (looked up by
its SHA-256 in the token book: KADENCE_API_TOKENS and KADENCE_API_TOKENS_FILE) or a JWT
validated against the JWKS (KADENCE_API_JWKS_URL). Tokens are never stored or logged in clear.

`known` is the cheap answer the connection guard and the body limit need before a request's
body is read: a static token costs one SHA-256; a JWT is checked in full but only against a
JWKS already fetched (`fetch=False`), so the event loop never waits on the identity
provider."""

from __future__ import annotations

from dataclasses import dataclass

from apps.api.jwt_bearer import JwtBearer, JwtRefusedError, looks_like_jwt
from apps.api.token_book import TokenBook, token_hash
from kadence.api_tokens import ADMIN
from kadence.settings import KadenceSettings

MAX_AUTHORIZATION = 8192 + 7
"""An Authorization header's characters at most ("Bearer " and a JWT of MAX_JWT)."""


class NotAuthenticatedError(Exception):
    """No caller: `status` 401 (the token), 503 (the JWKS could not be fetched)."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status
        self.why = why


@dataclass(frozen=True)
class Caller:
    tenant: str
    """The tenant it acts as; `*`: admin."""
    scopes: frozenset[str]
    actor: str
    """What history records as who did it: `token:<name>` or `jwt:<sub>`."""


def is_bearer(authorization: str | None) -> bool:
    return authorization is not None and authorization[:7].lower() == "bearer "


class Callers:
    """One API's ways to know a caller."""

    def __init__(self, book: TokenBook, jwt: JwtBearer | None = None) -> None:
        self.book = book
        self.jwt = jwt

    @classmethod
    def of(cls, settings: KadenceSettings) -> Callers:
        """From the settings; TokenFileError (a ValueError) when the token file is bad."""
        book = TokenBook(settings.api_tokens, settings.api_tokens_file)
        return cls(book, JwtBearer(settings) if settings.api_jwks_url else None)

    def identify(self, authorization: str | None, *, fetch: bool = True) -> Caller:
        if authorization is None or not is_bearer(authorization):
            raise NotAuthenticatedError(401, "missing bearer token (Authorization: Bearer <token>)")
        if len(authorization) > MAX_AUTHORIZATION:
            raise NotAuthenticatedError(
                401, f"bearer token over {MAX_AUTHORIZATION - 7} characters"
            )
        token = authorization[7:].strip()
        found = self.book.get(token_hash(token))
        if found is not None:
            return Caller(found.tenant, found.scopes, found.actor)
        if self.jwt is None or not looks_like_jwt(token):
            raise NotAuthenticatedError(401, "unknown token")
        try:
            jc = self.jwt.caller(token, fetch=fetch)
        except JwtRefusedError as exc:
            raise NotAuthenticatedError(exc.status, exc.why) from None
        return Caller(jc.tenant, jc.scopes, jc.actor)

    def known(self, authorization: str | None) -> bool:
        """Whether the header names a caller, without waiting on the network."""
        try:
            self.identify(authorization, fetch=False)
        except NotAuthenticatedError:
            return False
        return True

    def is_admin(self, authorization: str | None) -> bool:
        try:
            return self.identify(authorization, fetch=False).tenant == ADMIN
        except NotAuthenticatedError:
            return False
