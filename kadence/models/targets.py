"""Where a job's runs go: an HTTP webhook, a tenant's Kafka topic, an SQS queue, an in-process
handler. Secrets are named (`secret_ref`, `credentials_ref`), never carried."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal
from urllib.parse import SplitResult, quote, urlencode, urlsplit, urlunsplit

from pydantic import AfterValidator, Field, field_validator, model_validator

from kadence.models.base import Identifier, PoolName, WireModel
from kadence.models.statuses import MAX_STATUS_ENTRIES, StatusEntry, status_problem

MAX_TARGET_HEADERS = 64
MAX_TARGET_HEADER_BYTES = 16 * 1024
"""Target headers are copied into every execution, lease and scheduler state record: bounded,
so that with the largest payload those records still fit the broker's limit."""
_SECRET_HEADERS = {"authorization", "proxy-authorization", "cookie", "x-api-key"}
_SECRET_ANSWER_HEADERS = {*_SECRET_HEADERS, "set-cookie", "set-cookie2"}
"""Answer headers that carry credentials: never kept in a run's result (`result_headers`)."""
MAX_RESULT_HEADERS = 16
"""Answer headers a target may keep in each run's result (kadence/models/results.py)."""
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}")
"""An HTTP header name: a token (RFC 9110, 5.1), so no spaces, colons or control characters."""
_NOT_IN_HEADER_VALUE = re.compile(r"[^\t\x20-\x7e\xa0-\xff]")
"""What no header value may hold: RFC 9110 5.5 allows visible ASCII, spaces, tabs and obs-text
(octets 0x80-0xFF, sent as Latin-1 here) and nothing else. A control character is refused
(CR or LF would start a header of its own; NUL, DEL and the C1 controls are refused by
receivers or fail the request on every attempt), and so is a character Latin-1 has not."""


def header_value_problem(value: str) -> str | None:
    """Why `value` cannot be an HTTP header value, or None when it can."""
    bad = _NOT_IN_HEADER_VALUE.search(value)
    if bad is None:
        return None
    char = bad.group()
    what = "a control character" if char < " " or "\x7f" <= char <= "\x9f" else "not Latin-1"
    return (
        f"the value holds {char!r} (U+{ord(char):04X}, {what}) at character {bad.start()}: "
        "a header value holds visible ASCII, spaces, tabs and Latin-1 letters only (RFC 9110 5.5)"
    )


def _header_value(value: str) -> str:
    problem = header_value_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


MAX_QUERY_PARAMS = 64
MAX_QUERY_BYTES = 4 * 1024
"""A target's query parameters at most, and the bytes they take percent-encoded (what the
receiver reads after the URL's own query): bounded as the headers are."""
_SECRET_QUERY = {"access_token", "api_key", "apikey", "api-key", "client_secret", "password"}
"""Query parameter names that carry credentials (OAuth2's RFC 6750 2.3, the usual API keys)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def encoded_query(query: dict[str, str]) -> str:
    """`query` as the receiver reads it: `name=value` pairs joined by `&`, everything but
    letters, digits and `-._~` percent-encoded as UTF-8 (RFC 3986 2.3; a space is `%20`)."""
    return urlencode(query, quote_via=quote, safe="")


def with_query(url: str, query: dict[str, str]) -> str:
    """`url` with `query` after its own query (before any fragment, which is never sent)."""
    if not query:
        return url
    parts = urlsplit(url)
    joined = f"{parts.query}&{encoded_query(query)}" if parts.query else encoded_query(query)
    return urlunsplit(parts._replace(query=joined))


HeaderName = Annotated[str, Field(pattern=r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$")]
HeaderValue = Annotated[
    str, Field(max_length=MAX_TARGET_HEADER_BYTES), AfterValidator(_header_value)
]


def http_url_parts(url: str, credentials_field: str) -> SplitResult:
    """An absolute http(s) URL's parts; credentials in it are refused (they belong to the
    workers' secrets, named by `credentials_field`)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an absolute http:// or https:// URL")
    if parts.username or parts.password:
        raise ValueError(f"must not carry credentials; use {credentials_field}")
    return parts


MIN_RATE_PER_SECOND = 0.01
MAX_RATE_PER_SECOND = 100_000.0
MAX_RATE_BURST = 1_000


class RateLimit(WireModel):
    """How often runs may call one destination (docs/execution.md, "Rate limits per
    destination"): `per_second` runs start per second on average, `burst` of them at once after
    a quiet spell. Runs over it wait for their turn in due order; they are not failed."""

    per_second: Annotated[
        float, Field(ge=MIN_RATE_PER_SECOND, le=MAX_RATE_PER_SECOND, allow_inf_nan=False)
    ]
    """Runs started per second at most, on average (0.01: one every 100 s)."""
    burst: Annotated[int, Field(ge=1, le=MAX_RATE_BURST)] = 1
    """Runs that may start at once when the destination has been quiet (1: evenly spaced)."""


class HttpTarget(WireModel):
    """Call a webhook with the payload. Secrets are referenced by name, never carried inline."""

    kind: Literal["http"] = "http"
    url: Annotated[str, Field(min_length=1, max_length=2048)]
    """An absolute http(s) URL without credentials; the workers refuse private, loopback and
    metadata addresses unless the deployment allows them (KADENCE_TARGET_ALLOW_CIDRS)."""
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    """GET and DELETE send a body only when the run has a payload (then with its content type);
    without one, no `Content-Length` and no `Content-Type`. POST, PUT and PATCH always send
    one (`Content-Length: 0` for an empty payload)."""
    query: Annotated[
        dict[
            Annotated[str, Field(min_length=1, max_length=256)],
            Annotated[str, Field(max_length=MAX_QUERY_BYTES)],
        ],
        Field(max_length=MAX_QUERY_PARAMS),
    ] = Field(default_factory=dict)
    """Query parameters added after the URL's own, percent-encoded (`encoded_query`): text
    without control characters, no credentials (`access_token`, `api_key`... are refused)."""
    success_statuses: (
        Annotated[list[StatusEntry], Field(min_length=1, max_length=MAX_STATUS_ENTRIES)] | None
    ) = None
    """Answers that succeed: statuses (`204`), classes (`2xx`) and ranges (`200-204`) within
    100-599 (kadence/models/statuses.py). None: any 2xx. A 3xx named here succeeds; one not
    named fails for good: redirects are never followed."""
    retryable_statuses: (
        Annotated[list[StatusEntry], Field(max_length=MAX_STATUS_ENTRIES)] | None
    ) = None
    """Failing answers retried (within the job's retry policy): 4xx and 5xx only, none that
    succeeds. None: 408, 425, 429 and 5xx. []: no status is retried."""
    headers: Annotated[dict[HeaderName, HeaderValue], Field(max_length=MAX_TARGET_HEADERS)] = Field(
        default_factory=dict
    )
    """Non-secret headers, 16 KiB in all (names and values). A credential header
    (`authorization`, `cookie`, `x-api-key`, ...) is refused: it goes in a connection the target
    names (`connection`); Kadence's own headers win over a job's (kadence/headers.py)."""
    secret_ref: Identifier | None = None
    """Name of the signing secret (never the secret itself): the tenant's own (a `signing`
    connection, made through the API), else one the workers hold (KADENCE_WEBHOOK_SECRETS)."""
    connection: Identifier | None = None
    """Name of the tenant's connection whose credential every request carries (an API key,
    basic, bearer, OAuth2 client credentials or a client certificate), made through the API:
    docs/execution.md, "Connections"."""
    result_headers: Annotated[list[HeaderName], Field(max_length=MAX_RESULT_HEADERS)] = Field(
        default_factory=list
    )
    """Answer headers each run keeps in its result (names, any case; e.g. `etag`,
    `x-request-id`), beside the status code and the body's start. Credential-carrying ones
    (`set-cookie`, `authorization`, ...) are refused."""
    rate_limit: RateLimit | None = None
    """Runs of this tenant calling the URL's scheme, host and port (or, with a `connection`,
    using that connection, whatever the URL) start at most this often, per worker
    (kadence/throttle.py); jobs naming one destination with different limits share the
    lowest."""
    pool: PoolName | None = None
    """The worker pool that runs it (KADENCE_POOLS; docs/execution.md, "Worker pools").
    None: the `default` pool."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        http_url_parts(url, "connection")
        return url

    @field_validator("query", mode="before")
    @classmethod
    def _query_text(cls, query: object) -> object:
        """Each rule in its own words, before the types above say it less clearly."""
        if not isinstance(query, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in query.items()
        ):
            return query  # the types refuse it (a number, a list, a null are not text)
        if len(query) > MAX_QUERY_PARAMS:
            raise ValueError(f"at most {MAX_QUERY_PARAMS} query parameters")
        for name, value in query.items():
            if name.strip().lower() in _SECRET_QUERY:
                raise ValueError(
                    f"query parameter {name!r} carries credentials; put the secret in the "
                    "worker's secret store"
                )
            for what, text in (("name", name), ("value", value)):
                bad = _CONTROL.search(text)
                if bad is not None:
                    raise ValueError(
                        f"query parameter {name[:64]!r}: its {what} holds a control character "
                        f"(U+{ord(bad.group()):04X}) at character {bad.start()}"
                    )
        try:
            size = len(encoded_query(query))
        except UnicodeEncodeError:
            return query  # a lone surrogate: the types refuse it
        if size > MAX_QUERY_BYTES:
            raise ValueError(
                f"query parameters take {size} bytes percent-encoded; at most {MAX_QUERY_BYTES}"
            )
        return query

    @model_validator(mode="after")
    def _statuses(self) -> HttpTarget:
        problem = status_problem(self.success_statuses, self.retryable_statuses)
        if problem is not None:
            raise ValueError(problem)
        return self

    @field_validator("headers", mode="before")
    @classmethod
    def _no_secrets(cls, headers: object) -> object:
        """Each rule in its own words, before the types above say it less clearly."""
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            return headers  # the types refuse it
        if len(headers) > MAX_TARGET_HEADERS:
            raise ValueError(f"at most {MAX_TARGET_HEADERS} headers")
        size = sum(len(f"{k}{v}".encode(errors="surrogatepass")) for k, v in headers.items())
        if size > MAX_TARGET_HEADER_BYTES:
            raise ValueError(
                f"headers take {size} bytes; at most {MAX_TARGET_HEADER_BYTES} (names and values)"
            )
        for name, value in headers.items():
            if name.strip().lower() in _SECRET_HEADERS:  # "Authorization " is one too
                raise ValueError(
                    f"header {name!r} carries credentials; make a connection holding them "
                    "(PUT /v1/connections/<name>) and name it with connection"
                )
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(
                    f"header name {name!r} is not an HTTP token: letters, digits and "
                    "!#$%&'*+-.^_`|~ only (no spaces, colons or control characters)"
                )
            problem = header_value_problem(value)
            if problem is not None:
                raise ValueError(f"header {name!r}: {problem}")
        return headers

    @field_validator("result_headers", mode="before")
    @classmethod
    def _result_headers(cls, names: object) -> object:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return names  # the types refuse it
        if len(names) > MAX_RESULT_HEADERS:
            raise ValueError(f"at most {MAX_RESULT_HEADERS} result headers")
        seen: set[str] = set()
        for name in names:
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"result header {name[:300]!r} is not an HTTP header name")
            low = name.lower()
            if low in _SECRET_ANSWER_HEADERS:
                raise ValueError(
                    f"result header {name!r} carries credentials: it is never kept in results"
                )
            if low in seen:
                raise ValueError(f"result header {name!r} is named twice")
            seen.add(low)
        return names


class DeliveryFormat(StrEnum):
    """What a Kafka-target topic receives for each run (docs/execution.md, "Kafka topic
    target"): always with the Kadence headers (`kadence-execution-id`, the idempotency key,
    `kadence-tenant`, `kadence-job`, `kadence-due-at`, `kadence-attempt`, `kadence-delivery`)."""

    avro = "avro"
    """Kadence's `ExecutionRequested`, Avro single-object encoded (what connectors/consumer.py
    reads)."""
    json = "json"
    """The same envelope as one JSON object (`content-type: application/json`)."""
    payload = "payload"
    """The job's payload alone, as its bytes, with `content-type` from the job: "send this
    message at that time"."""


class KafkaTarget(WireModel):
    """Produce the execution to a tenant topic; success on the broker's acknowledgement.

    The Kafka topic is `<namespace>.to.<tenant>.<topic>` (kadence/target_topics.py: one name
    per tenant and topic); the definition is refused when that name could exceed Kafka's 249
    characters."""

    kind: Literal["kafka"] = "kafka"
    topic: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")]
    """The tenant's topic name; the Kafka topic is `<namespace>.to.<tenant>.<topic>`."""
    format: DeliveryFormat = DeliveryFormat.avro
    """What the topic receives (see `DeliveryFormat`)."""
    pool: PoolName | None = None
    """The worker pool that runs it (KADENCE_POOLS). None: the `default` pool."""


class QueueFormat(StrEnum):
    """What a queue target's message body is (docs/execution.md, "SQS queue target")."""

    payload = "payload"
    """The job's payload as the body: as text when it is text SQS accepts, else base64 with
    the message attribute `kadence-body-encoding: base64`."""
    json = "json"
    """Kadence's envelope as one JSON object (the Kafka target's `json` format)."""


_SQS_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,75}(\.fifo)?|[A-Za-z0-9_-]{1,80}")
_AWS_SQS_HOST = re.compile(r"sqs\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?")


class SqsTarget(WireModel):
    """Send the run to an Amazon SQS queue, or a server speaking SQS's JSON protocol (ElasticMQ,
    LocalStack); success when the queue accepts the message. A FIFO queue (`.fifo`) gets the
    idempotency key as its deduplication id; every message carries it as an attribute."""

    kind: Literal["sqs"] = "sqs"
    queue_url: Annotated[str, Field(min_length=1, max_length=2048)]
    """`https://sqs.<region>.amazonaws.com/<account>/<queue>`, or the local server's."""
    region: Annotated[str, Field(pattern=r"^[a-z0-9-]{1,32}$")] | None = None
    """The region requests are signed for; by default the one in an AWS queue URL's host, else
    us-east-1."""
    credentials_ref: Identifier | None = None
    """Names the AWS key the workers hold for the job's tenant (KADENCE_SQS_CREDENTIALS), never
    the key itself. None: requests are sent unsigned (a local server without authentication)."""
    message_group_id: Annotated[str, Field(pattern=r"^[!-~]{1,128}$")] | None = None
    """A FIFO queue's message group (by default the job id: a job's runs in order)."""
    format: QueueFormat = QueueFormat.payload
    """What the message body is."""
    pool: PoolName | None = None
    """The worker pool that runs it (KADENCE_POOLS). None: the `default` pool."""

    @field_validator("queue_url")
    @classmethod
    def _queue_url(cls, url: str) -> str:
        parts = http_url_parts(url, "credentials_ref")
        if parts.query or parts.fragment:
            raise ValueError("must not have a query or a fragment")
        segments = parts.path.split("/")
        if len(segments) != 3 or not segments[1] or not _SQS_QUEUE_NAME.fullmatch(segments[2]):
            raise ValueError(
                "must end in /<account>/<queue>: a queue name of 1-80 letters, digits, - or _ "
                "(a FIFO queue's ending in .fifo)"
            )
        return url

    @property
    def fifo(self) -> bool:
        return self.queue_url.endswith(".fifo")

    @property
    def signing_region(self) -> str:
        if self.region is not None:
            return self.region
        aws = _AWS_SQS_HOST.fullmatch(urlsplit(self.queue_url).hostname or "")
        return aws.group(1) if aws else "us-east-1"


class HandlerTarget(WireModel):
    """Call a Python handler registered by name in the worker process."""

    kind: Literal["handler"] = "handler"
    name: Identifier
    """The name the handler is registered under, for this tenant or every one
    (`@handler(name, tenants=...)`, connectors/handlers.py)."""
    pool: PoolName | None = None
    """The worker pool that runs it (KADENCE_POOLS). None: the `default` pool."""


Target = Annotated[
    HttpTarget | KafkaTarget | HandlerTarget | SqsTarget, Field(discriminator="kind")
]
