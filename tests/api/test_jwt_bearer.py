"""JWT bearer tokens against a JWKS (apps/api/jwt_bearer.py), through the app, without a
broker: the JWKS is served by a local HTTP server of the test, its keys made by the test. A
good token acts as its tenant with its scopes (the scope check then applies as for any token);
an expired one, one for another audience or issuer, signed by another key, `alg: none`, HS256
signed with the public key, an unknown key id, and hostile claims are 401 with the reason; a
JWKS that cannot be fetched is 503."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fastapi.testclient import TestClient
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from jwt.utils import base64url_encode

from apps.api.app import create_app
from apps.api.callers import Callers
from kadence.settings import KadenceSettings

ISS, AUD = "https://idp.test", "kadence-api"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Jwks:
    """A JWKS endpoint on 127.0.0.1 (port 0), counting its fetches."""

    def __init__(self) -> None:
        rsa_jwk = json.loads(RSAAlgorithm.to_jwk(RSA_KEY.public_key()))
        ec_jwk = json.loads(ECAlgorithm.to_jwk(EC_KEY.public_key()))
        self.doc = {
            "keys": [
                {**rsa_jwk, "kid": "rsa1", "alg": "RS256", "use": "sig"},
                {**ec_jwk, "kid": "ec1", "alg": "ES256", "use": "sig"},
            ]
        }
        self.fetches = 0
        jwks = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                jwks.fetches += 1
                body = json.dumps(jwks.doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/jwks.json"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Jwks:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def settings(url: str) -> KadenceSettings:
    return KadenceSettings(
        api_jwks_url=url, api_jwt_issuer=ISS, api_jwt_audience=AUD, api_jwks_timeout_s=2
    )


@pytest.fixture(scope="module")
def jwks() -> Iterator[Jwks]:
    with Jwks() as served:
        yield served


@pytest.fixture(scope="module")
def http(jwks: Jwks) -> TestClient:
    return TestClient(create_app(settings(jwks.url)), raise_server_exceptions=False)


def claims(**kw: Any) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": ISS,
        "aud": AUD,
        "sub": "alice@example.com",
        "iat": now,
        "exp": now + 300,
        "kadence_tenant": "acme",
        "scope": "read openid",
        **kw,
    }


def signed(kid: str = "rsa1", key: Any = RSA_KEY, alg: str = "RS256", **kw: Any) -> str:
    return jwt.encode(claims(**kw), key, algorithm=alg, headers={"kid": kid})


def hs256_with_the_public_key() -> str:
    """The classic confusion: HMAC keyed with the public key's PEM (PyJWT will not make it)."""
    pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    head = {"alg": "HS256", "typ": "JWT", "kid": "rsa1"}
    part = [base64url_encode(json.dumps(x).encode()) for x in (head, claims())]
    signing_input = b".".join(part)
    mac = base64url_encode(hmac.new(pem, signing_input, hashlib.sha256).digest())
    return (signing_input + b"." + mac).decode()


def get(http: TestClient, token: str, path: str = "/v1/jobs") -> Any:
    return http.get(path, headers={"Authorization": f"Bearer {token}"})


def test_a_good_jwt_acts_as_its_tenant_with_its_scopes_and_sub(jwks: Jwks) -> None:
    callers = Callers.of(settings(jwks.url))
    caller = callers.identify(f"Bearer {signed()}")
    assert (caller.tenant, set(caller.scopes), caller.actor) == (
        "acme",
        {"read"},
        "jwt:alice@example.com",
    )
    ec_caller = callers.identify(f"Bearer {signed('ec1', EC_KEY, 'ES256', scope=['operate'])}")
    assert ec_caller.scopes == {"operate"}


def test_scopes_from_the_claim_decide_as_for_any_token(http: TestClient) -> None:
    assert get(http, signed()).status_code == 500  # past authorization (no view here)
    answer = http.post("/v1/jobs/j/pause", json={}, headers={"Authorization": f"Bearer {signed()}"})
    assert answer.status_code == 403
    assert "jwt:alice@example.com lacks the 'operate' scope" in answer.json()["detail"]


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (lambda: signed(exp=int(time.time()) - 3600), "JWT: expired"),
        (lambda: signed(aud="another-api"), "not for this audience"),
        (lambda: signed(iss="https://evil.test"), "not from the accepted issuer"),
        (lambda: signed(key=OTHER_KEY), "bad signature"),
        (lambda: signed(kid="nope"), "no key 'nope' in the JWKS"),
        (
            lambda: jwt.encode(claims(), "", algorithm="none", headers={"kid": "rsa1"}),
            "algorithm 'none' not accepted",
        ),
        (hs256_with_the_public_key, "algorithm 'HS256' not accepted"),
        (lambda: signed("ec1", RSA_KEY, "RS256"), "is not an RS256 key"),
        (lambda: signed(kadence_tenant="*"), "never acts as admin"),
        (lambda: signed(kadence_tenant="kadence-api"), "kadence_tenant"),
        (lambda: signed(kadence_tenant=None), "no tenant"),
        (lambda: signed(scope=[1, 2]), "not a string"),
        (lambda: signed(scope=["read"] * 100), "a list of 64 at most"),
        (lambda: signed(sub="a\nb"), "sub must be"),
        (lambda: signed(sub="x" * 300), "sub must be"),
        (lambda: signed(exp=None), "exp"),
        (lambda: signed(big="x" * 9000), "over 8192 characters"),
    ],
    ids=[
        "expired",
        "audience",
        "issuer",
        "wrong-key",
        "unknown-kid",
        "alg-none",
        "hs256-public-key",
        "key-of-another-alg",
        "admin-claim",
        "reserved-tenant",
        "no-tenant",
        "non-string-scopes",
        "huge-scopes",
        "control-char-sub",
        "huge-sub",
        "no-exp",
        "huge-token",
    ],
)
def test_refused_jwts_are_401_with_the_reason(http: TestClient, token: Any, why: str) -> None:
    answer = get(http, token())
    assert answer.status_code == 401, answer.text
    assert why in answer.json()["detail"]
    assert answer.headers["www-authenticate"] == "Bearer"


def test_unknown_key_ids_do_not_make_the_api_fetch_the_jwks_each_time(
    http: TestClient, jwks: Jwks
) -> None:
    assert get(http, signed()).status_code == 500  # the set is fetched (or was)
    before = jwks.fetches
    for i in range(20):
        assert get(http, signed(kid=f"random-{i}")).status_code == 401
    assert jwks.fetches - before <= 1  # PyJWKClient's cooldown: one forced refresh at most


def test_a_jwks_that_cannot_be_fetched_is_503_not_401() -> None:
    with Jwks() as gone:
        url = gone.url
    http = TestClient(create_app(settings(url)), raise_server_exceptions=False)
    answer = get(http, signed())
    assert answer.status_code == 503
    assert "JWKS cannot be fetched" in answer.json()["detail"]
    assert "Retry-After" in answer.headers


def test_the_connection_guard_knows_a_jwt_only_from_a_jwks_already_fetched(jwks: Jwks) -> None:
    callers = Callers.of(settings(jwks.url))
    token = f"Bearer {signed()}"
    before = jwks.fetches
    assert not callers.known(token)  # nothing fetched yet, and known() never fetches
    assert jwks.fetches == before
    callers.identify(token)
    assert callers.known(token)
