"""AWS Signature Version 4 for one request (what Amazon SQS requires): the headers to add.

Written from AWS's public description of the algorithm, so a queue target needs no AWS SDK:
a canonical request (method, path, query, the signed headers, the body's SHA-256), the string
to sign over its hash and the credential scope, and an HMAC chain from the secret key through
the date, region and service. The secret key is used only here and never leaves the process.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

from pydantic import SecretStr

ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: SecretStr
    session_token: SecretStr | None = None


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _uri(text: str, safe: str) -> str:
    return quote(text, safe=safe + "-_.~")


def canonical_query(query: list[tuple[str, str]]) -> str:
    return "&".join(f"{_uri(k, '')}={_uri(v, '')}" for k, v in sorted(query))


def signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    key = _hmac(("AWS4" + secret).encode(), day)
    return _hmac(_hmac(_hmac(key, region), service), "aws4_request")


def sign(
    method: str,
    path: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    body: bytes,
    *,
    credentials: Credentials,
    region: str,
    service: str,
    now: datetime,
) -> dict[str, str]:
    """`headers` (which must include `host`) plus `x-amz-date`, the session token if any, and
    `authorization`. `now` must be UTC."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    signed = {k.lower(): " ".join(v.split()) for k, v in headers.items()}
    signed["x-amz-date"] = stamp
    if credentials.session_token is not None:
        signed["x-amz-security-token"] = credentials.session_token.get_secret_value()
    names = sorted(signed)
    canonical = "\n".join(
        [
            method,
            _uri(path or "/", "/"),
            canonical_query(query),
            "".join(f"{name}:{signed[name]}\n" for name in names),
            ";".join(names),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = signing_key(credentials.secret_access_key.get_secret_value(), stamp[:8], region, service)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    out = dict(headers)
    out["x-amz-date"] = stamp
    if credentials.session_token is not None:
        out["x-amz-security-token"] = credentials.session_token.get_secret_value()
    out["authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return out
