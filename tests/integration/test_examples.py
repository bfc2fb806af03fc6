"""docs/examples.md, run as written: each example's job created through the API with
`ApiClient` (as tenant `demo`, the quick start's) and checked where it says it runs — a signed
call at the receiver, a one-off at its instant, an interval's cadence, a JSON record on the
tenant's topic (read with the doc's kcat line), a handler's result, a signed SQS message.

What the test changes, and only that: the receiver's address (`http://127.0.0.1:8099`, the
test's target server), the one-off's `run_at` (seconds ahead), the interval's `every_s` and
`offset_s` once its cadence has been checked as written (so it fires twice in seconds), the
kcat line's broker and namespace, and the SQS queue's URL (a fake queue's). Each substitution
must find its text, so a doc that drops one fails here. The handler module is the doc's block,
written where the workers import it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import SecretStr

from apps.api.auth import token_hash
from connectors.webhook_verify import verify
from kadence.api_client import ApiClient
from kadence.sqs_keys import AwsKey
from testkit.stack import SECRET
from testkit.topic_reader import read_topic
from tests.api.conftest import Api, api_stack
from tests.conftest import IN_CI
from tests.connectors.test_sqs_target import FakeQueue

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

DOC = Path(__file__).resolve().parents[2] / "docs" / "examples.md"
TOKEN = "tok-demo"
RECEIVER = "http://127.0.0.1:8099"
AWS_KEY = {"access_key_id": "AKIDEXAMPLE00043", "secret_access_key": "examples-secret-key"}


def examples() -> dict[str, dict[str, list[str]]]:
    """Each `## ... : \\`job-id\\`` section's code blocks by language, keyed by job id."""
    found: dict[str, dict[str, list[str]]] = {}
    for section in DOC.read_text().split("\n## ")[1:]:
        title, _, body = section.partition("\n")
        job = re.search(r"`([A-Za-z0-9._-]+)`$", title)
        assert job, f"docs/examples.md: the section {title!r} names no job id"
        blocks: dict[str, list[str]] = {}
        for lang, code in re.findall(r"```(\w+)\n(.*?)```", body, re.S):
            blocks.setdefault(lang, []).append(code)
        found[job[1]] = blocks
    return found


def swap(text: str, old: str, new: str) -> str:
    assert old in text, f"docs/examples.md no longer has {old!r}"
    return text.replace(old, new)


def spec(job: str, api: Api, **swaps: str) -> dict[str, Any]:
    """The example's job definition, with the receiver's address (and `swaps`) put in."""
    [text] = EXAMPLES[job]["json"]
    if RECEIVER in text:
        text = swap(text, RECEIVER, api.target.url)
    for old, new in swaps.items():
        text = swap(text, old, new)
    return json.loads(text)  # type: ignore[no-any-return]


EXAMPLES = examples()


@pytest.fixture(scope="module")
def api(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """The API stack for tenant `demo` with its secret `demo-hooks`, and the doc's handler
    module where the workers import it."""
    tmp = tmp_path_factory.mktemp("examples")
    [handler_code] = EXAMPLES["purge-sessions"]["python"]
    path = swap(handler_code.splitlines()[0], "# ", "")  # "# myapp/kadence_handlers.py"
    (tmp / path).parent.mkdir(parents=True)
    (tmp / path).write_text(handler_code)
    module = path.removesuffix(".py").replace("/", ".")
    assert f"KADENCE_HANDLER_MODULES='[\"{module}\"]'" in DOC.read_text()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONPATH", os.pathsep.join([str(tmp), os.environ.get("PYTHONPATH", "")]))
        with api_stack(
            kafka_bootstrap,
            tmp,
            api_tokens={token_hash(TOKEN): "demo"},
            webhook_secrets={"demo": {"demo-hooks": SecretStr(SECRET)}},
            handler_modules=[module],
            sqs_credentials={"demo": {"orders-writer": AwsKey.model_validate(AWS_KEY)}},
        ) as started:
            yield started


@pytest.fixture
def sdk(api: Api) -> Iterator[ApiClient]:
    with ApiClient(api.url, TOKEN) as client:
        yield client


def test_the_doc_has_one_example_per_use_case() -> None:
    assert list(EXAMPLES) == [
        "weekday-digest",
        "invoice-reminder",
        "cache-warm",
        "orders-export",
        "purge-sessions",
        "orders-sqs",
    ]
    assert all(len(blocks["json"]) == 1 for blocks in EXAMPLES.values())


def test_weekday_webhook_signed_exactly_on_the_hour(api: Api, sdk: ApiClient) -> None:
    job = spec("weekday-digest", api)
    sdk.create("weekday-digest", job)
    paris = [
        datetime.fromisoformat(t).astimezone(ZoneInfo("Europe/Paris"))
        for t in sdk.next("weekday-digest", 10)
    ]
    assert [(t.hour, t.minute, t.second, t.microsecond) for t in paris] == [(9, 0, 0, 0)] * 10
    assert {t.weekday() for t in paris} == {0, 1, 2, 3, 4}  # Monday to Friday, each one
    run = sdk.trigger("weekday-digest", wait_s=30)["run"]
    assert run["status"] == "succeeded"
    [hit] = [
        h for h in api.target.seen("/digest") if h.headers["webhook-id"] == run["execution_id"]
    ]
    assert verify(SECRET, hit.headers, hit.body)  # signed with demo-hooks
    assert json.loads(hit.body) == job["payload"]


def test_a_one_off_runs_at_its_instant_then_deletes_itself(api: Api, sdk: ApiClient) -> None:
    at = (datetime.now(UTC) + timedelta(seconds=6)).replace(microsecond=0)
    job = spec(
        "invoice-reminder", api, **{"2030-01-15T09:30:00Z": at.strftime("%Y-%m-%dT%H:%M:%SZ")}
    )
    sdk.create("invoice-reminder", job)
    [hit] = api.target.wait(1, "/remind", timeout_s=30)
    assert hit.at >= at.timestamp() - 0.05  # not early (the clocks are the same machine's)
    assert hit.at - at.timestamp() < 5
    assert json.loads(hit.body) == {"invoice": "INV-1042"}
    api.wait(lambda: "invoice-reminder" not in [j["job_id"] for j in sdk.jobs()], what="deletion")


def test_an_interval_on_its_cadence(api: Api, sdk: ApiClient) -> None:
    sdk.create("cache-warm", spec("cache-warm", api))
    due = [datetime.fromisoformat(t) for t in sdk.next("cache-warm", 8)]
    assert {(t.minute, t.second) for t in due} == {(5, 0), (20, 0), (35, 0), (50, 0)}
    assert {b - a for a, b in pairwise(due)} == {timedelta(minutes=15)}
    fast = spec(
        "cache-warm", api, **{'"every_s": 900, "offset_s": 300': '"every_s": 2, "offset_s": 1'}
    )
    sdk.update("cache-warm", fast)
    hits = api.target.wait(2, "/warm", timeout_s=30)
    keys = [h.headers["webhook-id"] for h in hits]
    assert len(set(keys)) == len(keys) >= 2  # two occurrences, each its own run


def test_runs_as_json_records_on_the_tenants_topic(api: Api, sdk: ApiClient) -> None:
    sdk.create("orders-export", spec("orders-export", api))
    run = sdk.trigger("orders-export", wait_s=30)["run"]
    assert run["status"] == "succeeded"
    topic = f"{api.settings.namespace}.to.demo.orders-export"
    [msg] = read_topic(api.settings.bootstrap_servers, topic, 1)
    record = json.loads(msg.value() or b"")
    assert (record["execution_id"], record["job_id"]) == (run["execution_id"], "orders-export")
    assert {"nominal_at", "due_at", "attempt"} <= set(record)
    assert json.loads(record["payload"]) == {"since_minutes": 10}  # JSON inside JSON
    assert dict(msg.headers() or [])["kadence-execution-id"] == run["execution_id"].encode()
    if shutil.which("kcat") is None:
        if IN_CI:
            pytest.fail("kcat is not installed (.ci/run installs it)")
        return
    [kcat] = EXAMPLES["orders-export"]["sh"]
    kcat = swap(kcat, "127.0.0.1:19092", api.settings.bootstrap_servers)
    kcat = swap(kcat, "kadence.to.demo.orders-export", topic)
    out = subprocess.run(
        ["bash", "-ec", kcat], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1])["execution_id"] == run["execution_id"]


def test_a_handler_in_the_worker_returns_the_runs_result(api: Api, sdk: ApiClient) -> None:
    sdk.create("purge-sessions", spec("purge-sessions", api))
    run = sdk.trigger("purge-sessions", wait_s=30)["run"]
    assert run["status"] == "succeeded", run
    value = {"older_than_days": 30, "purged": 0, "run": run["execution_id"]}
    assert run["result"]["value"] == value


def test_runs_as_signed_messages_on_an_sqs_queue(api: Api, sdk: ApiClient) -> None:
    queue = FakeQueue()
    try:
        aws = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"
        sdk.create("orders-sqs", spec("orders-sqs", api, **{aws: queue.url("orders.fifo")}))
        run = sdk.trigger("orders-sqs", wait_s=30)["run"]
        assert run["status"] == "succeeded", run
    finally:
        queue.stop()
    [(headers, body)] = queue.got
    sent = json.loads(body)
    assert json.loads(sent["MessageBody"]) == {"ship": "order 42"}
    assert (sent["MessageDeduplicationId"], sent["MessageGroupId"]) == (
        run["execution_id"],
        "orders-sqs",
    )
    assert f"Credential={AWS_KEY['access_key_id']}/" in headers["authorization"]  # signed
