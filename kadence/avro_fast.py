"""Avro binary writers and readers compiled to straight-line Python, one pair per schema.

fastavro's schemaless writer and reader walk the schema on every call and the generic encode
first dumps the model to a dict: per record that costs more than the bytes themselves. Here a
parsed record schema becomes the source of two functions, built once:

- a writer taking the model itself (attributes, not a dump) and returning the single-object
  bytes (`C3 01`, fingerprint, body) exactly as `fastavro.schemaless_writer` writes them;
- a reader taking those bytes and returning the datum fastavro's reader would return (the
  writer schema is the reader schema: no resolution).

Both keep the instants they convert (bounded): the due and dispatch instants that the
executions of a second share, and that each execution's later records repeat, are converted
once. The reader keeps each by its bytes, the writer by its value.

Both cover what Kadence's hot records use (null, boolean, long, string, bytes, enum, record,
array, map, unions of null and one type or of records, timestamp-millis) and raise
`UnsupportedSchemaError` on anything else. At run time they raise on anything unusual (an int
outside 64 bits, a naive datetime, an unknown union branch, a negative block count, bytes that
end early): the codec then takes the generic path, which gives the authoritative answer or
error.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from kadence.models.base import EARLIEST, LATEST

Writer = Callable[[Any], bytes]
Reader = Callable[[bytes, int], tuple[dict[str, Any], int]]
"""(data, start) -> (datum, end): the caller checks that `end` is the end of the data."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DOUBLE = struct.Struct("<d")
"""Avro double: 8 bytes, IEEE 754, little-endian."""
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_SMALL = [bytes([(n << 1) if n >= 0 else ((-n << 1) - 1)]) for n in range(-64, 64)]
"""Zig-zag varints of -64..63: one byte each (lengths, counts, union and enum indexes)."""


class UnsupportedSchemaError(Exception):
    """The schema uses something these compilers do not handle: use the generic path."""


def write_long(n: int) -> bytes:
    """Avro long: zig-zag, then a little-endian base-128 varint."""
    if -64 <= n < 64:
        return _SMALL[n + 64]
    if not _LONG_MIN <= n <= _LONG_MAX:
        raise OverflowError(f"{n} does not fit an Avro long")
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def millis(value: datetime) -> int:
    """timestamp-millis of an aware datetime, as fastavro computes it (naive ones raise)."""
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def read_long(data: bytes, pos: int) -> tuple[int, int]:
    c = data[pos]
    pos += 1
    if c < 0x80:
        return (c >> 1) ^ -(c & 1), pos
    z, shift = c & 0x7F, 7
    while True:
        c = data[pos]
        pos += 1
        z |= (c & 0x7F) << shift
        if c < 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")
    if z >> 64:
        raise ValueError("varint beyond 64 bits")
    return (z >> 1) ^ -(z & 1), pos


_FIRST_MS = (EARLIEST - _EPOCH) // timedelta(milliseconds=1)
_END_MS = (LATEST - _EPOCH) // timedelta(milliseconds=1)


def _timestamp(ms: int) -> datetime:
    """An instant the models accept (`UtcDatetime`: the builders of kadence/fast_models.py take
    it as checked), or a ValueError that sends the record to pydantic for its error."""
    if not _FIRST_MS <= ms < _END_MS:
        raise ValueError(f"timestamp {ms} ms is outside what the models accept")
    return _EPOCH + timedelta(0, 0, ms * 1000)


INSTANT_BYTES = 6
"""The varint of every instant from 1970-07-19 to 2039-09-07 (2^34 to 2^41 ms) is six bytes."""
INSTANTS_KEPT = 8_192
"""Instants kept by the reader (by their bytes) and by the writer (by value), each: a worker
reads and writes the same due and dispatch instants for every execution of a second, so a few
thousand cover a turn (cleared when full; about 1 MB each when full)."""
_INSTANTS: dict[bytes, datetime] = {}


_WRITTEN: dict[datetime, bytes] = {}
"""Instants written, kept by value: the bytes of an execution's due and nominal instants come
again in every record written for it (its outcome, its lease events) and for the other runs of
its second. Equal aware datetimes are the same instant, in any zone: the same bytes."""


def _write_instant(value: datetime) -> bytes:
    """A timestamp-millis's bytes, kept (a naive datetime raises, as `millis` does, and is
    never kept: it equals no aware one)."""
    out = write_long(millis(value))
    if len(_WRITTEN) >= INSTANTS_KEPT:
        _WRITTEN.clear()
    _WRITTEN[value] = out
    return out


def instant_bytes(value: datetime) -> bytes:
    """A timestamp-millis's bytes as the compiled writers write them: kept ones looked up (the
    runs of a second share their due instant), others written and kept."""
    out = _WRITTEN.get(value)
    return _write_instant(value) if out is None else out


_WRITTEN_MS: dict[int, bytes] = {}
"""Instants written from their ms (a series' runs, execution_bytes.Template), kept by value."""


def millis_bytes(ms: int) -> bytes:
    """A timestamp-millis's bytes from its ms, as `instant_bytes` writes the datetime of it:
    kept ones looked up (a second's runs share their due instant)."""
    out = _WRITTEN_MS.get(ms)
    if out is None:
        out = write_long(ms)
        if len(_WRITTEN_MS) >= INSTANTS_KEPT:
            _WRITTEN_MS.clear()
        _WRITTEN_MS[ms] = out
    return out


def _read_instant(data: bytes, pos: int, key: bytes) -> tuple[datetime, int]:
    """A timestamp-millis at `pos` (`key`: the `INSTANT_BYTES` from there), kept by `key` when
    its varint is exactly that long. A varint ends at its first byte below 0x80, so bytes equal
    to a kept key are that varint whatever follows: the reader takes the kept instant for them
    without reading (`_Source.instant`)."""
    ms, end = read_long(data, pos)
    value = _timestamp(ms)
    if end - pos == INSTANT_BYTES:
        if len(_INSTANTS) >= INSTANTS_KEPT:
            _INSTANTS.clear()
        _INSTANTS[key] = value
    return value, end


def read_instant(data: bytes, pos: int) -> tuple[datetime, int]:
    """A timestamp-millis at `pos` as the compiled readers read it (kept instants looked up by
    their bytes): the instant and the position after it; ValueError for an instant the models
    do not accept, IndexError for bytes that end too soon."""
    key = data[pos : pos + INSTANT_BYTES]
    value = _INSTANTS.get(key)
    if value is None:
        return _read_instant(data, pos, key)
    return value, pos + INSTANT_BYTES


class _Source:
    """Python source being generated, with the constants it refers to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env: dict[str, Any] = {
            "write_long": write_long,
            "millis": millis,
            "read_long": read_long,
            "timestamp": _timestamp,
            "instants": _INSTANTS,
            "written": _WRITTEN,
            "write_instant": _write_instant,
            "read_instant": _read_instant,
            "unpack_double": _DOUBLE.unpack_from,
            "pack_double": _DOUBLE.pack,
        }
        self.named: dict[str, dict[str, Any]] = {}
        self._n = 0

    def var(self, prefix: str = "v") -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def const(self, value: Any) -> str:
        name = self.var("K")
        self.env[name] = value
        return name

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def read_long(self, depth: int, target: str) -> None:
        """Inline the one-byte case (lengths, indexes, small counts), call for the rest."""
        self.emit(depth, f"{target} = b[p]")
        self.emit(depth, f"if {target} < 0x80:")
        self.emit(depth + 1, f"{target} = ({target} >> 1) ^ -({target} & 1)")
        self.emit(depth + 1, "p += 1")
        self.emit(depth, "else:")
        self.emit(depth + 1, f"{target}, p = read_long(b, p)")

    def instant(self, depth: int, target: str) -> None:
        """A timestamp-millis: kept from an earlier read of the same bytes, else read (and kept:
        `_read_instant`). Converting a long to a datetime costs more than reading it."""
        key = self.var()
        self.emit(depth, f"{key} = b[p:p + {INSTANT_BYTES}]")
        self.emit(depth, f"{target} = instants.get({key})")
        self.emit(depth, f"if {target} is None:")
        self.emit(depth + 1, f"{target}, p = read_instant(b, p, {key})")
        self.emit(depth, "else:")
        self.emit(depth + 1, f"p += {INSTANT_BYTES}")

    def resolve(self, schema: Any) -> Any:
        """A schema with named-type references replaced by their definitions."""
        if isinstance(schema, str) and schema in self.named:
            return self.named[schema]
        if isinstance(schema, dict) and schema.get("type") in ("record", "enum"):
            self.named.setdefault(schema["name"], schema)
        return schema

    def function(self, name: str, signature: str) -> Callable[..., Any]:
        source = f"def {name}({signature}):\n" + "\n".join(self.lines) + "\n"
        exec(compile(source, f"<avro_fast {name}>", "exec"), self.env)  # noqa: S102 - our source
        return self.env[name]  # type: ignore[no-any-return]


def _kind(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        if schema.get("logicalType") == "timestamp-millis" and schema.get("type") == "long":
            return "timestamp-millis"
        kind = schema.get("type")
        return kind if isinstance(kind, str) else "?"
    return "?"


# -- writer ------------------------------------------------------------------------------------


def compile_writer(schema: dict[str, Any], header: bytes) -> Writer:
    """The writer of `schema` (a parsed record schema), producing `header` + Avro body."""
    src = _Source()
    src.emit(1, "out = []")
    src.emit(1, "w = out.append")
    src.emit(1, f"w({src.const(header)})")
    _write(src, schema, "record", 1)
    src.emit(1, "return b''.join(out)")
    return src.function("write", "record")


def _write(src: _Source, schema: Any, value: str, depth: int) -> None:  # noqa: PLR0912
    schema = src.resolve(schema)
    kind = _kind(schema)
    if kind == "null":
        return
    if kind == "boolean":
        src.emit(depth, f"w(b'\\x01' if {value} else b'\\x00')")
    elif kind == "long":
        src.emit(depth, f"w(write_long({value}))")
    elif kind == "timestamp-millis":
        raw = src.var()
        src.emit(depth, f"{raw} = written.get({value})")
        src.emit(depth, f"w(write_instant({value}) if {raw} is None else {raw})")
    elif kind == "double":
        src.emit(depth, f"w(pack_double({value}))")
    elif kind in ("string", "bytes"):
        raw = src.var()
        encode = ".encode()" if kind == "string" else ""
        src.emit(depth, f"{raw} = {value}{encode}")
        src.emit(depth, f"w(write_long(len({raw})))")
        src.emit(depth, f"w({raw})")
    elif kind == "enum":
        indexes = {s: write_long(i) for i, s in enumerate(schema["symbols"])}
        src.emit(depth, f"w({src.const(indexes)}[{value}])")
    elif kind == "record":
        for field in schema["fields"]:
            if not field["name"].isidentifier():
                raise UnsupportedSchemaError(f"field name {field['name']!r}")
            member = src.var()
            src.emit(depth, f"{member} = {value}.{field['name']}")
            _write(src, field["type"], member, depth)
    elif kind in ("array", "map"):
        items = schema["items" if kind == "array" else "values"]
        item, key = src.var(), src.var()
        src.emit(depth, f"if {value}:")
        src.emit(depth + 1, f"w(write_long(len({value})))")
        if kind == "array":
            src.emit(depth + 1, f"for {item} in {value}:")
        else:
            src.emit(depth + 1, f"for {key}, {item} in {value}.items():")
            _write(src, "string", key, depth + 2)
        _write(src, items, item, depth + 2)
        src.emit(depth, "w(b'\\x00')")
    elif kind == "union":
        _write_union(src, schema, value, depth)
    else:
        raise UnsupportedSchemaError(f"Avro type {kind}")


def _write_union(src: _Source, branches: list[Any], value: str, depth: int) -> None:
    branches = [src.resolve(b) for b in branches]
    kinds = [_kind(b) for b in branches]
    if len(branches) == 2 and kinds[0] == "null" and kinds[1] != "union":
        src.emit(depth, f"if {value} is None:")
        src.emit(depth + 1, "w(b'\\x00')")
        src.emit(depth, "else:")
        src.emit(depth + 1, "w(b'\\x02')")
        _write(src, branches[1], value, depth + 1)
    elif kinds and all(k == "record" for k in kinds):
        names = {b["name"]: i for i, b in enumerate(branches)}
        index = src.var()
        src.emit(depth, f"{index} = {src.const(names)}[{value}.avro_fullname()]")
        for i, branch in enumerate(branches):
            src.emit(depth, f"{'if' if i == 0 else 'elif'} {index} == {i}:")
            src.emit(depth + 1, f"w({src.const(write_long(i))})")
            _write(src, branch, value, depth + 1)
    else:
        raise UnsupportedSchemaError(f"union of {kinds}")


# -- reader ------------------------------------------------------------------------------------


def compile_reader(schema: dict[str, Any]) -> Reader:
    """The reader of `schema` (a parsed record schema): Avro body -> fastavro's datum."""
    src = _Source()
    src.emit(1, "b = data")
    _read(src, schema, "datum", 1)
    src.emit(1, "return datum, p")
    return src.function("read", "data, p")


def _read(src: _Source, schema: Any, target: str, depth: int) -> None:
    schema = src.resolve(schema)
    kind = _kind(schema)
    if kind == "null":
        src.emit(depth, f"{target} = None")
    elif kind == "boolean":
        src.emit(depth, f"{target} = b[p]")
        src.emit(depth, "p += 1")
        src.emit(depth, f"if {target} > 1: raise ValueError('boolean byte')")
        src.emit(depth, f"{target} = {target} == 1")
    elif kind == "long":
        src.read_long(depth, target)
    elif kind == "timestamp-millis":
        src.instant(depth, target)
    elif kind == "double":
        src.emit(depth, f"({target},) = unpack_double(b, p)")
        src.emit(depth, "p += 8")
    elif kind in ("string", "bytes"):
        size, end = src.var(), src.var()
        src.read_long(depth, size)
        src.emit(depth, f"{end} = p + {size}")
        src.emit(depth, f"if {size} < 0 or {end} > len(b): raise EOFError('ends early')")
        decode = ".decode()" if kind == "string" else ""
        src.emit(depth, f"{target} = b[p:{end}]{decode}")
        src.emit(depth, f"p = {end}")
    elif kind == "enum":
        symbols = dict(enumerate(schema["symbols"]))
        src.read_long(depth, target)
        src.emit(depth, f"{target} = {src.const(symbols)}[{target}]")
    elif kind == "record":
        members = []
        for field in schema["fields"]:
            member = src.var()
            _read(src, field["type"], member, depth)
            members.append(f"{field['name']!r}: {member}")
        src.emit(depth, f"{target} = {{{', '.join(members)}}}")
    elif kind in ("array", "map"):
        _read_blocks(src, schema, kind, target, depth)
    elif kind == "union":
        _read_union(src, schema, target, depth)
    else:
        raise UnsupportedSchemaError(f"Avro type {kind}")


def _read_blocks(src: _Source, schema: dict[str, Any], kind: str, target: str, depth: int) -> None:
    """Arrays and maps come in blocks, each a count then items, ended by a zero count."""
    count, item, key = src.var(), src.var(), src.var()
    src.emit(depth, f"{target} = {'[]' if kind == 'array' else '{}'}")
    src.read_long(depth, count)
    src.emit(depth, f"while {count}:")
    src.emit(depth + 1, f"if {count} < 0: raise ValueError('sized block')")
    src.emit(depth + 1, f"for _ in range({count}):")
    if kind == "array":
        _read(src, schema["items"], item, depth + 2)
        src.emit(depth + 2, f"{target}.append({item})")
    else:
        _read(src, "string", key, depth + 2)
        _read(src, schema["values"], item, depth + 2)
        src.emit(depth + 2, f"{target}[{key}] = {item}")
    src.read_long(depth + 1, count)


def _read_union(src: _Source, branches: list[Any], target: str, depth: int) -> None:
    index = src.var()
    src.read_long(depth, index)
    for i, branch in enumerate(branches):
        src.emit(depth, f"{'if' if i == 0 else 'elif'} {index} == {i}:")
        _read(src, branch, target, depth + 1)
    src.emit(depth, "else:")
    src.emit(depth + 1, "raise ValueError('union branch')")
