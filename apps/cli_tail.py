"""`kadence tail <topic>`: follow a Kadence topic and print each record decoded for people
(or as JSON lines with --json). The topic is named by its short name (`executions`,
`history`, ...) in the configured namespace. Records that are not Kadence records are shown as
such, with the reason, never skipped silently.

`kadence tail --tenant acme --target orders` follows one of the tenant's own Kafka-target
topics (`<ns>.to.acme.orders`; `--target kadence-events` its events), each record as one JSON
document whatever its format (apps/tail_target.py); another tenant's topic is refused."""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Message, TopicPartition

from apps.tail_target import HEAD_SHOWN, record_json, target_record, tenant_topic
from connectors.consumer import tenant_group
from kadence import batches
from kadence.codec import Codec
from kadence.errors import DecodeError, InvalidInputError, TopicError
from kadence.models import ExecutionBatch, ExecutionOutcomes, WireModel
from kadence.settings import KadenceSettings
from kadence.topics import ALL_TOPICS


def add_command(sub: Any) -> None:
    p = sub.add_parser("tail", help="follow a topic, records decoded for people")
    p.add_argument(
        "topic",
        nargs="?",
        help="short name: " + ", ".join(s.name("").lstrip(".") for s in ALL_TOPICS),
    )
    p.add_argument("--tenant", help="with --target: the tenant whose topic it is")
    p.add_argument(
        "--target",
        metavar="NAME",
        help="a Kafka target of --tenant as its jobs name it (orders, kadence-events), "
        "or its full name <ns>.to.<tenant>.<name>; printed as JSON",
    )
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("-n", "--max", type=int, default=0, help="stop after this many (0: follow)")
    p.add_argument("--idle", type=float, default=0, help="stop after this many idle seconds")
    p.add_argument("--json", action="store_true", help="one JSON object per line")


def chosen_topic(settings: KadenceSettings, args: argparse.Namespace) -> str:
    """The topic to follow: a Kadence topic by its short name, or a tenant's target."""
    if args.target is not None or args.tenant is not None:
        if args.target is None or args.tenant is None or args.topic is not None:
            raise InvalidInputError(
                "a tenant's topic takes --tenant and --target, and no TOPIC",
                ["target: --tenant T --target NAME"],
            )
        return tenant_topic(settings.namespace, args.tenant, args.target)
    names = {s.name("").lstrip("."): s.name(settings.namespace) for s in ALL_TOPICS}
    topic = names.get(args.topic or "", args.topic)
    if topic not in names.values():
        raise InvalidInputError(
            f"no topic {(args.topic or '')[:249]}",
            [f"topic: one of {', '.join(names)}, or --tenant T --target NAME"],
        )
    return str(topic)


def tail(settings: KadenceSettings, args: argparse.Namespace) -> int:
    topic = chosen_topic(settings, args)
    if args.max < 0 or args.idle < 0:
        raise InvalidInputError("negative bound", ["max, idle: 0 or more"])
    group = f"kadence-tail-{uuid.uuid4().hex[:8]}"
    if args.tenant is not None:  # a group its ACLs allow (it commits nothing)
        group = tenant_group(settings.namespace, args.tenant, group)
    consumer = Consumer(
        {
            **settings.kafka_common(),
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
    except BaseException:
        consumer.close()
        raise
    if meta.error is not None or not meta.partitions:
        consumer.close()
        raise TopicError(
            f"{topic}: no such topic ({meta.error}); a target's topic is made at its first run"
        )
    start = OFFSET_BEGINNING if args.from_beginning else OFFSET_END
    consumer.assign([TopicPartition(topic, p, start) for p in meta.partitions])
    codec, seen, idle = Codec(), 0, 0.0
    try:
        while not args.max or seen < args.max:
            m = consumer.poll(0.5)
            if m is None or m.error():
                idle += 0.5
                if args.idle and idle >= args.idle:
                    break
                continue
            idle = 0.0
            seen += 1
            print(_line(codec, m, args), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    return 0


def _line(codec: Codec, m: Message, args: argparse.Namespace) -> str:
    if args.target is None:
        return _render(codec, m.key(), m.value(), m.partition(), m.offset(), args.json)
    doc = target_record(codec, m.value(), m.headers())
    key = (m.key() or b"")[:HEAD_SHOWN].decode(errors="replace")
    return json.dumps({"key": key, "partition": m.partition(), "offset": m.offset(), **doc})


def _render(  # noqa: PLR0917 - one record's parts
    codec: Codec,
    key: bytes | None,
    value: bytes | None,
    partition: int | None,
    offset: int | None,
    as_json: bool,
) -> str:
    k = (key or b"").decode(errors="replace")
    where = f"[{partition}]@{offset}"
    if value is None:
        doc: dict[str, Any] = {"type": "tombstone"}
    else:
        try:
            record = codec.decode(value)
        except DecodeError as exc:
            doc = {"type": "undecodable", "error": str(exc)}
        else:
            if isinstance(record, ExecutionOutcomes):  # a worker's batch: a line per outcome
                return "\n".join(
                    _shown(o.key, f"{where}.{i}", _doc(o), as_json, partition, offset, i)
                    for i, o in enumerate(record.outcomes)
                )
            if isinstance(record, ExecutionBatch):  # a scheduler's batch: a line per execution
                return "\n".join(
                    _shown(k, f"{where}.{i}", doc, as_json, partition, offset, i)
                    for i, doc in enumerate(_entry_docs(codec, record))
                )
            doc = _doc(record)
    return _shown(k, where, doc, as_json, partition, offset)


def _entry_docs(codec: Codec, batch: ExecutionBatch) -> list[dict[str, Any]]:
    """Each execution of a batch as its own record would show, or why it is unreadable."""
    docs = []
    for i in range(len(batch.executions)):
        try:
            docs.append(_doc(batches.entry(codec, batch, i)))
        except DecodeError as exc:
            docs.append({"type": "undecodable", "error": str(exc)})
    return docs


def _doc(record: WireModel) -> dict[str, Any]:
    return {"type": type(record).__name__, **record_json(record)}


def _shown(  # noqa: PLR0917 - one line's parts
    k: str,
    where: str,
    doc: dict[str, Any],
    as_json: bool,
    partition: int | None,
    offset: int | None,
    entry: int | None = None,
) -> str:
    """One line: `[partition]@offset key type field=value ...`, or a JSON document; an
    outcome or an execution of a batch says which (`[p]@offset.i`, `"entry": i`)."""
    if as_json:
        place = {"partition": partition, "offset": offset}
        if entry is not None:
            place["entry"] = entry
        return json.dumps({"key": k, **place, **doc})
    body = " ".join(f"{f}={v}" for f, v in doc.items() if f != "type" and v not in (None, "", {}))
    return f"{where} {k} {doc['type']} {body}"
