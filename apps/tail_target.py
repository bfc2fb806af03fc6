"""What `kadence tail` needs to read a tenant's own Kafka-target topics (`<ns>.to.<tenant
part>.<name>`, its events topic among them): which topic a name means for that tenant, refused
when it is another tenant's, and each record as one JSON document, whatever its format (the
Avro envelope, the JSON envelope, a bare payload, an event), bounded so that no record, however
large or garbled, prints more than `MAX_SHOWN` bytes of it."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_core import to_jsonable_python

from kadence.codec import MAGIC, Codec
from kadence.errors import DecodeError, InvalidInputError
from kadence.models import WireModel
from kadence.models.base import IDENT_RE
from kadence.target_topics import target_prefix, tenant_part, too_long
from kadence.topics import target_topic

AnyHeaders = Mapping[str, str | bytes | None] | Sequence[tuple[str, str | bytes | None]] | None
"""Headers in either form confluent-kafka hands out."""
MAX_SHOWN = 64 * 1024
"""The most bytes of one record's value `tail` prints (a larger one shows its size and head)."""
HEAD_SHOWN = 200
"""What is shown of a value or header too large or too garbled to print whole."""
MAX_HEADERS = 32
"""Headers shown per record; Kadence writes at most ten."""
TARGET_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}\Z")
"""A Kafka target's topic as a job names it (KafkaTarget.topic)."""


def tenant_topic(namespace: str, tenant: str, name: str) -> str:
    """The topic `name` means for `tenant`: a target as a job names it (`orders`,
    `kadence-events`), or a full name under the tenant's own prefix. Another tenant's topic,
    or any other of the namespace, is refused with what is allowed."""
    if not IDENT_RE.fullmatch(tenant):
        raise InvalidInputError(f"{tenant[:200]!r} is not a tenant id", ["tenant: not an id"])
    mine = target_prefix(namespace) + tenant_part(tenant) + "."
    if name.startswith(target_prefix(namespace)):
        if not name.startswith(mine):
            raise InvalidInputError(
                f"{name[:249]} is not tenant {tenant}'s",
                [f"topic: a tenant reads only its own topics, {mine}<name>"],
            )
        name = name[len(mine) :]
    if not TARGET_NAME.match(name):
        raise InvalidInputError(
            f"bad target name {name[:249]!r}",
            ["target: 1 to 249 of letters, digits, '.', '_', '-' (the job's KafkaTarget topic)"],
        )
    why = too_long(tenant, name)
    if why is not None:
        raise InvalidInputError(f"{name[:249]}: too long", [f"target: {why}"])
    return target_topic(namespace, tenant, name)


def target_record(codec: Codec, value: bytes | None, headers: AnyHeaders) -> dict[str, Any]:
    """One record of a target topic as JSON: `type` says how its value was read (the record
    type of an Avro envelope, `json`, `payload`, `tombstone`, `too_large`, `undecodable`),
    `headers` carries the ids and the guarantee."""
    return {**_value(codec, value), "headers": _headers(headers)}


def _value(codec: Codec, value: bytes | None) -> dict[str, Any]:
    if value is None:
        return {"type": "tombstone"}
    if len(value) > MAX_SHOWN:
        head = value[:HEAD_SHOWN].decode(errors="replace")
        return {"type": "too_large", "bytes": len(value), "head": head}
    if value.startswith(MAGIC):
        try:
            record = codec.decode(value)
        except DecodeError as exc:
            return {"type": "undecodable", "error": str(exc)[:HEAD_SHOWN]}
        return {"type": type(record).__name__, **record_json(record)}
    return _text(value)


def record_json(record: WireModel) -> dict[str, Any]:
    """A Kadence record as JSON; its bytes (a payload) as text, or as base64 when one is not
    UTF-8 (then `"bytes_encoding": "base64"`)."""
    try:
        return record.model_dump(mode="json")
    except UnicodeDecodeError:
        doc = to_jsonable_python(_base64(record.model_dump()))
        assert isinstance(doc, dict)
        return {**doc, "bytes_encoding": "base64"}


def _base64(value: Any) -> Any:
    """`value` with every bytes in it as standard base64 text (as the JSON envelope has it)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _base64(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_base64(v) for v in value]
    return value


def _text(value: bytes) -> dict[str, Any]:
    """A JSON value (the JSON envelope, an event) as JSON, anything else as a payload: its
    text, or base64 when it is not UTF-8."""
    try:
        return {"type": "json", "value": json.loads(value)}
    except (ValueError, RecursionError):
        pass
    try:
        return {"type": "payload", "value": value.decode("utf-8")}
    except UnicodeDecodeError:
        return {"type": "payload", "value": base64.b64encode(value).decode(), "encoding": "base64"}


def _headers(headers: AnyHeaders) -> dict[str, str]:
    """The first `MAX_HEADERS` headers as text (the first of a repeated name), each bounded."""
    pairs = list(headers.items() if isinstance(headers, Mapping) else headers or ())
    out: dict[str, str] = {}
    for name, value in pairs[:MAX_HEADERS]:
        raw = value.encode() if isinstance(value, str) else value or b""
        out.setdefault(name[:HEAD_SHOWN], raw[:HEAD_SHOWN].decode(errors="replace"))
    return out
