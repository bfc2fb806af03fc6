"""The AWS keys workers sign SQS requests with (KADENCE_SQS_CREDENTIALS), and the queue URL
prefixes a key is bound to: a key signs only for a queue URL under one of them, compared on the
parsed URL (scheme, host, port, path on a `/` boundary), never as a string prefix, so
`https://sqs.x.com.evil.io/` is not under `https://sqs.x.com`."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator


class AwsKey(BaseModel):
    """An AWS access key a worker signs SQS requests with (KADENCE_SQS_CREDENTIALS)."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)
    access_key_id: Annotated[str, Field(pattern=r"^[A-Z0-9]{16,128}$")]
    secret_access_key: SecretStr
    session_token: SecretStr | None = None
    """For temporary credentials (an assumed role)."""
    queue_urls: list[str] | None = None
    """The queue URL prefixes this key signs for, e.g.
    ["https://sqs.eu-west-1.amazonaws.com/123456789012/"]: a job's queue_url must have the same
    scheme, host and port and a path under one of them (on a `/` boundary), or nothing is sent.
    None: any queue URL (a tenant's own key only; a "*" key must name them)."""

    @field_validator("queue_urls")
    @classmethod
    def _prefixes(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if not value:
                raise ValueError("queue_urls: name at least one queue URL prefix, or leave it out")
            for prefix in value:
                _url_prefix(prefix)  # ValueError names the bad prefix
        return value

    def may_sign_for(self, queue_url: str) -> bool:
        """Whether `queue_url` is under one of `queue_urls` (always, without them)."""
        if self.queue_urls is None:
            return True
        try:
            url = _url_prefix(queue_url)
        except ValueError:
            return False
        return any(_under(url, _url_prefix(prefix)) for prefix in self.queue_urls)


_UrlParts = tuple[str, str, int, str]
"""scheme, host, port, path."""


def _url_prefix(url: str) -> _UrlParts:
    """An absolute http(s) URL's scheme, host and port (explicit or the scheme's) and path;
    ValueError for anything else (credentials, a query or a fragment included)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise ValueError(f"{url!r} is not a URL") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an absolute http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{url!r} must not carry credentials")
    if parts.query or parts.fragment:
        raise ValueError(f"{url!r} must not have a query or a fragment")
    scheme = parts.scheme.lower()
    default = 443 if scheme == "https" else 80
    return scheme, parts.hostname.lower(), port or default, parts.path or "/"


def _under(url: _UrlParts, prefix: _UrlParts) -> bool:
    """Same scheme, host and port, and the path is the prefix's or below it."""
    if url[:3] != prefix[:3]:
        return False
    path, base = url[3], prefix[3]
    return path == base or path.startswith(base if base.endswith("/") else base + "/")
