"""Connections on the webhook target, against a receiver that enforces each kind of credential
(testkit/auth_server.py): API key in a header and in the query, basic, bearer, OAuth2 client
credentials against the receiver's own token endpoint, mTLS against a server that requires a
client certificate; rotation, deletion, the wrong tenant, the wrong kind, a forged record. No
broker: the connections are a dict the test fills as the worker's reader would."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from connectors.http import HttpCaller, sign
from connectors.ssrf import AddressPolicy
from kadence.connections import CREDENTIAL, seal
from kadence.models import ExecutionRequested, HttpTarget, OutcomeStatus
from kadence.models.connections import ConnectionRecord, connection_key
from kadence.sealing import Keyring, new_key
from kadence.targets import Result, Stop
from testkit.auth_server import AuthServer, ServerTls
from testkit.certs import TestCa

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


class Source:
    """What the worker's reader of the connections topic offers, filled by the test."""

    def __init__(self) -> None:
        self.records: dict[str, ConnectionRecord] = {}
        self.deleted: dict[str, datetime] = {}
        self.is_ready = True

    def get(self, tenant: str, name: str) -> ConnectionRecord | None:
        return self.records.get(connection_key(tenant, name))

    def deleted_at(self, tenant: str, name: str) -> datetime | None:
        return self.deleted.get(connection_key(tenant, name))

    def ready(self) -> bool:
        return self.is_ready


@pytest.fixture
def keyring() -> Keyring:
    found = Keyring.from_settings({"k1": new_key()}, None)
    assert found is not None
    return found


@pytest.fixture
def source() -> Source:
    return Source()


@pytest.fixture
def server() -> Iterator[AuthServer]:
    srv = AuthServer(
        api_keys={"key-1"},
        basic={("svc", "p@ss:w%rd")},
        bearer={"bearer-1"},
        clients={"kadence": "s3cret/+="},
    ).start()
    yield srv
    srv.stop()


def put(
    source: Source, keyring: Keyring, name: str, body: Mapping[str, object], tenant: str = "acme"
) -> ConnectionRecord:
    current = source.get(tenant, name)
    record = seal(
        keyring,
        CREDENTIAL.validate_python(body),
        tenant=tenant,
        name=name,
        version=current.version + 1 if current else 1,
        changed_at=T,
    )
    source.records[connection_key(tenant, name)] = record
    return record


def oauth(token_url: str, **fields: str) -> dict[str, str]:
    """An OAuth2 connection's body (client `kadence` with the receiver's secret by default)."""
    return {
        "kind": "oauth2",
        "token_url": token_url,
        "client_id": "kadence",
        "client_secret": "s3cret/+=",
        **fields,
    }


def caller(
    source: Source, keyring: Keyring, allow: tuple[str, ...] = ("127.0.0.0/8",)
) -> HttpCaller:
    return HttpCaller(AddressPolicy(allow), {}, connections=source, keyring=keyring, warm_s=0)


def execution(
    url: str, connection: str | None, tenant: str = "acme", **target: object
) -> ExecutionRequested:
    return ExecutionRequested(
        execution_id=f"{tenant}/job@2026-12-01T09:00:00.000Z",
        tenant=tenant,
        job_id="job",
        definition_version=1,
        nominal_at=T,
        due_at=T,
        dispatched_at=T,
        target=HttpTarget(url=url, connection=connection, **target),
        payload=b"{}",
        timeout_ms=5_000,
        lease_ttl_ms=30_000,
    )


def call(c: HttpCaller, ex: ExecutionRequested) -> Result:
    return c(ex, Stop(), time.monotonic() + ex.timeout_ms / 1000)


def error_of(result: Result) -> tuple[str, str]:
    assert result.error is not None
    return result.error.type, result.error.message


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/apikey-header", {"kind": "api_key", "value": "key-1"}),
        (
            "/apikey-query",
            {"kind": "api_key", "placement": "query", "param": "key", "value": "key-1"},
        ),
        ("/basic", {"kind": "basic", "username": "svc", "password": "p@ss:w%rd"}),
        ("/bearer", {"kind": "bearer", "token": "bearer-1"}),
    ],
)
def test_each_static_kind_is_accepted_and_without_it_refused(
    server: AuthServer, source: Source, keyring: Keyring, path: str, body: dict[str, object]
) -> None:
    put(source, keyring, "svc", body)
    c = caller(source, keyring)
    assert call(c, execution(server.url + path, "svc")).status is OutcomeStatus.succeeded
    without = call(c, execution(server.url + path, None))
    assert error_of(without)[0] == "HttpStatus"  # the receiver enforces it: 401 without
    assert [h.ok for h in server.seen(path)] == [True, False]


def test_an_api_key_in_the_query_never_reaches_a_message(source: Source, keyring: Keyring) -> None:
    put(
        source,
        keyring,
        "q",
        {"kind": "api_key", "placement": "query", "param": "key", "value": "key-9"},
    )
    # nothing listens there: the failure names the URL, never the URL with the key
    result = call(caller(source, keyring), execution("http://127.0.0.1:9/x?a=1", "q"))
    assert result.status is OutcomeStatus.failed
    assert "key-9" not in error_of(result)[1]


def test_oauth2_fetches_one_token_for_many_runs_and_again_after_a_rotation(
    server: AuthServer, source: Source, keyring: Keyring
) -> None:
    body = oauth(server.url + "/token", scope="jobs:run")
    put(source, keyring, "idp", body)
    c = caller(source, keyring)

    futures = [c.start(execution(server.url + "/oauth", "idp"), Stop()) for _ in range(20)]
    results = [f.result(10) for f in futures]  # twenty runs under way at once
    assert {r.status for r in results} == {OutcomeStatus.succeeded}
    assert len(server.token_requests) == 1  # twenty runs at once: one fetch
    [fetch] = server.token_requests
    assert b"grant_type=client_credentials" in fetch.body
    assert b"scope=jobs%3Arun" in fetch.body
    assert fetch.headers["authorization"].startswith("Basic ")  # client_secret_basic
    assert b"s3cret" not in fetch.body
    assert call(c, execution(server.url + "/oauth", "idp")).status is OutcomeStatus.succeeded
    assert len(server.token_requests) == 1  # kept until shortly before it expires
    put(source, keyring, "idp", {**body, "client_auth": "body"})  # rotated
    assert call(c, execution(server.url + "/oauth", "idp")).status is OutcomeStatus.succeeded
    assert len(server.token_requests) == 2
    assert b"client_secret=s3cret" in server.token_requests[1].body  # client_secret_post


def test_oauth2_token_kept_until_shortly_before_it_expires(
    server: AuthServer, source: Source, keyring: Keyring
) -> None:
    server.token_lifetime_s = 1  # renewed a tenth of its life early: after 0.9 s
    put(
        source,
        keyring,
        "idp",
        oauth(server.url + "/token", client_id="kadence", client_secret="s3cret/+="),
    )
    c = caller(source, keyring)
    assert call(c, execution(server.url + "/oauth", "idp")).status is OutcomeStatus.succeeded
    time.sleep(1.0)
    assert call(c, execution(server.url + "/oauth", "idp")).status is OutcomeStatus.succeeded
    assert len(server.token_requests) == 2
    assert all(h.ok for h in server.seen("/oauth"))


def test_a_failed_token_fetch_is_reported_as_such_and_not_repeated_per_run(
    server: AuthServer, source: Source, keyring: Keyring
) -> None:
    put(
        source,
        keyring,
        "idp",
        oauth(server.url + "/token", client_id="kadence", client_secret="wrong"),
    )
    c = caller(source, keyring)
    first = call(c, execution(server.url + "/oauth", "idp"))
    second = call(c, execution(server.url + "/oauth", "idp"))
    for result in (first, second):
        kind, message = error_of(result)
        assert kind == "OAuth2TokenFailed"
        assert "401: invalid_client (bad client)" in message
        assert "wrong" not in message
        assert result.retryable is False  # a 4xx from the token endpoint: not by retrying
    assert len(server.token_requests) == 1  # the second run within a second: the same answer
    assert server.seen("/oauth") == []  # nothing sent to the target without a token


def test_a_token_endpoint_at_a_metadata_address_is_refused(
    source: Source, keyring: Keyring, server: AuthServer
) -> None:
    put(
        source,
        keyring,
        "idp",
        oauth("http://169.254.169.254/token", client_id="k", client_secret="s"),
    )
    kind, message = error_of(call(caller(source, keyring), execution(server.url + "/oauth", "idp")))
    assert kind == "OAuth2TokenFailed"
    assert "metadata" in message


def test_a_401_drops_the_token_so_the_next_attempt_fetches_another(
    server: AuthServer, source: Source, keyring: Keyring
) -> None:
    put(
        source,
        keyring,
        "idp",
        oauth(server.url + "/token", client_id="kadence", client_secret="s3cret/+="),
    )
    c = caller(source, keyring)
    assert call(c, execution(server.url + "/oauth", "idp")).status is OutcomeStatus.succeeded
    with server.lock:
        server.issued.clear()  # the receiver revokes every token
    assert error_of(call(c, execution(server.url + "/oauth", "idp")))[0] == "HttpStatus"
    assert call(c, execution(server.url + "/oauth", "idp")).status is OutcomeStatus.succeeded
    assert len(server.token_requests) == 2


@pytest.fixture
def ca() -> TestCa:
    return TestCa()


def test_mtls_presents_the_client_certificate_and_rotates(
    source: Source, keyring: Keyring, ca: TestCa
) -> None:
    server_cert = ca.issue("127.0.0.1", server=True)
    client_ca = TestCa("client-ca")
    srv = AuthServer(
        tls=ServerTls(server_cert.cert_pem, server_cert.key_pem, client_ca.pem)
    ).start()
    try:
        first = client_ca.issue("acme-client-1")
        put(
            source,
            keyring,
            "tls",
            {
                "kind": "mtls",
                "cert_pem": first.cert_pem,
                "key_pem": first.key_pem,
                "ca_pem": ca.pem,
            },
        )
        c = caller(source, keyring)
        assert call(c, execution(srv.url + "/mtls", "tls")).status is OutcomeStatus.succeeded
        assert srv.seen("/mtls")[-1].peer_subject == "commonName=acme-client-1"
        second = client_ca.issue("acme-client-2")
        put(
            source,
            keyring,
            "tls",
            {
                "kind": "mtls",
                "cert_pem": second.cert_pem,
                "key_pem": second.key_pem,
                "ca_pem": ca.pem,
            },
        )
        assert call(c, execution(srv.url + "/mtls", "tls")).status is OutcomeStatus.succeeded
        assert srv.seen("/mtls")[-1].peer_subject == "commonName=acme-client-2"
        # without the connection (trusting the server) the server refuses the handshake
        trusting = ssl.create_default_context(cadata=ca.pem)
        plain = HttpCaller(AddressPolicy(["127.0.0.0/8"]), {}, trusting, warm_s=0)
        refused = call(plain, execution(srv.url + "/mtls", None))
        assert refused.status is OutcomeStatus.failed
        assert len(srv.seen("/mtls")) == 2
        # an mTLS connection on an http:// URL is refused before anything is sent
        assert error_of(call(c, execution("http://127.0.0.1:9/mtls", "tls")))[0] == "InvalidRequest"
    finally:
        srv.stop()


def test_unknown_deleted_foreign_and_wrong_kind_fail_for_good_with_the_reason(
    server: AuthServer, source: Source, keyring: Keyring
) -> None:
    c = caller(source, keyring)
    put(source, keyring, "theirs", {"kind": "bearer", "token": "bearer-1"}, tenant="other")
    unknown = call(c, execution(server.url + "/bearer", "theirs"))  # another tenant's name
    assert error_of(unknown) == (
        "UnknownConnection",
        "connection 'theirs' is unknown for tenant 'acme'",
    )
    assert unknown.retryable is False
    put(source, keyring, "gone", {"kind": "bearer", "token": "bearer-1"})
    del source.records["acme/gone"]
    source.deleted["acme/gone"] = T
    assert error_of(call(c, execution(server.url + "/bearer", "gone"))) == (
        "ConnectionDeleted",
        "connection 'gone' of tenant 'acme' was deleted at 2026-12-01T09:00:00+00:00",
    )
    put(source, keyring, "sig", {"kind": "signing", "secret": "whsec_c2VjcmV0"})
    assert error_of(call(c, execution(server.url + "/bearer", "sig")))[0] == "WrongConnectionKind"
    assert server.seen() == []


def test_a_record_copied_from_another_tenant_does_not_open(
    server: AuthServer, source: Source, keyring: Keyring
) -> None:
    theirs = put(source, keyring, "svc", {"kind": "bearer", "token": "bearer-1"}, tenant="other")
    source.records["acme/svc"] = theirs.model_copy(update={"tenant": "acme"})  # a forgery
    kind, message = error_of(
        call(caller(source, keyring), execution(server.url + "/bearer", "svc"))
    )
    assert kind == "ConnectionUnreadable"
    assert "does not open for this record" in message
    assert server.seen() == []


def test_a_run_waits_for_the_reader_to_catch_up_before_judging(
    server: AuthServer, source: Source, keyring: Keyring
) -> None:
    source.is_ready = False
    c = caller(source, keyring)
    future = c.start(execution(server.url + "/bearer", "svc"), Stop())
    time.sleep(0.3)
    assert not future.done()  # not "unknown" while the topic is still being read
    put(source, keyring, "svc", {"kind": "bearer", "token": "bearer-1"})
    source.is_ready = True
    assert future.result(5).status is OutcomeStatus.succeeded


def test_without_keys_a_connection_fails_saying_so(server: AuthServer) -> None:
    c = HttpCaller(AddressPolicy(["127.0.0.0/8"]), {}, warm_s=0)
    kind, message = error_of(call(c, execution(server.url + "/bearer", "svc")))
    assert kind == "UnknownConnection"
    assert "KADENCE_SECRETS_KEYS" in message


def test_the_tenants_own_signing_secret_comes_before_the_workers(
    server: AuthServer, source: Source, keyring: Keyring
) -> None:
    put(source, keyring, "sig", {"kind": "signing", "secret": "tenant-secret"})
    c = HttpCaller(
        AddressPolicy(["127.0.0.0/8"]),
        {"*": {"sig": SecretStr("operator-secret")}},
        connections=source,
        keyring=keyring,
        warm_s=0,
    )
    put(source, keyring, "svc", {"kind": "bearer", "token": "bearer-1"})
    ex = execution(server.url + "/bearer", "svc", secret_ref="sig")
    assert call(c, ex).status is OutcomeStatus.succeeded
    hit = server.seen("/bearer")[-1]
    stamp = int(hit.headers["webhook-timestamp"])
    assert hit.headers["webhook-signature"] == sign(
        "tenant-secret", ex.execution_id, stamp, hit.body
    )
    del source.records["acme/sig"]  # without the tenant's own: the workers' shared one
    assert call(c, ex).status is OutcomeStatus.succeeded
    hit = server.seen("/bearer")[-1]
    stamp = int(hit.headers["webhook-timestamp"])
    assert hit.headers["webhook-signature"] == sign(
        "operator-secret", ex.execution_id, stamp, hit.body
    )
