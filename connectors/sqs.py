"""The SQS queue target: send the run as one message to an Amazon SQS queue (or a server that
speaks SQS's JSON protocol: ElasticMQ, LocalStack); success when the queue accepts it.

- The queue's address goes through the same SSRF rules as a webhook's (connectors/ssrf.py):
  no private, loopback, link-local or metadata address unless KADENCE_TARGET_ALLOW_CIDRS (or
  KADENCE_TARGET_ALLOW_CIDRS_BY_TENANT, for the job's tenant) allows it, and the connection
  goes to the address that was checked.
- Requests are signed (AWS Signature Version 4, connectors/sigv4.py) with the key the worker
  holds for the job's tenant under the job's `credentials_ref` (KADENCE_SQS_CREDENTIALS); a
  target without one is sent unsigned. A key bound to queue URL prefixes (`queue_urls`, which
  a `"*"` key shared by every tenant must have) signs only for a queue URL under one of them
  (same scheme, host and port, path on a `/` boundary): any other fails for good
  (`CredentialsNotForQueue`), nothing sent, so a tenant cannot aim a shared key at its own host.
- A FIFO queue gets the idempotency key as its `MessageDeduplicationId` (the execution id, or
  `sha256-<hex of it>` when it is longer than SQS's 128 characters) and `MessageGroupId` from the
  target (by default the job id): SQS drops a duplicate within its 5-minute window. Every message
  carries the ids as attributes (`kadence-execution-id`, ...), so a standard queue's consumer
  can deduplicate.
- 2xx succeeds; throttling, 5xx and transport errors fail retryably; any other refusal
  (a queue that does not exist, a refused key, a body SQS does not accept) fails for good, with
  the queue's reason.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import ssl
import time
from collections.abc import Mapping
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from connectors.aio import EventLoop
from connectors.http import UnknownSecretError, secret_for, unknown_secret
from connectors.http_dns import Resolver
from connectors.http_exchange import checked_exchange
from connectors.http_pool import ConnectionPool
from connectors.kafka_topic import envelope_json
from connectors.sigv4 import Credentials, sign
from connectors.ssrf import AddressPolicy
from kadence.headers import iso_utc
from kadence.models import ExecutionRequested, OutcomeStatus, QueueFormat, SqsTarget
from kadence.sqs_keys import AwsKey
from kadence.targets import Result, Stop

SEND = "AmazonSQS.SendMessage"
CONTENT_TYPE = "application/x-amz-json-1.0"
_DEDUP_ID = re.compile(r"[!-~]{1,128}")
"""What SQS accepts as a deduplication id: 1-128 letters, digits and punctuation."""
_NOT_SQS_TEXT = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters an SQS message body may not hold."""
RETRYABLE_ERRORS = frozenset(
    {
        "ThrottlingException",
        "RequestThrottled",
        "KmsThrottled",
        "ServiceUnavailable",
        "InternalError",
        "InternalFailure",
    }
)


def dedup_id(execution_id: str) -> str:
    """The FIFO deduplication id for a run: its execution id when SQS accepts it as one, else a
    hash of it (the same for every attempt and every worker)."""
    if _DEDUP_ID.fullmatch(execution_id):
        return execution_id
    return "sha256-" + hashlib.sha256(execution_id.encode()).hexdigest()


def body_of(ex: ExecutionRequested, target: SqsTarget) -> tuple[str, bool]:
    """The message body and whether it is base64 (a payload SQS could not carry as text)."""
    if target.format is QueueFormat.json:
        return envelope_json(ex).decode(), False
    try:
        text = ex.payload.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or _NOT_SQS_TEXT.search(text) or not text:
        return base64.b64encode(ex.payload).decode(), True
    return text, False


def message(ex: ExecutionRequested, target: SqsTarget) -> dict[str, Any]:
    """The SendMessage request for `ex` (SQS's JSON protocol)."""
    body, encoded = body_of(ex, target)
    json_body = target.format is QueueFormat.json
    attributes = {
        "kadence-execution-id": ex.execution_id,
        "kadence-tenant": ex.tenant,
        "kadence-job": ex.job_id,
        "kadence-due-at": iso_utc(ex.due_at),
        "kadence-attempt": str(ex.attempt),
        "kadence-delivery": str(ex.delivery),
        "content-type": "application/json" if json_body else ex.content_type,
    }
    if encoded:
        attributes["kadence-body-encoding"] = "base64"
    request: dict[str, Any] = {
        "QueueUrl": target.queue_url,
        "MessageBody": body,
        "MessageAttributes": {
            name: {"DataType": "String", "StringValue": value}
            for name, value in attributes.items()
            if value
        },
    }
    if target.fifo:
        request["MessageDeduplicationId"] = dedup_id(ex.execution_id)
        request["MessageGroupId"] = target.message_group_id or ex.job_id
    elif target.message_group_id is not None:
        request["MessageGroupId"] = target.message_group_id
    return request


class QueueNotCoveredError(LookupError):
    """The job's key is bound to queue URLs (`queue_urls`) that do not cover its queue_url."""


class SqsCaller:
    def __init__(
        self,
        policy: AddressPolicy,
        credentials: Mapping[str, Mapping[str, AwsKey]],
        tls: ssl.SSLContext | None = None,
        *,
        loop: EventLoop | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self.policy = policy
        self.credentials = credentials
        self.resolver = resolver or Resolver(policy)
        self.pool = ConnectionPool(tls or ssl.create_default_context())
        self.loop = loop or EventLoop("sqs")

    def _headers(self, target: SqsTarget, tenant: str, host: str, body: bytes) -> dict[str, str]:
        headers = {"host": host, "content-type": CONTENT_TYPE, "x-amz-target": SEND}
        if target.credentials_ref is None:
            return headers
        key = secret_for(self.credentials, tenant, target.credentials_ref)
        if not key.may_sign_for(target.queue_url):
            raise QueueNotCoveredError(target.credentials_ref)
        creds = Credentials(key.access_key_id, key.secret_access_key, key.session_token)
        now = datetime.now(UTC)
        region = target.signing_region
        return sign(
            "POST", "/", [], headers, body, credentials=creds, region=region, service="sqs", now=now
        )

    def start(
        self, ex: ExecutionRequested, stop: Stop, record: bytes | None = None
    ) -> Future[Result]:
        """The request under way on the loop, its deadline the run's timeout from now."""
        deadline = time.monotonic() + ex.timeout_ms / 1000
        return self.loop.run(lambda: self.send(ex, stop, deadline), stop)

    def can_start(self, ex: ExecutionRequested) -> bool:
        return True

    def __call__(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        return self.loop.run(lambda: self.send(ex, stop, deadline), stop).result()

    async def send(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        target = ex.target
        assert isinstance(target, SqsTarget)
        body = json.dumps(message(ex, target), separators=(",", ":")).encode()
        try:
            headers = self._headers(target, ex.tenant, urlsplit(target.queue_url).netloc, body)
        except UnknownSecretError:
            return unknown_secret(
                "credentials_ref", target.credentials_ref, ex.tenant, "SQS_CREDENTIALS"
            )
        except QueueNotCoveredError:
            why = (
                f"credentials_ref {target.credentials_ref!r} does not sign for "
                f"{target.queue_url}: it is not under the queue_urls that key is bound to "
                "(KADENCE_SQS_CREDENTIALS of the workers); nothing was sent"
            )
            return Result.failed("CredentialsNotForQueue", why, retryable=False)
        answer = await checked_exchange(
            self.pool,
            self.resolver,
            target.queue_url,
            tenant=ex.tenant,
            method="POST",
            body=body,
            headers=headers,
            deadline=deadline,
            timeout_ms=ex.timeout_ms,
        )
        if isinstance(answer, Result):
            return answer
        response, body_start = answer
        if stop.is_set():
            return Result(stop.reason or OutcomeStatus.cancelled)
        if 200 <= response.status < 300:
            return Result.ok()
        kind, why = refusal(body_start.decode(errors="replace"))
        retryable = response.status >= 500 or response.status == 429 or kind in RETRYABLE_ERRORS
        message_ = f"{response.status} {kind} from {target.queue_url}: {why}"
        return Result.failed("SqsError", message_, retryable=retryable, code=kind)


def refusal(text: str) -> tuple[str, str]:
    """The error's type and message from an SQS JSON error body (`__type` may be qualified:
    `com.amazonaws.sqs#QueueDoesNotExist`)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return "Unknown", text.strip()[:1024] or "(no body)"
    if not isinstance(doc, dict):
        return "Unknown", text.strip()[:1024]
    kind = str(doc.get("__type") or doc.get("code") or "Unknown").rsplit("#", 1)[-1]
    why = str(doc.get("message") or doc.get("Message") or "")
    return kind[:128], why[:1024]
