"""The wire contract: schemas/ in step with the models, and every released version readable."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import fastavro
import pytest

from kadence.codec import MAGIC, Codec, SchemaSet, fingerprint
from kadence.examples import examples
from kadence.models import RECORD_TYPES, ScheduleDefinition, WireModel
from kadence.schema_history import compatibility_problems, versions
from kadence.schemagen import check, schemas_dir

ROOT = schemas_dir()


def test_committed_schemas_match_the_models() -> None:
    assert check(ROOT) == []


def test_every_record_type_has_a_schema_and_an_example() -> None:
    names = {m.avro_name for m in RECORD_TYPES}
    assert names == set(examples())
    assert names == {p.stem for p in ROOT.glob("*.avsc")}


@pytest.mark.parametrize("model", RECORD_TYPES, ids=lambda m: m.avro_name)
def test_current_schema_is_frozen_in_history(model: type[WireModel]) -> None:
    """A schema change must be released with `schemagen freeze`, which keeps a record it wrote."""
    current = fingerprint(json.loads((ROOT / f"{model.avro_name}.avsc").read_text()))
    kept = [
        fingerprint(json.loads(p.read_text()))
        for p in (ROOT / "history" / model.avro_name).glob("v*.avsc")
    ]
    assert current in kept, f"run `python -m kadence.schemagen freeze` for {model.avro_name}"


def test_records_written_by_every_kept_version_are_readable() -> None:
    bins = list((ROOT / "history").glob("*/v*.bin"))
    assert len(bins) >= len(RECORD_TYPES)
    assert compatibility_problems(ROOT) == []


@pytest.mark.parametrize("name", sorted(examples()))
def test_latest_kept_bytes_equal_what_the_code_writes_today(name: str) -> None:
    latest = versions(ROOT, name)[-1]
    kept = (ROOT / "history" / name / f"v{latest}.bin").read_bytes()
    assert Codec().encode(examples()[name]) == kept


def _older_schedule_schema() -> dict[str, Any]:
    """ScheduleDefinition as an imagined v0 that had no description or concurrency_key."""
    schema: dict[str, Any] = json.loads((ROOT / "ScheduleDefinition.avsc").read_text())
    schema["fields"] = [
        f for f in schema["fields"] if f["name"] not in {"description", "concurrency_key"}
    ]
    return schema


def _write_with(schema: dict[str, object], datum: dict[str, object]) -> bytes:
    buf = io.BytesIO()
    buf.write(MAGIC + fingerprint(schema))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema, _force=True), datum)
    return buf.getvalue()


def _datum() -> dict[str, object]:
    return {
        "tenant": "acme",
        "job_id": "old-job",
        "version": 7,
        "schedule": {"-type": "kadence.OnceSchedule", "kind": "once", "run_at": 1_800_000_000_000},
        "target": {"-type": "kadence.KafkaTarget", "kind": "kafka", "topic": "t"},
        "payload": b"x",
    }


def test_a_record_from_an_older_schema_reads_with_current_defaults(tmp_path: Path) -> None:
    root = tmp_path / "schemas"
    shutil.copytree(ROOT, root)
    old = _older_schedule_schema()
    (root / "history" / "ScheduleDefinition" / "v0.avsc").write_text(json.dumps(old))
    data = _write_with(old, _datum())

    record = Codec(SchemaSet(root)).decode_as(data, ScheduleDefinition)

    assert record.job_id == "old-job"
    assert record.version == 7
    assert record.description == ""
    assert record.concurrency_key is None
    # without the old schema kept, the same bytes are unknown
    with pytest.raises(Exception, match="unknown schema fingerprint"):
        Codec().decode(data)


def test_an_incompatible_kept_version_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "schemas"
    shutil.copytree(ROOT, root)
    old = _older_schedule_schema()
    for field in old["fields"]:
        if field["name"] == "version":
            field["type"] = "string"  # current readers need a long: no promotion exists
    folder = root / "history" / "ScheduleDefinition"
    (folder / "v0.avsc").write_text(json.dumps(old))
    (folder / "v0.bin").write_bytes(_write_with(old, {**_datum(), "version": "seven"}))

    problems = compatibility_problems(root)

    assert len(problems) == 1
    assert problems[0].startswith("ScheduleDefinition/v0.bin:")
