"""`kadence tail <topic>`: follow a Kadence topic and print each record decoded for people
(or as JSON lines with --json). The topic is named by its short name (`executions`,
`history`, ...) in the configured namespace. Records that are not Kadence records are shown as
such, with the reason, never skipped silently."""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

from kadence.codec import Codec
from kadence.errors import DecodeError, InvalidInputError
from kadence.settings import KadenceSettings
from kadence.topics import ALL_TOPICS


def add_command(sub: Any) -> None:
    p = sub.add_parser("tail", help="follow a topic, records decoded for people")
    p.add_argument(
        "topic", help="short name: " + ", ".join(s.name("").lstrip(".") for s in ALL_TOPICS)
    )
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("-n", "--max", type=int, default=0, help="stop after this many (0: follow)")
    p.add_argument("--idle", type=float, default=0, help="stop after this many idle seconds")
    p.add_argument("--json", action="store_true", help="one JSON object per line")


def tail(settings: KadenceSettings, args: argparse.Namespace) -> int:
    names = {s.name("").lstrip("."): s.name(settings.namespace) for s in ALL_TOPICS}
    topic = names.get(args.topic, args.topic)
    if topic not in names.values():
        raise InvalidInputError(f"no topic {args.topic}", [f"topic: one of {', '.join(names)}"])
    consumer = Consumer(
        {
            **settings.kafka_common(),
            "group.id": f"kadence-tail-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
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
            print(
                _render(codec, m.key(), m.value(), m.partition(), m.offset(), args.json), flush=True
            )
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    return 0


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
            doc = {"type": type(record).__name__, **record.model_dump(mode="json")}
        except DecodeError as exc:
            doc = {"type": "undecodable", "error": str(exc)}
    if as_json:
        return json.dumps({"key": k, "partition": partition, "offset": offset, **doc})
    body = " ".join(f"{f}={v}" for f, v in doc.items() if f != "type" and v not in (None, "", {}))
    return f"{where} {k} {doc['type']} {body}"
