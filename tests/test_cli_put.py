"""`kadence put`'s reading of its file, no broker: an object, a list or JSON Lines, where it is
(the line or item it gave last, for the error and `--from`), and what stops it."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from apps import cli
from apps.cli_put import Reading, definitions
from kadence.errors import InvalidInputError


def job(i: int) -> dict[str, Any]:
    return {
        "tenant": "acme",
        "job_id": f"j{i}",
        "version": 1,
        "schedule": {"kind": "cron", "expression": "0 * * * *", "timezone": "UTC"},
        "target": {"kind": "kafka", "topic": "out"},
        "payload": {"n": i},
    }


def read(text: str, start: int = 1) -> tuple[list[dict[str, Any]], Reading]:
    where = Reading()
    return list(definitions(io.StringIO(text), start, where)), where


def test_json_lines_are_read_one_a_line_blank_lines_skipped_and_counted() -> None:
    text = "\n" + json.dumps(job(1)) + "\n\n" + json.dumps(job(2)) + "\n"
    got, where = read(text)
    assert [d["job_id"] for d in got] == ["j1", "j2"]
    assert (where.unit, where.at, where.single) == ("line", 4, False)
    assert got[0]["payload"] == b'{"n": 1}'  # a JSON payload becomes its bytes, as the API's


def test_a_list_and_a_pretty_printed_object() -> None:
    got, where = read(json.dumps([job(1), job(2), job(3)], indent=2))
    assert [d["job_id"] for d in got] == ["j1", "j2", "j3"]
    assert (where.unit, where.at, where.single) == ("item", 3, False)
    got, where = read(json.dumps(job(7), indent=2))
    assert [d["job_id"] for d in got] == ["j7"]
    assert where.single


def test_from_resumes_at_that_line_or_item() -> None:
    lines = "\n".join(json.dumps(job(i)) for i in range(1, 6))
    assert [d["job_id"] for d in read(lines, start=4)[0]] == ["j4", "j5"]
    items = json.dumps([job(i) for i in range(1, 6)])
    assert [d["job_id"] for d in read(items, start=5)[0]] == ["j5"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [("{not json", "not JSON"), ("[1, 2]", "not list"), ('"x"', "not str")],
)
def test_a_bad_line_stops_the_reading_there(bad: str, message: str) -> None:
    text = json.dumps(job(1)) + "\n" + json.dumps(job(2)) + "\n" + bad + "\n" + json.dumps(job(4))
    where = Reading()
    reading = definitions(io.StringIO(text), 1, where)
    assert [next(reading)["job_id"], next(reading)["job_id"]] == ["j1", "j2"]
    with pytest.raises(InvalidInputError, match=message):
        next(reading)
    assert where.at == 3


def test_bytes_that_are_not_utf8_stop_it_with_a_clear_error(tmp_path: Any) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(json.dumps(job(1)).encode() + b"\n\xff\xfe{}\n")
    with path.open(encoding="utf-8") as stream, pytest.raises(InvalidInputError, match="UTF-8"):
        list(definitions(stream, 1, Reading()))


def test_a_file_that_is_not_json_at_all_is_refused_before_anything(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KADENCE_BOOTSTRAP_SERVERS", "127.0.0.1:1")  # never reached
    path = tmp_path / "jobs.json"
    path.write_text("this is not json\n")
    assert cli.main(["put", str(path)]) == 3
    assert "not JSON" in capsys.readouterr().err
    assert cli.main(["put", str(tmp_path / "missing.json")]) == 3
    assert cli.main(["put", str(path), "--from", "0"]) == 3
