"""Near-valid records, as a hostile producer writes them: a valid record (kadence/examples.py)
with a few values swapped for what a reader must survive, as JSON or as Avro.

JSON: an extreme int (2^63, -2^63-1, 2^64, a 5 000-digit number), a huge or odd string (line
breaks, NUL, control characters, lone surrogates written as `\\ud800`, 100 000 characters),
NaN and infinities, deep nesting (up to 100 000 levels), a wrong type, a missing or unknown
field; then perhaps bytes that are not UTF-8, or the text cut short.
Avro: the record forged through fastavro with extreme longs, odd strings and out-of-range
instants in its fields (what only a model can refuse), or its bytes damaged: cut, flipped,
trailing junk, an unknown fingerprint, a string made invalid UTF-8.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import fastavro
from hypothesis import strategies as st

from kadence.codec import MAGIC, Codec, _to_avro
from kadence.examples import examples
from kadence.models import WireModel

CODEC = Codec()
EXAMPLES = examples()

EXTREME_INTS = [
    2**63,
    -(2**63) - 1,
    2**64,
    2**63 - 1,
    -(2**63),
    2**53,
    2**31,
    -1,
    0,
    10**30,
]
ODD_TEXT = [
    "",
    "\r\n",
    "text/plain\r\nX-Injected: 1",
    "a\x00b",
    "\x01\x7f\x85\x9f",
    "\u202eevil",
    "\U0001f600" * 300,
    "x" * 100_000,
    " ",
    "é",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59.9999Z",
    "acme/../globex",
]
LONE_SURROGATES = ["\ud800", "a\udfffb"]
"""Only JSON can carry these (as escapes): UTF-8, so Avro, has no code for them."""
RAW_JSON = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-0",
    "1.5",
    "9" * 5_000,
    "[" * 100_000 + "]" * 100_000,
    '{"a":' * 2_000 + "1" + "}" * 2_000,
    "[" * 500 + "]" * 500,
]
"""Values `json.dumps` will not write as they stand: spliced into the text."""
FIELD_NAMES = st.sampled_from(["colour", "type", "version", "__proto__", "tenant ", "x" * 300])


def _paths(doc: Any) -> Iterator[tuple[Any, Any]]:
    """(container, key) of every value in `doc`, nested ones too."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc)
    for key, value in list(items):
        yield doc, key
        if isinstance(value, dict | list) and value:
            yield from _paths(value)


_ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_PLAIN: dict[str, st.SearchStrategy[Any]] = {
    "int": st.sampled_from(EXTREME_INTS) | st.integers(),
    "text": st.sampled_from(ODD_TEXT) | st.text(max_size=50),
    "surrogate": st.sampled_from(LONE_SURROGATES),
    "float": st.floats(allow_nan=True, allow_infinity=True),
    "type": st.sampled_from([None, True, [], {}, [1], {"kind": "cron"}, "1", 1.0]),
    "any": _ANY,
}


@st.composite
def _odd_value(draw: st.DrawFn, raws: dict[str, str]) -> Any:
    kind = draw(st.sampled_from([*_PLAIN, "raw"]))
    if kind != "raw":
        return draw(_PLAIN[kind])
    token = f"\x00raw{len(raws)}\x00"
    raws[token] = draw(st.sampled_from(RAW_JSON))
    return token


@st.composite
def _damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` as it is, or cut, or with bytes that are not UTF-8, or one byte changed."""
    kind = draw(st.sampled_from(["as-is", "as-is", "cut", "not-utf8", "flip", "junk"]))
    at = draw(st.integers(0, max(0, len(data) - 1)))
    if kind == "cut":
        return data[:at]
    if kind == "not-utf8":
        bad = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80"]))
        return data[:at] + bad + data[at:]
    if kind == "flip" and data:
        return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    if kind == "junk":
        return data + draw(st.binary(min_size=1, max_size=16))
    return data


@st.composite
def near_json(draw: st.DrawFn, names: list[str], *, typed: bool = False) -> bytes:
    """One of the example records `names` as JSON (with its `"type"` when `typed`), a few of its
    values made hostile."""
    name = draw(st.sampled_from(names))
    doc: dict[str, Any] = EXAMPLES[name].model_dump(mode="json")
    if typed:
        doc = {"type": name, **doc}
    doc = copy.deepcopy(doc)
    raws: dict[str, str] = {}
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["int", "text", "replace", "replace", "delete", "add"]))
        paths = list(_paths(doc)) or [(doc, "tenant")]
        if action in ("int", "text"):  # the values a field's bound is about, one at a time
            kind = int if action == "int" else str
            matching = [(c, k) for c, k in paths if type(c[k]) is kind]
            paths = matching or paths
        container, key = draw(st.sampled_from(paths))
        if action == "int":
            container[key] = draw(st.sampled_from(EXTREME_INTS))
        elif action == "text":
            container[key] = draw(st.sampled_from(ODD_TEXT + LONE_SURROGATES))
        elif action == "delete":
            container.pop(key)
        elif action == "add" and isinstance(container, dict):
            container[draw(FIELD_NAMES)] = draw(_odd_value(raws))
        else:
            container[key] = draw(_odd_value(raws))
    text = json.dumps(doc, allow_nan=True)
    for token, raw in raws.items():
        text = text.replace(json.dumps(token), raw)
    return draw(_damaged(text.encode()))


def _leaves(datum: Any) -> Iterator[tuple[Any, Any]]:
    """(container, key) of every scalar in a fastavro datum (record unions are (name, dict))."""
    if isinstance(datum, tuple):
        yield from _leaves(datum[1])
        return
    items = datum.items() if isinstance(datum, dict) else enumerate(datum)
    for key, value in list(items):
        if isinstance(value, dict | list | tuple):
            yield from _leaves(value)
        elif not isinstance(value, bool) and value is not None:
            yield datum, key


@st.composite
def _forged(draw: st.DrawFn, record: WireModel) -> bytes:
    """`record` written by fastavro with some fields set to what fits the schema and breaks the
    model (no model stands between a hostile producer and the wire)."""
    datum = _to_avro(record)
    for _ in range(draw(st.integers(1, 3))):
        container, key = draw(st.sampled_from(list(_leaves(datum))))
        value = container[key]
        if isinstance(value, int):
            container[key] = draw(
                st.sampled_from([2**63 - 1, -(2**63), 2**53 + 1, 2**31, -1, 0, 101])
            )
        elif isinstance(value, str):
            container[key] = draw(st.sampled_from(ODD_TEXT))
        elif isinstance(value, bytes):
            container[key] = draw(st.sampled_from([b"", b"\xff" * 600_000]))
        elif isinstance(value, datetime):
            container[key] = draw(
                st.sampled_from(
                    [
                        datetime(1, 1, 1, tzinfo=UTC),
                        datetime(1899, 12, 31, tzinfo=UTC),
                        datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
                    ]
                )
            )
    parsed, fp = CODEC.schemas.current[type(record).avro_fullname()]
    buf = io.BytesIO()
    buf.write(MAGIC + fp)
    try:
        fastavro.schemaless_writer(buf, parsed, datum)
    except (ValueError, TypeError, OverflowError):  # the schema itself refuses it: as it was
        return CODEC.encode(record)
    return buf.getvalue()


@st.composite
def near_avro(draw: st.DrawFn, names: list[str]) -> bytes:
    """One of the example records `names` in Avro single-object encoding: forged with hostile
    values, or its bytes damaged (invalid UTF-8 in a string, an unknown fingerprint, ...)."""
    record = EXAMPLES[draw(st.sampled_from(names))]
    kind = draw(st.sampled_from(["forged", "damaged", "not-utf8", "fingerprint"]))
    if kind == "forged":
        return draw(_forged(record))
    data = CODEC.encode(record)
    if kind == "not-utf8":  # same length, so the Avro framing still holds
        return data.replace(b"acme", b"\xff\xfe\xfd\xfc", 1)
    if kind == "fingerprint":
        return MAGIC + draw(st.binary(min_size=8, max_size=8)) + data[10:]
    return draw(_damaged(data))


def near_valid(names: list[str], *, typed: bool = False) -> st.SearchStrategy[bytes]:
    """Near-valid JSON or Avro of the records `names`, or a few plain odd values."""
    return st.one_of(
        near_json(names, typed=typed),
        near_avro(names),
        st.sampled_from([b"", b"{", b"null", b"[]", b"\xc3\x01", b"\xc3\x01" + b"\x00" * 8]),
        st.binary(max_size=64),
    )
