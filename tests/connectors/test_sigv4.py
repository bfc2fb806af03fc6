"""AWS Signature Version 4 against known answers: AWS's own worked example, and two SQS
requests whose signatures botocore 1.44.8 (the AWS SDK's signer) computed for the same inputs."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import SecretStr

from connectors.sigv4 import Credentials, canonical_query, sign

NOW = datetime(2015, 8, 30, 12, 36, tzinfo=UTC)
KEY = Credentials("AKIDEXAMPLE", SecretStr("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"))
SQS_BODY = (
    b'{"QueueUrl":"https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo",'
    b'"MessageBody":"h\xc3\xa9"}'
)
SQS_HEADERS = {
    "content-type": "application/x-amz-json-1.0",
    "x-amz-target": "AmazonSQS.SendMessage",
}


def signature(headers: dict[str, str]) -> str:
    return headers["authorization"].rsplit("Signature=", 1)[1]


def test_the_worked_example_of_the_aws_documentation() -> None:
    """IAM ListUsers, GET with a query string (docs.aws.amazon.com, "Create a signed AWS API
    request": the example's final signature)."""
    headers = sign(
        "GET",
        "/",
        [("Version", "2010-05-08"), ("Action", "ListUsers")],
        {
            "host": "iam.amazonaws.com",
            "content-type": "application/x-www-form-urlencoded; charset=utf-8",
        },
        b"",
        credentials=KEY,
        region="us-east-1",
        service="iam",
        now=NOW,
    )
    assert headers["x-amz-date"] == "20150830T123600Z"
    assert headers["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date, "
        "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
    )


def test_an_sqs_send_with_a_session_token_signs_as_the_aws_sdk_does() -> None:
    temporary = Credentials(KEY.access_key_id, KEY.secret_access_key, SecretStr("tok"))
    headers = sign(
        "POST",
        "/",
        [],
        {"host": "sqs.eu-west-1.amazonaws.com", **SQS_HEADERS},
        SQS_BODY,
        credentials=temporary,
        region="eu-west-1",
        service="sqs",
        now=NOW,
    )
    assert headers["x-amz-security-token"] == "tok"
    assert (
        "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target"
        in (headers["authorization"])
    )
    assert signature(headers) == "de1bd7d20ace446b756dd89dc2f1f6b4711a47c6932d31ed4f44a4787b333474"


def test_a_host_with_a_port_is_signed_with_it() -> None:
    headers = sign(
        "POST",
        "/",
        [],
        {"host": "127.0.0.1:9324", **SQS_HEADERS},
        SQS_BODY,
        credentials=KEY,
        region="elasticmq",
        service="sqs",
        now=NOW,
    )
    assert signature(headers) == "ad7488d577687b2840403e03d327d05778b388a5d338c8d4dec93bcab4ea04ff"
    assert "x-amz-security-token" not in headers


def test_any_change_to_what_is_signed_changes_the_signature() -> None:
    def sig(body: bytes = SQS_BODY, region: str = "eu-west-1", target: str = "SendMessage") -> str:
        headers = {"host": "h", "content-type": "x", "x-amz-target": f"AmazonSQS.{target}"}
        return signature(
            sign(
                "POST",
                "/",
                [],
                headers,
                body,
                credentials=KEY,
                region=region,
                service="sqs",
                now=NOW,
            )
        )

    base = sig()
    assert len({base, sig(body=SQS_BODY + b" "), sig(region="eu-west-2"), sig(target="Purge")}) == 4


def test_query_parameters_are_sorted_and_percent_encoded() -> None:
    assert canonical_query([("b", "x y"), ("a", "1/2~")]) == "a=1%2F2~&b=x%20y"
