"""Issue 42, item 1, live: a tenant's connections made with the CLI, used by the real worker
against receivers that enforce each kind (API key in a header and in the query, basic, bearer,
OAuth2 client credentials against a token endpoint the test runs, mTLS against a server that
requires a client certificate), a tenant's own signing secret, a rotation while an every-second
job runs, a deletion; another tenant sees and uses none of it; and no secret value appears in
any topic, any process's log or any API answer (grepped)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from pydantic import SecretStr

from apps import cli
from connectors.http import sign
from kadence.sealing import new_key
from testkit.auth_server import AuthServer, ServerTls
from testkit.certs import TestCa
from testkit.topic_reader import read_to_end
from tests.api.conftest import TOKENS, Api, api_stack

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SECRETS = {
    "api_key": "live-key-8f2e",
    "password": "live-pass-71c4",
    "bearer_1": "live-bearer-one-5d",
    "bearer_2": "live-bearer-two-9a",
    "client_secret": "live-client-secret-3b",
    "signing": "live-signing-secret-e0",
}


@pytest.fixture(scope="module")
def sealed(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Api, Path]]:
    """The API stack with a secrets key on the API and every process; where their logs are."""
    tmp = tmp_path_factory.mktemp("sealed")
    with api_stack(kafka_bootstrap, tmp, secrets_keys={"k1": SecretStr(new_key())}) as api:
        yield api, tmp


@pytest.fixture(scope="module")
def receivers() -> Iterator[tuple[AuthServer, AuthServer, TestCa, TestCa]]:
    plain = AuthServer(
        api_keys={SECRETS["api_key"]},
        basic={("svc", SECRETS["password"])},
        bearer={SECRETS["bearer_1"]},
        clients={"kadence": SECRETS["client_secret"]},
    ).start()
    server_ca, client_ca = TestCa("server-ca"), TestCa("client-ca")
    cert = server_ca.issue("127.0.0.1", server=True)
    tls = AuthServer(tls=ServerTls(cert.cert_pem, cert.key_pem, client_ca.pem)).start()
    yield plain, tls, server_ca, client_ca
    plain.stop()
    tls.stop()


def _cli(api: Api, tenant: str, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setenv("KADENCE_API_URL", api.url)
    monkeypatch.setenv("KADENCE_TOKEN", TOKENS[tenant])
    monkeypatch.setenv("COLUMNS", "240")
    return cli.main(list(args))


def _put(api: Api, monkeypatch: pytest.MonkeyPatch, tmp: Path, name: str, body: Any) -> None:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(body))  # a file: never a value on the command line
    assert _cli(api, "acme", monkeypatch, "connection-put", name, str(path)) == 0


def _job(api: Api, url: str, **target: Any) -> dict[str, Any]:
    spec = api.job()
    spec["target"] = {"kind": "http", "url": url, **target}
    return spec


def _run(api: Api, tenant: str, job_id: str) -> dict[str, Any]:
    """Trigger the job and return its finished run."""
    h = api.as_(tenant)
    got = api.http.post(f"/v1/jobs/{job_id}/trigger", headers=h, json={})
    assert got.status_code == 202, got.text
    run_id = got.json()["execution_id"]
    return api.wait(  # type: ignore[no-any-return]
        lambda: next(
            (
                r
                for r in api.http.get(f"/v1/jobs/{job_id}/runs", headers=h).json()
                if r["execution_id"] == run_id
                and r["status"] in ("succeeded", "failed", "dead_lettered")
            ),
            None,
        ),
        60,
        f"the run of {job_id}",
    )


def test_every_kind_live_rotation_deletion_isolation_and_no_secret_anywhere(
    sealed: tuple[Api, Path],
    receivers: tuple[AuthServer, AuthServer, TestCa, TestCa],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    api, logs_in = sealed
    plain, tls, server_ca, client_ca = receivers
    client = client_ca.issue("acme-worker")
    bodies: dict[str, dict[str, Any]] = {
        "hdr": {"kind": "api_key", "param": "X-Api-Key", "value": SECRETS["api_key"]},
        "qry": {
            "kind": "api_key",
            "placement": "query",
            "param": "key",
            "value": SECRETS["api_key"],
        },
        "basic": {"kind": "basic", "username": "svc", "password": SECRETS["password"]},
        "bearer": {"kind": "bearer", "token": SECRETS["bearer_1"]},
        "idp": {
            "kind": "oauth2",
            "token_url": f"{plain.url}/token",
            "client_id": "kadence",
            "client_secret": SECRETS["client_secret"],
        },
        "tls": {
            "kind": "mtls",
            "cert_pem": client.cert_pem,
            "key_pem": client.key_pem,
            "ca_pem": server_ca.pem,
        },
        "sig": {"kind": "signing", "secret": SECRETS["signing"]},
    }
    for name, body in bodies.items():
        _put(api, monkeypatch, tmp_path, name, body)
    answers: list[str] = []
    capsys.readouterr()
    assert _cli(api, "acme", monkeypatch, "connections") == 0
    listing = capsys.readouterr().out
    answers.append(listing)
    for name in bodies:
        assert name in listing
    assert "CN=acme-worker" in listing  # what may be shown of a certificate

    jobs = {
        "c-hdr": _job(api, f"{plain.url}/apikey-header", connection="hdr"),
        "c-qry": _job(api, f"{plain.url}/apikey-query", connection="qry"),
        "c-basic": _job(api, f"{plain.url}/basic", connection="basic"),
        "c-bearer": _job(api, f"{plain.url}/bearer", connection="bearer", secret_ref="sig"),
        "c-oauth": _job(api, f"{plain.url}/oauth", connection="idp"),
        "c-tls": _job(api, f"{tls.url}/mtls", connection="tls"),
    }
    h = api.as_("acme")
    for job_id, spec in jobs.items():
        got = api.http.post(f"/v1/jobs/{job_id}", headers=h, json=spec)
        assert got.status_code == 201, got.text
        answers.append(got.text)
    for job_id in jobs:
        run = _run(api, "acme", job_id)
        assert run["status"] == "succeeded", (job_id, run)
    for path in ("/apikey-header", "/apikey-query", "/basic", "/bearer", "/oauth"):
        assert [h.ok for h in plain.seen(path)] == [True], path  # enforced, and it passed
    assert tls.seen("/mtls")[0].peer_subject == "commonName=acme-worker"
    assert len(plain.token_requests) == 1
    signed = plain.seen("/bearer")[0]  # signed with the tenant's own secret
    stamp = int(signed.headers["webhook-timestamp"])
    want = sign(SECRETS["signing"], signed.headers["webhook-id"], stamp, signed.body)
    assert signed.headers["webhook-signature"] == want

    # rotation while an every-second job runs: the receiver takes both tokens meanwhile
    with plain.lock:
        plain.bearer.add(SECRETS["bearer_2"])
    tick = {**_job(api, f"{plain.url}/bearer", connection="bearer")}
    tick["schedule"] = {"kind": "interval", "every_s": 1}
    assert api.http.post("/v1/jobs/c-tick", headers=h, json=tick).status_code == 201
    before = len(plain.seen("/bearer"))
    api.wait(lambda: len(plain.seen("/bearer")) >= before + 2, 30, "the job running")
    _put(api, monkeypatch, tmp_path, "bearer", {"kind": "bearer", "token": SECRETS["bearer_2"]})
    rotated_at = len(plain.seen("/bearer"))
    api.wait(lambda: len(plain.seen("/bearer")) >= rotated_at + 3, 30, "runs after rotation")
    assert api.http.post("/v1/jobs/c-tick/pause", headers=h, json={}).status_code == 202
    tokens = [hit.headers["authorization"][7:] for hit in plain.seen("/bearer")[before:]]
    assert SECRETS["bearer_2"] in tokens
    switched = tokens.index(SECRETS["bearer_2"])
    assert set(tokens[switched:]) == {SECRETS["bearer_2"]}  # never back to the old one
    assert all(hit.ok for hit in plain.seen("/bearer"))
    shown = api.http.get("/v1/connections/bearer", headers=h).json()
    answers.append(json.dumps(shown))
    assert shown["version"] == 2

    # deleted: the next run fails saying so
    assert _cli(api, "acme", monkeypatch, "connection-rm", "hdr") == 0
    gone = _run(api, "acme", "c-hdr")
    assert gone["status"] in ("failed", "dead_lettered")
    assert "ConnectionDeleted" in json.dumps(gone), gone

    # another tenant: sees none, cannot use acme's by name
    g = api.as_("globex")
    assert api.http.get("/v1/connections", headers=g).json() == []
    assert api.http.get("/v1/connections/basic", headers=g).status_code == 404
    theirs = _job(api, f"{plain.url}/basic", connection="basic")
    assert api.http.post("/v1/jobs/g-basic", headers=g, json=theirs).status_code == 201
    foreign = _run(api, "globex", "g-basic")
    assert "UnknownConnection" in json.dumps(foreign)
    assert [h.ok for h in plain.seen("/basic")] == [True]  # nothing sent for globex

    # hostile: a token endpoint at the metadata address, a huge value, a bad name
    meta = {**bodies["idp"], "token_url": "http://169.254.169.254/token"}
    refused = api.http.put("/v1/connections/meta", headers=h, json=meta)
    assert refused.status_code == 422 and "metadata" in refused.text
    huge = api.http.put(
        "/v1/connections/huge", headers=h, json={"kind": "bearer", "token": "a" * 9000}
    )
    assert huge.status_code == 422
    assert api.http.put("/v1/connections/a%2Fb", headers=h, json=bodies["bearer"]).status_code in (
        404,
        422,
    )
    answers += [refused.text, huge.text]
    for job_id in [*jobs, "c-tick"]:
        answers.append(api.http.get(f"/v1/jobs/{job_id}/history", headers=h).text)
        answers.append(api.http.get(f"/v1/jobs/{job_id}", headers=h).text)

    _no_secret_anywhere(api, logs_in, answers)


def _no_secret_anywhere(api: Api, logs_in: Path, answers: list[str]) -> None:
    """Every topic of the namespace (committed or not), every process's log, every answer."""
    values = [*SECRETS.values()]
    admin = AdminClient({"bootstrap.servers": api.settings.bootstrap_servers})
    prefix = api.settings.namespace + "."
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    assert f"{prefix}connections" in topics
    seen = 0
    for topic in topics:
        for msg in read_to_end(api.settings.bootstrap_servers, topic, isolation="read_uncommitted"):
            seen += 1
            blob = (msg.key() or b"") + (msg.value() or b"")
            for pair in msg.headers() or []:
                header = pair[1]
                blob += header if isinstance(header, bytes) else str(header or "").encode()
            for value in values:
                assert value.encode() not in blob, (topic, value)
    assert seen > 20
    logs = [p for p in logs_in.rglob("*.log") if p.is_file()]
    assert logs
    for path in logs:
        written = path.read_bytes()
        for value in values:
            assert value.encode() not in written, (path, value)
    for answer in answers:
        for value in values:
            assert value not in answer
