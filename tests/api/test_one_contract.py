"""One contract for every door (issue 17, item 12): the same definitions through the API, the
CLI, the SDK and the `schedules` topic (JSON, as a user's own producer writes it), against the
real stack. Each door accepts the same shapes and stores the same payload, and refuses the same
ones with the same errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from apps import cli
from kadence.client import KadenceClient
from kadence.errors import InvalidInputError
from kadence.models import Rejected
from kadence.partitioning import partition_for
from kadence.topics import Topics
from testkit.stack import CODEC
from testkit.topic_reader import read_topic
from tests.api.conftest import TOKENS, Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

CASES: dict[str, dict[str, Any]] = {
    "text": {"payload": "hello"},
    "object": {"payload": {"hi": 1, "list": [1, 2]}},
    "array": {"payload": [1, "a", None]},
    "null": {"payload": None},
    "number": {"payload": 5},
    "boolean": {"payload": True},
    "bad-cron": {"schedule": {"kind": "cron", "expression": "99 * * * *", "spread_s": 0}},
    "bad-zone": {"schedule": {"kind": "cron", "expression": "0 0 1 1 *", "timezone": "Mars/Base"}},
    "extra-field": {"colour": "red"},
    "bad-url": {"target": {"kind": "http", "url": "ftp://example.com/x"}},
    # issue 41: values no wire holds, refused alike at every door, each naming its field
    "crlf-content-type": {"content_type": "text/plain\r\nX-Evil: 1"},
    "control-in-header": {
        "target": {"kind": "http", "url": "https://example.com/x", "headers": {"X-A": "a\x01b"}}
    },
    "lone-surrogate": {"description": "\ud800"},
    "year-9999": {"schedule": {"kind": "once", "run_at": "9999-12-31T23:59:59.9999Z"}},
    "int-past-a-long": {"timeout_ms": 2**64},
}
REFUSED_FIELD = {
    "crlf-content-type": "content_type: Value error, must be a media type",
    "control-in-header": "target.http.headers: Value error, header 'X-A': the value holds '\\x01'",
    "lone-surrogate": "description: Input should be a valid string, unable to parse raw data",
    "year-9999": "schedule.once.run_at: Value error, must be from 1900-01-01T00:00:00Z",
    "int-past-a-long": "timeout_ms: Input should be less than or equal to 21600000",
}
"""The start of the error each of those gets (`field: reason`), at every door."""
"""What differs from a valid definition, by case (the job id is `<door>-<case>`)."""
STORED = {"text": "hello", "object": '{"hi":1,"list":[1,2]}', "array": '[1,"a",null]', "null": ""}
"""The payload each accepted case is stored with, whichever door it came through."""


def spec(api: Api, case: str) -> dict[str, Any]:
    return {**api.job(), **CASES[case]}


def full(api: Api, door: str, case: str) -> dict[str, Any]:
    return {**spec(api, case), "tenant": "acme", "job_id": f"{door}-{case}", "version": 1}


def test_every_door_accepts_and_refuses_the_same_definitions_the_same_way(
    api: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sdk = through_the_sdk(api)  # its errors are the reference the other doors must repeat
    assert {c for c, e in sdk.items() if e is None} == set(STORED), sdk
    assert "a payload is a string" in (sdk["number"] or [""])[0]
    for case, start in REFUSED_FIELD.items():
        assert (sdk[case] or [""])[0].startswith(start), (case, sdk[case])
    through_the_api(api, sdk)
    through_the_cli(api, sdk, tmp_path, capsys, monkeypatch)
    through_the_topic(api, sdk)
    h = api.as_("acme")
    for case, payload in STORED.items():  # what was accepted is stored alike at every door
        for door in ("sdk", "api", "cli", "topic"):

            def shown(door: str = door, case: str = case) -> Any:
                r = api.http.get(f"/v1/jobs/{door}-{case}", headers=h)
                return r.status_code == 200 and r.json()

            job = api.wait(shown, what=f"{door}-{case} in the view")
            assert job["definition"]["payload"] == payload, (door, case, job["definition"])


def through_the_sdk(api: Api) -> dict[str, list[str] | None]:
    out: dict[str, list[str] | None] = {}
    with KadenceClient(api.settings) as client:
        for case in CASES:
            try:
                client.put(full(api, "sdk", case))
                out[case] = None
            except InvalidInputError as exc:
                out[case] = exc.errors
    return out


def through_the_api(api: Api, sdk: dict[str, list[str] | None]) -> None:
    for case, errors in sdk.items():
        body = json.dumps(spec(api, case))  # escaped: httpx's json= cannot send "\ud800"
        headers = {**api.as_("acme"), "content-type": "application/json"}
        r = api.http.post(f"/v1/jobs/api-{case}", content=body, headers=headers)
        if errors is None:
            assert r.status_code == 201, (case, r.text)
        else:
            assert r.status_code == 422, (case, r.text)
            assert [e["msg"] for e in r.json()["detail"]] == errors, case


def through_the_cli(
    api: Api,
    sdk: dict[str, list[str] | None],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KADENCE_API_URL", api.url)
    monkeypatch.setenv("KADENCE_TOKEN", TOKENS["acme"])
    for case, errors in sdk.items():
        file = tmp_path / f"{case}.json"
        file.write_text(json.dumps(spec(api, case)))
        code = cli.main(["create", f"cli-{case}", str(file)])
        err = capsys.readouterr().err
        assert code == (0 if errors is None else 3), (case, err)
        assert all(message in err for message in errors or []), (case, errors, err)


def through_the_topic(api: Api, sdk: dict[str, list[str] | None]) -> None:
    """JSON records on `schedules`, keyed and partitioned as the docs say; the refused ones come
    back on `rejected` with the reason."""
    topics = Topics(api.settings)
    producer = Producer({"bootstrap.servers": api.settings.bootstrap_servers})
    for case in CASES:
        key = f"acme/topic-{case}"
        partition = partition_for(key, api.settings.partitions)
        value = json.dumps(full(api, "topic", case))
        producer.produce(topics.schedules, key=key.encode(), value=value, partition=partition)
    assert producer.flush(30) == 0
    refused = {c for c, e in sdk.items() if e is not None}

    def rejected() -> dict[str, Rejected]:
        msgs = read_topic(api.settings.bootstrap_servers, topics.rejected, 100_000, 2)
        by_case: dict[str, Rejected] = {}
        for m in msgs:
            key = (m.key() or b"").decode()
            if key.startswith("acme/topic-"):
                record = CODEC.decode(m.value())
                assert isinstance(record, Rejected)
                by_case[key.removeprefix("acme/topic-")] = record
        return by_case if len(by_case) >= len(refused) else {}

    got = api.wait(rejected, timeout_s=60, what="a rejected record for each refused case")
    assert set(got) == refused
    for case in refused:
        for message in sdk[case] or []:
            assert message in got[case].reason, (case, message, got[case].reason)
