"""Avro schemas derived from the pydantic models, so the two can never drift apart.

The models are the source of truth; `schemas/<Name>.avsc` are the committed artefacts every
other language reads; `schemas/history/<Name>/v<N>.avsc` keeps every version ever released,
each with `v<N>.bin`, a record that version wrote (single-object encoded).

    python -m kadence.schemagen check    # fail if schemas/ is out of step with the models
    python -m kadence.schemagen write    # rewrite schemas/*.avsc from the models
    python -m kadence.schemagen freeze   # also add a history version for each changed schema
"""

from __future__ import annotations

import json
import sys
import types
import typing
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from kadence.errors import SchemaError
from kadence.models import RECORD_TYPES, WireModel
from kadence.models.base import AVRO_NAMESPACE
from kadence.schema_files import schemas_dir

__all__ = ["check", "main", "render", "schema_for", "schemas_dir", "write"]

Avro = Any  # an Avro schema node: a str, a list (union) or a dict


def _is_optional(tp: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != len(typing.get_args(tp)):
            inner = args[0] if len(args) == 1 else typing.Union[tuple(args)]  # noqa: UP007
            return True, inner
    return False, tp


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


class _Builder:
    """Walks model annotations; each named type is defined once per schema, then referenced."""

    def __init__(self) -> None:
        self.defined: set[str] = set()

    def type_of(self, tp: Any) -> Avro:  # noqa: PLR0911 - one branch per Avro type
        tp = _strip_annotated(tp)
        optional, inner = _is_optional(tp)
        if optional:
            return ["null", *self._flatten(self.type_of(inner))]
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            return [self.type_of(a) for a in typing.get_args(tp)]
        if origin is Literal:
            return "string"
        if origin is dict:
            key_t, val_t = typing.get_args(tp)
            if _strip_annotated(key_t) is not str:
                raise SchemaError(f"Avro maps need str keys, not {key_t}")
            return {"type": "map", "values": self.type_of(val_t)}
        if origin is list:
            return {"type": "array", "items": self.type_of(typing.get_args(tp)[0])}
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return self.record(tp)
        if isinstance(tp, type) and issubclass(tp, Enum):
            name = f"{AVRO_NAMESPACE}.{tp.__name__}"
            if name in self.defined:
                return name
            self.defined.add(name)
            symbols = [str(m.value) for m in tp]
            return {"type": "enum", "name": name, "symbols": symbols, "default": symbols[0]}
        simple = {str: "string", bool: "boolean", int: "long", float: "double", bytes: "bytes"}
        if tp in simple:
            return simple[tp]
        if tp is datetime:
            return {"type": "long", "logicalType": "timestamp-millis"}
        raise SchemaError(f"no Avro mapping for {tp!r}")

    @staticmethod
    def _flatten(node: Avro) -> list[Avro]:
        return node if isinstance(node, list) else [node]

    def record(self, model: type[BaseModel]) -> Avro:
        name = (
            model.avro_fullname()
            if issubclass(model, WireModel)
            else f"{AVRO_NAMESPACE}.{model.__name__}"
        )
        if name in self.defined:
            return name
        self.defined.add(name)
        fields = [self.field(fname, info) for fname, info in model.model_fields.items()]
        schema: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
        doc = (model.__doc__ or "").strip().split("\n\n")[0]
        if doc:
            schema["doc"] = " ".join(doc.split())
        return schema

    def field(self, fname: str, info: FieldInfo) -> dict[str, Any]:
        out: dict[str, Any] = {"name": fname, "type": self.type_of(info.annotation)}
        default = _default_of(info)
        if default is not PydanticUndefined:
            out["default"] = default
        return out


def _default_of(info: FieldInfo) -> Any:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return PydanticUndefined
    else:
        value = info.default
    return _avro_json(value)


def _avro_json(value: Any) -> Any:
    """A Python default as Avro's JSON default notation."""
    if isinstance(value, BaseModel):
        return {k: _avro_json(getattr(value, k)) for k in type(value).model_fields}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, dict):
        return {k: _avro_json(v) for k, v in value.items()}
    return value


def schema_for(model: type[WireModel]) -> dict[str, Any]:
    schema = _Builder().record(model)
    assert isinstance(schema, dict)
    return schema


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2) + "\n"


def check(root: Path) -> list[str]:
    """Differences between the committed schemas and the models (empty when in step)."""
    problems = []
    for model in RECORD_TYPES:
        path = root / f"{model.avro_name}.avsc"
        want = render(schema_for(model))
        if not path.exists():
            problems.append(f"{path} is missing")
        elif path.read_text() != want:
            problems.append(f"{path} differs from the model {model.__name__}")
    return problems


def write(root: Path) -> None:
    for model in RECORD_TYPES:
        (root / f"{model.avro_name}.avsc").write_text(render(schema_for(model)))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    command = args[0] if args else "check"
    root = schemas_dir()
    if command == "check":
        problems = check(root)
        for p in problems:
            print(f"schemagen: {p}", file=sys.stderr)
        if problems:
            print("schemagen: run `python -m kadence.schemagen freeze`", file=sys.stderr)
        return 1 if problems else 0
    if command == "write":
        write(root)
        return 0
    if command == "freeze":
        from kadence.schema_history import freeze  # noqa: PLC0415 - imports the codec

        write(root)
        for line in freeze(root):
            print(f"schemagen: {line}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
