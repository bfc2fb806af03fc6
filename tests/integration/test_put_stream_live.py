"""Bulk loads against the real broker (issue 30, item 3): `KadenceClient.put_stream` writes a
generator's definitions a chunk at a time with progress, and stops at an invalid one saying how
many were written; `kadence put` does it from JSON Lines and resumes with `--from`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps import cli
from kadence.client import KadenceClient
from kadence.codec import Codec
from kadence.errors import BulkInputError, BulkWriteError, DeliveryError
from kadence.models import ScheduleDefinition
from kadence.topics import Topics
from testkit.topic_reader import read_topic
from tests.conftest import provisioned
from tests.test_cli_put import job

pytestmark = [pytest.mark.kafka]
CODEC = Codec()


def written_ids(bootstrap: str, topic: str, expect: int) -> list[str]:
    msgs = read_topic(bootstrap, topic, expect=expect + 1, timeout_s=3)  # +1: nothing more
    return sorted(CODEC.decode_as(m.value(), ScheduleDefinition).job_id for m in msgs)


def test_put_stream_writes_in_chunks_with_progress_and_stops_at_a_bad_one(
    kafka_bootstrap: str,
) -> None:
    settings = provisioned(kafka_bootstrap)
    seen: list[int] = []

    def jobs() -> Iterator[dict[str, Any]]:
        for i in range(1, 1_201):
            yield job(i)
        yield {**job(0), "schedule": {"kind": "cron", "expression": "61 * * * *"}}
        yield job(9_999)  # after the bad one: never written

    with KadenceClient(settings) as client, pytest.raises(BulkInputError) as stopped:
        client.put_stream(jobs(), progress=seen.append, chunk=500)
    assert (stopped.value.index, stopped.value.written) == (1_200, 1_200)
    assert "item 1200" in str(stopped.value) and "1200 before it were written" in str(stopped.value)
    assert any("schedule.expression" in e for e in stopped.value.errors)
    assert seen == [500, 1_000]  # after each acknowledged chunk
    ids = written_ids(kafka_bootstrap, Topics(settings).schedules, 1_200)
    assert ids == sorted(f"j{i}" for i in range(1, 1_201))

    with KadenceClient(settings) as client:
        loaded = client.put_stream((job(i) for i in range(2_000, 2_100)), progress=seen.append)
    assert loaded.count == 100 and seen[-1] == 100


def test_kadence_put_loads_json_lines_stops_at_a_bad_line_and_resumes(
    kafka_bootstrap: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = provisioned(kafka_bootstrap)
    for name, value in (("BOOTSTRAP_SERVERS", kafka_bootstrap), ("NAMESPACE", settings.namespace),
                        ("PARTITIONS", str(settings.partitions))):  # fmt: skip
        monkeypatch.setenv(f"KADENCE_{name}", value)
    lines = [json.dumps(job(i)) for i in range(1, 301)]
    lines[149] = json.dumps({**job(150), "target": {"kind": "http", "url": "ftp://x"}})
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n")

    assert cli.main(["put", str(path)]) == 3
    err = capsys.readouterr().err
    assert "line 150" in err and "The 149 definitions before it were written" in err
    assert "--from 150" in err

    lines[149] = json.dumps(job(150))
    path.write_text("\n".join(lines) + "\n")
    assert cli.main(["put", str(path), "--from", "150"]) == 0
    assert "written 151 definitions" in capsys.readouterr().out
    topic = Topics(settings).schedules
    assert written_ids(kafka_bootstrap, topic, 300) == sorted(f"j{i}" for i in range(1, 301))
    assert cli.main(["put", str(path), "--from", "300", "--json"]) == 0  # the last line again
    assert json.loads(capsys.readouterr().out)["written"] == 1


def test_a_load_the_broker_stops_acknowledging_says_where_to_resume(
    kafka_bootstrap: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The broker stops answering after the first chunk: the SDK says how many were written
    (BulkWriteError.written), and `kadence put` the line to resume from."""
    settings = provisioned(kafka_bootstrap)
    real = KadenceClient._await
    calls = [0]

    def second_fails(self: KadenceClient, slots: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:
            raise DeliveryError("the broker did not acknowledge the write within 30 s")
        return real(self, slots)

    monkeypatch.setattr(KadenceClient, "_await", second_fails)
    with KadenceClient(settings) as client, pytest.raises(BulkWriteError) as stopped:
        client.put_stream((job(i) for i in range(250)), chunk=100)
    assert stopped.value.written == 100 and "the first 100 were written" in str(stopped.value)

    for name, value in (("BOOTSTRAP_SERVERS", kafka_bootstrap), ("NAMESPACE", settings.namespace),
                        ("PARTITIONS", str(settings.partitions))):  # fmt: skip
        monkeypatch.setenv(f"KADENCE_{name}", value)
    monkeypatch.setattr("apps.cli_put.STREAM_CHUNK", 100)
    calls[0] = 0
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(["", *(json.dumps(job(i)) for i in range(250))]) + "\n")
    assert cli.main(["put", str(path)]) == 2
    err = capsys.readouterr().err
    assert "The first 100 definitions were written: resume with --from 102" in err, err
