"""The SQS target without a queue server: the request it builds, how it reads a refusal, its
credentials and its address rules (the same requests against ElasticMQ: test_sqs_live.py)."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import ValidationError

from connectors.sqs import SqsCaller, dedup_id, message, refusal
from connectors.ssrf import AddressPolicy
from kadence.codec import describe_validation_error
from kadence.models import ExecutionRequested, OutcomeStatus, QueueFormat, SqsTarget
from kadence.settings import KadenceSettings
from kadence.sqs_keys import AwsKey
from kadence.targets import Result, Stop

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


@dataclass
class FakeQueue:
    """Answers every request with `status` and `body`; records what it got."""

    status: int = 200
    body: bytes = b'{"MessageId":"m-1"}'
    got: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                outer.got.append(
                    ({k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length))
                )
                self.send_response(outer.status)
                self.send_header("content-length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, queue: str = "orders") -> str:
        return f"http://127.0.0.1:{self.port}/000000000000/{queue}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def queue() -> Iterator[FakeQueue]:
    q = FakeQueue()
    yield q
    q.stop()


def execution(
    target: SqsTarget, payload: bytes = b"ship order 42", **kw: Any
) -> ExecutionRequested:
    values: dict[str, Any] = {
        "execution_id": "acme/orders@2026-12-01T09:00:00.000Z",
        "tenant": "acme",
        "job_id": "orders",
        "definition_version": 1,
        "attempt": 2,
        "delivery": 1,
        "nominal_at": T,
        "due_at": T,
        "dispatched_at": T,
        "target": target,
        "payload": payload,
        "timeout_ms": 5_000,
        "lease_ttl_ms": 30_000,
    }
    return ExecutionRequested.model_validate({**values, **kw})


def key(access: str = "AKIDEXAMPLE00001") -> AwsKey:
    return AwsKey.model_validate({"access_key_id": access, "secret_access_key": SECRET_KEY})


def caller(
    allow: list[str] | None = None, credentials: dict[str, dict[str, AwsKey]] | None = None
) -> SqsCaller:
    return SqsCaller(AddressPolicy(["127.0.0.0/8"] if allow is None else allow), credentials or {})


def call(c: SqsCaller, ex: ExecutionRequested) -> Result:
    return c(ex, Stop(), time.monotonic() + 5)


def error(kind: str, why: str = "refused") -> bytes:
    return json.dumps({"__type": kind, "message": why}).encode()


def attributes(request: dict[str, Any]) -> dict[str, str]:
    return {k: v["StringValue"] for k, v in request["MessageAttributes"].items()}


def test_a_fifo_queue_gets_the_idempotency_key_as_its_deduplication_id() -> None:
    target = SqsTarget(queue_url="https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo")
    request = message(execution(target), target)
    assert request["MessageDeduplicationId"] == "acme/orders@2026-12-01T09:00:00.000Z"
    assert request["MessageGroupId"] == "orders"  # the job id: a job's runs in order
    assert request["MessageBody"] == "ship order 42"
    assert attributes(request) == {
        "kadence-execution-id": "acme/orders@2026-12-01T09:00:00.000Z",
        "kadence-tenant": "acme",
        "kadence-job": "orders",
        "kadence-due-at": "2026-12-01T09:00:00.000Z",
        "kadence-attempt": "2",
        "kadence-delivery": "1",
        "content-type": "application/json",  # the job's (ExecutionRequested.content_type)
    }
    assert len(request["MessageAttributes"]) <= 10  # SQS's limit


def test_a_standard_queue_gets_no_deduplication_id_but_its_group_when_named() -> None:
    plain = SqsTarget(queue_url="https://sqs.eu-west-1.amazonaws.com/1/orders")
    assert "MessageDeduplicationId" not in message(execution(plain), plain)
    assert "MessageGroupId" not in message(execution(plain), plain)
    fair = plain.model_copy(update={"message_group_id": "tenant-a"})
    assert message(execution(fair), fair)["MessageGroupId"] == "tenant-a"


def test_a_long_execution_id_is_hashed_into_a_deduplication_id_the_same_every_time() -> None:
    long_id = "acme/" + "j" * 120 + "@2026-12-01T09:00:00.000Z"
    first, again = dedup_id(long_id), dedup_id(long_id)
    assert first == again and first.startswith("sha256-") and len(first) <= 128
    assert dedup_id(long_id + "x") != first
    assert dedup_id("acme/a b@1") != "acme/a b@1"  # a space is not allowed either


@pytest.mark.parametrize(
    ("payload", "body", "encoded"),
    [
        (b"caf\xc3\xa9 \xf0\x9f\x98\x80", "café 😀", False),
        (b"\x00\x01binary\xff", base64.b64encode(b"\x00\x01binary\xff").decode(), True),
        (b"ctrl\x07char", base64.b64encode(b"ctrl\x07char").decode(), True),
        (b"", "", True),  # SQS refuses an empty body: base64 of nothing, still empty, says so
    ],
)
def test_a_body_sqs_cannot_carry_as_text_goes_as_base64_and_says_so(
    payload: bytes, body: str, encoded: bool
) -> None:
    target = SqsTarget(queue_url="http://127.0.0.1:1/000000000000/q")
    request = message(execution(target, payload), target)
    assert request["MessageBody"] == body
    assert (attributes(request).get("kadence-body-encoding") == "base64") is encoded


def test_the_json_format_sends_the_envelope() -> None:
    target = SqsTarget(queue_url="http://127.0.0.1:1/000000000000/q", format=QueueFormat.json)
    request = message(execution(target, b'{"order":42}'), target)
    envelope = json.loads(request["MessageBody"])
    assert envelope["execution_id"] == "acme/orders@2026-12-01T09:00:00.000Z"
    assert envelope["payload"] == '{"order":42}'
    assert attributes(request)["content-type"] == "application/json"


def test_success_is_the_queue_accepting_the_message(queue: FakeQueue) -> None:
    result = call(caller(), execution(SqsTarget(queue_url=queue.url())))
    assert result.status is OutcomeStatus.succeeded
    [(headers, body)] = queue.got
    assert headers["x-amz-target"] == "AmazonSQS.SendMessage"
    assert headers["content-type"] == "application/x-amz-json-1.0"
    assert "authorization" not in headers  # no credentials_ref: unsigned
    assert json.loads(body)["QueueUrl"] == queue.url()


def test_a_send_starts_without_a_thread_on_the_loop(queue: FakeQueue) -> None:
    c = caller()
    ex = execution(SqsTarget(queue_url=queue.url()))
    assert c.can_start(ex)
    future = c.start(ex, Stop(), None)
    assert future.result(timeout=30).status is OutcomeStatus.succeeded
    assert len(queue.got) == 1


@pytest.mark.parametrize(
    ("status", "body", "retryable", "code"),
    [
        (
            400,
            error("com.amazonaws.sqs#QueueDoesNotExist", "no such queue"),
            False,
            "QueueDoesNotExist",
        ),
        (
            400,
            error("com.amazon.coral.availability#ThrottlingException"),
            True,
            "ThrottlingException",
        ),
        (
            403,
            error("com.amazon.coral.service#InvalidClientTokenId"),
            False,
            "InvalidClientTokenId",
        ),
        (500, error("com.amazonaws.sqs#InternalError"), True, "InternalError"),
        (503, b"<html>gateway</html>", True, "Unknown"),
        (429, b"", True, "Unknown"),
    ],
)
def test_a_refusal_fails_with_the_queues_reason_retryable_only_when_it_can_pass(
    queue: FakeQueue, status: int, body: bytes, retryable: bool, code: str
) -> None:
    queue.status, queue.body = status, body
    result = call(caller(), execution(SqsTarget(queue_url=queue.url())))
    assert result.status is OutcomeStatus.failed
    assert result.retryable is retryable
    assert result.error is not None
    assert result.error.code == code
    assert str(status) in result.error.message and queue.url() in result.error.message


def test_refusal_reads_what_it_can_of_any_body() -> None:
    assert refusal('{"__type":"a#B","Message":"m"}') == ("B", "m")
    assert refusal("[1]") == ("Unknown", "[1]")
    assert refusal("") == ("Unknown", "(no body)")


def test_a_signed_request_names_the_tenants_key_and_never_carries_the_secret(
    queue: FakeQueue,
) -> None:
    c = caller(
        credentials={"acme": {"orders-key": key("AKIDACMEONLY0001")}, "*": {"shared": key()}}
    )
    target = SqsTarget(queue_url=queue.url(), credentials_ref="orders-key", region="eu-north-1")
    assert call(c, execution(target)).status is OutcomeStatus.succeeded
    [(headers, body)] = queue.got
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDACMEONLY0001/")
    assert "/eu-north-1/sqs/aws4_request" in headers["authorization"]
    assert SECRET_KEY not in json.dumps(headers) and SECRET_KEY.encode() not in body
    shared = target.model_copy(update={"credentials_ref": "shared"})
    assert call(c, execution(shared)).status is OutcomeStatus.succeeded
    assert "Credential=AKIDEXAMPLE00001/" in queue.got[1][0]["authorization"]


def test_another_tenants_credentials_are_never_used(queue: FakeQueue) -> None:
    c = caller(credentials={"acme": {"orders-key": key()}})
    target = SqsTarget(queue_url=queue.url(), credentials_ref="orders-key")
    result = call(c, execution(target, tenant="globex", execution_id="globex/orders@x"))
    assert (result.status, result.retryable) == (OutcomeStatus.failed, False)
    assert result.error is not None and result.error.type == "UnknownSecret"
    assert "globex" in result.error.message
    assert queue.got == []  # nothing sent


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/000000000000/q",  # the cloud metadata address
        "http://10.0.0.8:9324/000000000000/q",
        "http://[::1]:9324/000000000000/q",
        "http://localhost:9324/000000000000/q",
    ],
)
def test_a_queue_at_a_private_address_is_refused_before_connecting(url: str) -> None:
    result = call(caller(allow=[]), execution(SqsTarget(queue_url=url)))
    assert (result.status, result.retryable) == (OutcomeStatus.failed, False)
    assert result.error is not None and result.error.type == "AddressRefused"


def test_a_queue_server_that_is_down_is_a_retryable_failure() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    result = call(caller(), execution(SqsTarget(queue_url=f"http://127.0.0.1:{port}/0/q")))
    assert (result.status, result.retryable) == (OutcomeStatus.failed, True)
    assert result.error is not None and result.error.type == "ConnectError"


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("queue_url", "ftp://sqs.example/1/q", "absolute http"),
        ("queue_url", "https://AKIA:secret@sqs.example/1/q", "credentials_ref"),
        ("queue_url", "https://sqs.example/1/q?Action=DeleteQueue", "query"),
        ("queue_url", "https://sqs.example/q", "/<account>/<queue>"),
        ("queue_url", "https://sqs.example/1/q/../../other", "/<account>/<queue>"),
        ("queue_url", "https://sqs.example/1/" + "q" * 81, "/<account>/<queue>"),
        ("queue_url", "https://sqs.example/1/" + "q" * 76 + ".fifo", "/<account>/<queue>"),
        ("message_group_id", "has space", "pattern"),
        ("message_group_id", "g" * 129, "pattern"),
        ("region", "EU WEST", "pattern"),
        ("credentials_ref", "../other", "pattern"),
    ],
)
def test_a_bad_target_is_refused_with_the_rule_and_without_echoing_a_secret(
    field: str, value: str, why: str
) -> None:
    base: dict[str, Any] = {"queue_url": "https://sqs.example/1/q"}
    with pytest.raises(ValidationError) as err:
        SqsTarget.model_validate({**base, field: value})
    assert why in str(err.value)
    said = describe_validation_error(err.value)  # what the API answers (422) and the CLI prints
    assert any(why in line for line in said)
    assert not any("secret@" in line for line in said)


def test_the_signing_region_comes_from_an_aws_queue_url_unless_named() -> None:
    aws = SqsTarget(queue_url="https://sqs.ap-southeast-2.amazonaws.com/1/q")
    assert aws.signing_region == "ap-southeast-2"
    assert aws.model_copy(update={"region": "us-west-2"}).signing_region == "us-west-2"
    assert SqsTarget(queue_url="http://127.0.0.1:9324/1/q").signing_region == "us-east-1"


def test_credentials_come_from_settings_by_tenant_and_never_show(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    value = {
        "acme": {
            "orders-key": {"access_key_id": "AKIDEXAMPLE00001", "secret_access_key": SECRET_KEY}
        }
    }
    monkeypatch.setenv("KADENCE_SQS_CREDENTIALS", json.dumps(value))
    settings = KadenceSettings()
    assert settings.sqs_credentials["acme"]["orders-key"].access_key_id == "AKIDEXAMPLE00001"
    assert SECRET_KEY not in repr(settings) and SECRET_KEY not in str(settings.model_dump())
    bad = {
        "not a tenant!": {
            "k": {"access_key_id": "AKIDEXAMPLE00001", "secret_access_key": SECRET_KEY}
        }
    }
    monkeypatch.setenv("KADENCE_SQS_CREDENTIALS", json.dumps(bad))
    with pytest.raises(ValidationError) as err:
        KadenceSettings()
    assert "neither a tenant identifier" in str(err.value) and SECRET_KEY not in str(err.value)
    monkeypatch.setenv(
        "KADENCE_SQS_CREDENTIALS",
        json.dumps({"acme": {"k": {"access_key_id": "AKIDEXAMPLE00001"}}}),
    )
    with pytest.raises(ValidationError, match="secret_access_key"):
        KadenceSettings()
