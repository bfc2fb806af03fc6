"""Bytes <-> models: Avro single-object encoding, with JSON accepted on input topics.

Avro single-object encoding is `C3 01`, the 8-byte little-endian CRC-64-AVRO fingerprint of the
writer schema's canonical form, then the Avro binary body. The fingerprint names the writer
schema, so no registry service is needed: this build knows every schema version ever released
(schemas/history/) and resolves old records to the current models.

The records of the execution path (kadence/fast_models.py) are written and, in the current
schema, read by code compiled from their schema (kadence/avro_fast.py): the same bytes and the
same models, without pydantic or fastavro's per-call schema walk. Anything those cannot handle
takes the generic path below.

Every failure is a `DecodeError` subclass with a stable `code`; processors turn those into
`rejected` records instead of crashing.
"""

from __future__ import annotations

import functools
import io
import json
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import fastavro
from fastavro.schema import fingerprint as _fastavro_fingerprint
from fastavro.schema import to_parsing_canonical_form
from pydantic import BaseModel, ValidationError

from kadence import avro_fast, fast_models
from kadence.errors import (
    DecodeError,
    EmptyRecordError,
    EncodeError,
    GarbageBytesError,
    InvalidRecordError,
    SchemaError,
    TruncatedRecordError,
    UnexpectedRecordTypeError,
    UnknownSchemaError,
)
from kadence.models import RECORD_TYPES, ScheduleDefinition, WireModel
from kadence.schema_files import schemas_dir

MAGIC = b"\xc3\x01"
HEADER_LEN = 10
T = TypeVar("T", bound=WireModel)


def fingerprint(schema: Any) -> bytes:
    """CRC-64-AVRO of the parsing canonical form, as the 8 bytes single-object encoding uses."""
    return bytes.fromhex(_fastavro_fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))


@dataclass(frozen=True)
class WriterSchema:
    name: str
    """The record's Avro full name, e.g. kadence.ScheduleDefinition."""
    version: int | None
    """Its history version, or None for the current schema when it is not frozen yet."""
    parsed: Any


class SchemaSet:
    """Every schema this build can read (all history) and the current one per record type."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or schemas_dir()
        self.by_fingerprint: dict[bytes, WriterSchema] = {}
        self.current: dict[str, tuple[Any, bytes]] = {}
        self.models: dict[str, type[WireModel]] = {}
        for model in RECORD_TYPES:
            path = self.root / f"{model.avro_name}.avsc"
            raw = _load(path)
            parsed = fastavro.parse_schema(raw, _force=True)
            fp = fingerprint(raw)
            self.current[model.avro_fullname()] = (parsed, fp)
            self.models[model.avro_fullname()] = model
            self.by_fingerprint[fp] = WriterSchema(model.avro_fullname(), None, parsed)
        history = self.root / "history"
        for path in sorted(history.glob("*/v*.avsc")) if history.is_dir() else []:
            raw = _load(path)
            name = raw.get("name", "")
            if name not in self.current:
                continue  # a record type this build no longer reads
            version = int(path.stem.removeprefix("v"))
            fp = fingerprint(raw)
            if fp in self.by_fingerprint and self.by_fingerprint[fp].version is not None:
                continue
            parsed = fastavro.parse_schema(raw, _force=True)
            self.by_fingerprint[fp] = WriterSchema(name, version, parsed)

    def model_named(self, name: str) -> type[WireModel] | None:
        full = name if "." in name else f"kadence.{name}"
        return self.models.get(full)


def _load(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SchemaError(
            f"cannot read Avro schema {path}: {exc}. Fix: `python -m kadence.schemagen write`"
        ) from exc
    if not isinstance(raw, dict):
        raise SchemaError(f"{path} is not an Avro record schema")
    return raw


@functools.cache
def _shape(model: type[BaseModel]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(fields holding a union of records, fields holding one nested model) of a model class."""
    unions, nested = [], []
    for name, info in model.model_fields.items():
        if typing.get_origin(_plain(info.annotation)) is list:
            continue  # arrays hold records without unions (HeldRange): nothing to name
        args = [a for a in typing.get_args(info.annotation) if a is not type(None)] or [
            info.annotation
        ]
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if len(models) > 1:
            unions.append(name)
        elif models:
            nested.append(name)
    return tuple(unions), tuple(nested)


def _plain(tp: Any) -> Any:
    """`tp` without its Annotated wrapper."""
    return typing.get_args(tp)[0] if typing.get_origin(tp) is typing.Annotated else tp


def _tag(value: BaseModel, datum: dict[str, Any]) -> dict[str, Any]:
    """Name the branch of every record union (fastavro's tuple notation): no guessing."""
    unions, nested = _shape(type(value))
    for name in unions:
        member = getattr(value, name)
        if member is not None:
            datum[name] = (type(member).avro_fullname(), _tag(member, datum[name]))
    for name in nested:
        member = getattr(value, name)
        if member is not None:
            _tag(member, datum[name])
    return datum


def _to_avro(value: BaseModel) -> dict[str, Any]:
    """A model as the datum fastavro writes (pydantic's fast dump, union branches named)."""
    return _tag(value, value.model_dump())


def _decode_fast(
    data: bytes, read: avro_fast.Reader, build: fast_models.Builder
) -> WireModel | None:
    """The record, or None for the generic path to decode (or to name what is wrong)."""
    try:
        datum, end = read(data, HEADER_LEN)
        return build(datum) if end == len(data) else None
    except Exception:
        return None


def describe_validation_error(exc: ValidationError) -> list[str]:
    errors = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(record)"
        errors.append(f"{loc}: {err['msg']}")
    return errors


VALIDATED: tuple[type[WireModel], ...] = (ScheduleDefinition,)
"""Records from users read by a compiled reader (faster than fastavro's for these), then
validated by pydantic as on the generic path: a scheduler admits ten thousand a second."""

_COMPILED: dict[bytes, tuple[avro_fast.Writer, avro_fast.Reader]] = {}
"""Compiled writer and reader by schema fingerprint (the fingerprint names the schema)."""


def _compiled(parsed: Any, fp: bytes) -> tuple[avro_fast.Writer, avro_fast.Reader] | None:
    if fp not in _COMPILED:
        try:
            _COMPILED[fp] = (
                avro_fast.compile_writer(parsed, MAGIC + fp),
                avro_fast.compile_reader(parsed),
            )
        except avro_fast.UnsupportedSchemaError:
            return None
    return _COMPILED[fp]


class Codec:
    """Encodes models to Avro single-object bytes; decodes Avro or JSON back to models.

    `fast=False` keeps every record on the generic path (benchmarks and equivalence tests).
    """

    def __init__(self, schemas: SchemaSet | None = None, *, fast: bool = True) -> None:
        self.schemas = schemas or SchemaSet()
        self._writers: dict[type[WireModel], avro_fast.Writer] = {}
        self._readers: dict[bytes, tuple[avro_fast.Reader, fast_models.Builder]] = {}
        for model in fast_models.BUILDERS if fast else ():
            parsed, fp = self.schemas.current[model.avro_fullname()]
            compiled = _compiled(parsed, fp)
            if compiled is None:
                continue
            self._writers[model] = compiled[0]
            build = fast_models.builder(model)
            if build is not None:
                self._readers[fp] = (compiled[1], build)
        for model in VALIDATED if fast else ():
            parsed, fp = self.schemas.current[model.avro_fullname()]
            compiled = _compiled(parsed, fp)
            if compiled is not None:
                self._readers[fp] = (compiled[1], functools.partial(self._validate, model))

    # -- encode ---------------------------------------------------------------------------

    def encode(self, record: WireModel) -> bytes:
        """The record's Avro single-object bytes; `EncodeError` and nothing else when its values
        do not fit its schema (a model built without validation, `model_construct`)."""
        writer = self._writers.get(type(record))
        if writer is not None:
            try:
                return writer(record)
            except Exception:  # noqa: S110 - the generic path answers or raises EncodeError
                pass
        name = type(record).avro_fullname()
        try:
            parsed, fp = self.schemas.current[name]
        except KeyError:
            raise EncodeError(f"{name} is not a top-level Kadence record type") from None
        buf = io.BytesIO()
        buf.write(MAGIC)
        buf.write(fp)
        try:
            fastavro.schemaless_writer(buf, parsed, _to_avro(record))
        except Exception as exc:  # OverflowError, UnicodeEncodeError, ...: the caller's one error
            raise EncodeError(
                f"cannot write {name} with its schema: {type(exc).__name__}: {exc}"
            ) from exc
        return buf.getvalue()

    def schema_fingerprint(self, model: type[WireModel]) -> bytes:
        return self.schemas.current[model.avro_fullname()][1]

    # -- decode ---------------------------------------------------------------------------

    def decode(
        self,
        data: bytes | None,
        allowed: Iterable[type[WireModel]] | None = None,
        json_default: type[WireModel] | None = None,
    ) -> WireModel:
        """Decode `data` to one of `allowed` (any Kadence record when None).

        JSON documents name their type in a top-level "type" field ("TriggerNow") or take
        `json_default`. Raises a `DecodeError` subclass; never anything else.
        """
        allowed_set = tuple(allowed) if allowed is not None else RECORD_TYPES
        if not data:
            raise EmptyRecordError("empty record value (expected a Kadence record)")
        try:
            if data.startswith(MAGIC):
                record = self._decode_avro(data)
            elif data.lstrip()[:1] == b"{":
                record = self._decode_json(data, json_default)
            else:
                raise GarbageBytesError(
                    f"not a Kadence record: starts with {data[:8].hex(' ')}, expected Avro "
                    "single-object encoding (c3 01 ...) or a JSON object"
                )
        except DecodeError:
            raise
        except Exception as exc:
            raise GarbageBytesError(f"undecodable record: {type(exc).__name__}: {exc}") from exc
        if not isinstance(record, allowed_set):
            names = ", ".join(m.avro_name for m in allowed_set)
            raise UnexpectedRecordTypeError(
                f"{type(record).avro_name} does not belong here (expected {names})"
            )
        return record

    def names(self, data: bytes | None, model: type[WireModel]) -> bool:
        """Whether `data` is Avro written with a schema of `model` (its fingerprint alone is
        looked at: nothing is decoded)."""
        if not data or not data.startswith(MAGIC) or len(data) < HEADER_LEN:
            return False
        writer = self.schemas.by_fingerprint.get(data[2:HEADER_LEN])
        return writer is not None and writer.name == model.avro_fullname()

    def decode_as(self, data: bytes | None, model: type[T]) -> T:
        record = self.decode(data, (model,), json_default=model)
        assert isinstance(record, model)
        return record

    def _decode_avro(self, data: bytes) -> WireModel:
        if len(data) < HEADER_LEN:
            raise TruncatedRecordError(
                f"Avro single-object header needs {HEADER_LEN} bytes, got {len(data)}"
            )
        fp = data[2:HEADER_LEN]
        writer = self.schemas.by_fingerprint.get(fp)
        if writer is None:
            raise UnknownSchemaError(
                f"unknown schema fingerprint {fp.hex()}: written by a schema this build does not "
                "know (a newer Kadence, or not a Kadence record). Upgrade the reader, or check the "
                "producer.",
                fp,
            )
        fast = self._readers.get(fp)
        if fast is not None:
            record = _decode_fast(data, *fast)
            if record is not None:
                return record
        reader, current = self.schemas.current[writer.name]
        body = io.BytesIO(data[HEADER_LEN:])
        try:
            if fp == current:  # no resolution: fastavro would compare the two schemas each time
                datum = fastavro.schemaless_reader(body, reader, None)
            else:
                datum = fastavro.schemaless_reader(body, writer.parsed, reader)
        except (EOFError, StopIteration) as exc:
            raise TruncatedRecordError(
                f"{writer.name} record ends early ({len(data)} bytes): truncated or cut off"
            ) from exc
        if body.tell() != len(data) - HEADER_LEN:
            raise GarbageBytesError(
                f"{writer.name} record has {len(data) - HEADER_LEN - body.tell()} trailing bytes"
            )
        model = self.schemas.models[writer.name]
        return self._validate(model, datum)

    def _decode_json(self, data: bytes, json_default: type[WireModel] | None) -> WireModel:
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise GarbageBytesError(f"invalid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise GarbageBytesError("a JSON record must be an object")
        type_name = doc.pop("type", None)
        if type_name is None:
            if json_default is None:
                raise InvalidRecordError(
                    'JSON record has no "type" field naming its record type',
                    ['type: field required (e.g. "TriggerNow")'],
                )
            model: type[WireModel] | None = json_default
        else:
            model = self.schemas.model_named(str(type_name))
            if model is None:
                raise UnexpectedRecordTypeError(f"unknown record type {type_name!r}")
        assert model is not None
        return self._validate(model, doc)

    @staticmethod
    def _validate(model: type[WireModel], datum: Any) -> WireModel:
        try:
            return model.model_validate(datum)
        except ValidationError as exc:
            errors = describe_validation_error(exc)
            raise InvalidRecordError(
                f"invalid {model.avro_name}: " + "; ".join(errors), errors
            ) from exc
