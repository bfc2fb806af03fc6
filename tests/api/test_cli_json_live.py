"""Issue 43, item 8: every `kadence` command that needs a stack, run with --json against one
and its output parsed and validated: the API's commands by the API's own response models
(what `--json` prints is what the API answered, and a script may rely on those fields), the
operators' commands (straight to Kafka) by their documented fields, and each checked against
what the command did. The offline commands are checked in tests/test_cli_json.py, which also
checks that every command with --json is checked in one of the two."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from apps import cli
from apps.api.routes.connections import ConnectionShown
from apps.api.schemas import (
    Accepted,
    BackfillShown,
    DeadLetterShown,
    HistoryEvent,
    JobShown,
    RunShown,
    Triggered,
)
from kadence.api_client import ApiClient
from kadence.api_errors import NotFoundError
from tests.api.conftest import TOKENS, Api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@dataclass
class Ctx:
    api: Api
    sdk: ApiClient
    capsys: pytest.CaptureFixture[str]
    tmp: Path
    job: str
    """A job id of the check's own."""

    def json(self, *argv: str) -> Any:
        """`kadence <argv> --json`: exit 0, and its output as one JSON document."""
        self.capsys.readouterr()
        assert cli.main([*argv, "--json"]) == 0, self.capsys.readouterr().err
        return json.loads(self.capsys.readouterr().out)

    def lines(self, *argv: str) -> list[Any]:
        """A streaming command's output: one JSON document per line, every line."""
        self.capsys.readouterr()
        assert cli.main([*argv, "--json"]) == 0, self.capsys.readouterr().err
        return [json.loads(line) for line in self.capsys.readouterr().out.splitlines()]

    def file(self, doc: Any) -> str:
        path = self.tmp / f"{self.job}-{len(list(self.tmp.iterdir()))}.json"
        path.write_text(json.dumps(doc))
        return str(path)

    def made(self, path: str = "/ok", expression: str = "0 0 1 1 *", **kw: Any) -> str:
        self.sdk.create(self.job, self.api.job(expression, path, **kw))
        return self.job

    def state(self, want: str) -> None:
        self.api.wait(lambda: self.sdk.job(self.job)["state"] == want, what=want)

    def dead(self) -> str:
        """A run of the job dead-lettered (its target fails): its execution id."""
        self.made("/fail")
        run = self.sdk.trigger(self.job, wait_s=30)["run"]
        assert run["status"] == "dead_lettered"
        return str(run["execution_id"])


def valid(model: Any, doc: Any) -> Any:
    return TypeAdapter(model).validate_python(doc)


def _jobs(c: Ctx) -> None:
    c.made()
    jobs = valid(list[JobShown], c.json("jobs"))
    assert c.job in [j.job_id for j in jobs] and {j.tenant for j in jobs} == {"acme"}


def _get(c: Ctx) -> None:
    job = valid(JobShown, c.json("get", c.made(expression="0 6 * * *")))
    assert (job.job_id, job.version, job.state) == (c.job, 1, "active")
    assert job.definition["schedule"]["expression"] == "0 6 * * *"


def _create(c: Ctx) -> None:
    job = valid(JobShown, c.json("create", c.job, c.file(c.api.job())))
    assert (job.job_id, job.version) == (c.job, 1) and c.sdk.job(c.job)["version"] == 1


def _update(c: Ctx) -> None:
    c.made()
    spec = {**c.api.job(), "description": "v2"}
    job = valid(JobShown, c.json("update", c.job, c.file(spec)))
    assert (job.version, job.definition["description"]) == (2, "v2")


def _rm(c: Ctx) -> None:
    assert c.json("rm", c.made()) == {"deleted": c.job}
    with pytest.raises(NotFoundError):
        c.sdk.job(c.job)


def _pause(c: Ctx) -> None:
    got = valid(Accepted, c.json("pause", c.made(), "--reason", "cli json"))
    assert got.accepted and got.request_id
    c.state("paused")
    assert c.sdk.job(c.job)["paused_reason"] == "cli json"


def _resume(c: Ctx) -> None:
    c.sdk.pause(c.made())
    c.state("paused")
    assert valid(Accepted, c.json("resume", c.job)).accepted
    c.state("active")


def _trigger(c: Ctx) -> None:
    got = c.json("trigger", c.made(), "--request-id", "cj-1", "--wait", "30")
    triggered = valid(Triggered, got)
    run = valid(RunShown, got["run"])
    assert triggered.execution_id == run.execution_id == f"acme/{c.job}@manual:cj-1"
    assert run.status == "succeeded" and run.attempts == 1


def _next(c: Ctx) -> None:
    times = [
        datetime.fromisoformat(t) for t in c.json("next", c.made("/ok", "0 6 * * *"), "-n", "3")
    ]
    assert len(times) == 3 and times == sorted(times)
    assert {(t.hour, t.minute, t.utcoffset()) for t in times} == {(6, 0, timedelta(0))}


def _runs(c: Ctx) -> None:
    eid = c.sdk.trigger(c.made(), wait_s=30)["execution_id"]
    runs = valid(list[RunShown], c.json("runs", c.job))
    assert [(r.execution_id, r.status) for r in runs] == [(eid, "succeeded")]


def _history(c: Ctx) -> None:
    eid = c.sdk.trigger(c.made(), wait_s=30)["execution_id"]
    events = valid(list[HistoryEvent], c.json("history", c.job))
    assert (eid, "succeeded") in [(e.execution_id, e.status) for e in events]


def _cancel(c: Ctx) -> None:
    eid = c.sdk.trigger(c.made("/slow?s=30", timeout_ms=60_000))["execution_id"]
    c.api.wait(
        lambda: any(h.headers["idempotency-key"] == eid for h in c.api.target.seen()),
        what="the run to start",
    )
    assert valid(Accepted, c.json("cancel", c.job, eid)).accepted
    assert c.sdk.wait_run(c.job, eid, 30)["status"] == "cancelled"


def _backfill(c: Ctx) -> None:
    c.made("/ok", "0 * * * *")
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    window = ["--start", (end - timedelta(hours=2)).isoformat(), "--end", end.isoformat()]
    plan = valid(BackfillShown, c.json("backfill", c.job, *window))
    assert plan.dry_run and len(plan.occurrences) == 2
    done = c.json("backfill", c.job, *window, "--run")
    assert set(done) == {"sent", "fired", "done", "requests"}
    assert sorted(done["sent"]) == sorted(o.execution_id for o in plan.occurrences)
    assert (done["fired"], done["done"], len(done["requests"])) == (2, True, 1)


def _dlq(c: Ctx) -> None:
    eid = c.dead()
    letters = valid(list[DeadLetterShown], c.json("dlq", "--job", c.job))
    assert [(d.execution_id, d.job_id, d.attempt) for d in letters] == [(eid, c.job, 1)]


def _replay(c: Ctx) -> None:
    eid = c.dead()
    assert valid(Accepted, c.json("replay", eid)).accepted
    c.api.wait(
        lambda: [d for d in c.sdk.dead_letters(job_id=c.job) if d["replays"] == 1],
        what="the replay",
    )


BEARER = {"kind": "bearer", "token": "cli-json-bearer-token"}


def _connection_put(c: Ctx) -> None:
    got = valid(ConnectionShown, c.json("connection-put", c.job, c.file(BEARER)))
    assert (got.name, got.kind, got.version) == (c.job, "bearer", 1)
    assert BEARER["token"] not in json.dumps(got.model_dump(mode="json"))  # never the value


def _connections(c: Ctx) -> None:
    c.sdk.call("PUT", f"/v1/connections/{c.job}", json=BEARER)
    found = valid(list[ConnectionShown], c.json("connections"))
    assert c.job in [x.name for x in found]


def _connection(c: Ctx) -> None:
    c.sdk.call("PUT", f"/v1/connections/{c.job}", json=BEARER)
    assert valid(ConnectionShown, c.json("connection", c.job)).name == c.job


def _connection_rm(c: Ctx) -> None:
    c.sdk.call("PUT", f"/v1/connections/{c.job}", json=BEARER)
    assert c.json("connection-rm", c.job) == {"deleted": c.job}
    with pytest.raises(NotFoundError):
        c.sdk.call("GET", f"/v1/connections/{c.job}")


def _topics(c: Ctx) -> None:
    ns = c.api.settings.namespace
    topics = c.json("topics")["topics"]
    assert {t["topic"] for t in topics} >= {f"{ns}.schedules", f"{ns}.executions"}
    assert all(set(t) == {"topic", "partitions", "cleanup", "key"} for t in topics)
    assert all(t["topic"].startswith(f"{ns}.") and t["partitions"] >= 1 for t in topics)


def _put(c: Ctx) -> None:
    doc = {"tenant": "acme", "job_id": c.job, "version": 1, **c.api.job()}
    got = c.json("put", c.file(doc))
    assert (got["written"], got["topic"]) == (1, f"{c.api.settings.namespace}.schedules")
    assert isinstance(got["seconds"], float)
    c.api.wait(lambda: _exists(c.sdk, c.job), what="the job put straight to Kafka")


def _delete(c: Ctx) -> None:
    got = c.json("delete", f"acme/{c.made()}")
    assert got["deleted"] == f"acme/{c.job}"
    assert got["topic"] == f"{c.api.settings.namespace}.schedules"
    assert got["partition"] >= 0 and got["offset"] >= 0
    c.api.wait(lambda: not _exists(c.sdk, c.job), what="the job gone")


def _tail(c: Ctx) -> None:
    c.sdk.pause(c.made())
    c.state("paused")
    lines = c.lines("tail", "history", "--from-beginning", "--idle", "2")
    assert lines and all({"key", "partition", "offset", "type"} <= set(x) for x in lines)
    assert any(x["key"] == f"acme/{c.job}" and x["type"] == "HistoryRecord" for x in lines)


def _redrive(c: Ctx) -> None:
    eid = c.dead()
    now = datetime.now(UTC)
    window = [
        "--start",
        (now - timedelta(hours=1)).isoformat(),
        "--end",
        (now + timedelta(minutes=1)).isoformat(),
    ]
    got = c.json("redrive", "acme", *window, "--job", c.job)
    assert (got["left_out"], got["sent"]) == (0, 0)  # a dry run
    assert [(x["execution_id"], x["reason"]) for x in got["letters"]] == [
        (eid, "retries_exhausted")
    ]
    assert datetime.fromisoformat(got["letters"][0]["dead_lettered_at"]) <= datetime.now(UTC)


def _exists(sdk: ApiClient, job: str) -> bool:
    try:
        sdk.job(job)
    except NotFoundError:
        return False
    return True


LIVE: dict[str, Callable[[Ctx], None]] = {
    "jobs": _jobs,
    "get": _get,
    "create": _create,
    "update": _update,
    "rm": _rm,
    "pause": _pause,
    "resume": _resume,
    "trigger": _trigger,
    "next": _next,
    "runs": _runs,
    "history": _history,
    "cancel": _cancel,
    "backfill": _backfill,
    "dlq": _dlq,
    "replay": _replay,
    "connection-put": _connection_put,
    "connections": _connections,
    "connection": _connection,
    "connection-rm": _connection_rm,
    "topics": _topics,
    "put": _put,
    "delete": _delete,
    "tail": _tail,
    "redrive": _redrive,
}
"""Each command run against the stack with --json, and what its output must hold."""


@pytest.fixture
def ctx(
    api: Api, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> Iterator[Callable[[str], Ctx]]:
    monkeypatch.setenv("KADENCE_API_URL", api.url)
    monkeypatch.setenv("KADENCE_TOKEN", TOKENS["acme"])
    monkeypatch.setenv("KADENCE_BOOTSTRAP_SERVERS", api.settings.bootstrap_servers)
    monkeypatch.setenv("KADENCE_NAMESPACE", api.settings.namespace)
    with ApiClient(api.url, TOKENS["acme"]) as sdk:
        yield lambda job: Ctx(api, sdk, capsys, tmp_path, job)


@pytest.mark.parametrize("command", list(LIVE))
def test_json_output(ctx: Callable[[str], Ctx], command: str) -> None:
    LIVE[command](ctx(f"cj-{command}"))
