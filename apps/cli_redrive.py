"""`kadence redrive TENANT --start .. --end ..`: run a window of a tenant's dead letters again,
straight from the dead-letter topic (an operator's tool: it needs the Kafka settings, not an API
token). A dry run by default: it lists what it would replay; `--run` sends one
`ReplayDeadLetter` per execution with the letter attached, so letters the job no longer
remembers and letters of deleted jobs replay too (docs/operations.md, "Replaying topics").

Each execution is replayed once per window: its request id derives from the execution id and
the window, so running the same command again changes nothing (the scheduler remembers a job's
last 1 000 request ids)."""

from __future__ import annotations

import argparse
import hashlib
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from kadence.client import KadenceClient
from kadence.codec import Codec
from kadence.errors import InvalidInputError, KadenceError
from kadence.models import DeadLetter, ReplayDeadLetter
from kadence.settings import KadenceSettings
from kadence.topics import Topics

MAX_DEFAULT = 10_000


def add_command(sub: Any) -> None:
    p = sub.add_parser("redrive", help="replay a window of a tenant's dead letters (dry run)")
    p.add_argument("tenant")
    p.add_argument("--start", required=True, help="ISO instant: dead-lettered at or after")
    p.add_argument("--end", required=True, help="ISO instant: dead-lettered before")
    p.add_argument("--job", default=None, help="only this job's letters")
    p.add_argument("--reason", default=None, help="only this dead-letter reason")
    p.add_argument("--max", type=int, default=MAX_DEFAULT, help=f"at most (default {MAX_DEFAULT})")
    p.add_argument("--run", action="store_true", help="send the replays (default: list them)")
    p.add_argument("--json", action="store_true", help="machine-readable")


@dataclass(frozen=True)
class Window:
    tenant: str
    start: datetime
    end: datetime
    job: str | None = None
    reason: str | None = None

    def holds(self, letter: DeadLetter) -> bool:
        ex = letter.execution
        return (
            ex.tenant == self.tenant
            and (self.job is None or ex.job_id == self.job)
            and (self.reason is None or letter.reason.value == self.reason)
            and self.start <= letter.dead_lettered_at < self.end
        )

    def request_id(self, execution_id: str) -> str:
        seed = f"{execution_id}|{self.start.isoformat()}|{self.end.isoformat()}"
        return "redrive:" + hashlib.blake2b(seed.encode(), digest_size=12).hexdigest()


def plan(letters: Iterable[DeadLetter], window: Window) -> list[DeadLetter]:
    """The letters in the window, the latest per execution, oldest first."""
    latest: dict[str, DeadLetter] = {}
    for letter in letters:
        if window.holds(letter):
            latest[letter.execution.execution_id] = letter
    return sorted(latest.values(), key=lambda d: d.dead_lettered_at)


def redrive(settings: KadenceSettings, args: argparse.Namespace) -> int:
    window = Window(args.tenant, _instant(args.start), _instant(args.end), args.job, args.reason)
    if window.end <= window.start:
        raise InvalidInputError("--end must be after --start", ["end: not after start"])
    chosen = plan(_letters(settings, window), window)
    kept, left_out = chosen[: args.max], len(chosen) - min(len(chosen), args.max)
    listed = [
        {
            "dead_lettered_at": d.dead_lettered_at.isoformat(),
            "execution_id": d.execution.execution_id,
            "reason": d.reason.value,
        }
        for d in kept
    ]
    say = _quiet if args.json else print
    for row in listed:
        say(f"{row['dead_lettered_at']}\t{row['execution_id']}\t{row['reason']}")
    more = f"; {left_out} more past --max {args.max}" if left_out else ""
    if not args.run:
        say(f"{len(kept)} dead letters would be replayed{more} (dry run: nothing sent; --run)")
        if args.json:
            print(json.dumps({"letters": listed, "left_out": left_out, "sent": 0}, indent=2))
        return 0
    with KadenceClient(settings) as client:
        for i, d in enumerate(kept, 1):
            ex = d.execution
            cmd = ReplayDeadLetter(
                tenant=ex.tenant,
                job_id=ex.job_id,
                request_id=window.request_id(ex.execution_id),
                issued_at=datetime.now(UTC),
                execution_id=ex.execution_id,
                letter=ex,
            )
            client.send(cmd, ex.concurrency_key)
            if i % 100 == 0:
                say(f"... {i} of {len(kept)} sent")
    say(f"{len(kept)} replays sent{more}")
    if args.json:
        print(json.dumps({"letters": listed, "left_out": left_out, "sent": len(kept)}, indent=2))
    return 0


def _quiet(_line: str) -> None:
    """With --json, the lines for people are not printed."""


def _instant(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInputError(f"{text!r} is not an ISO instant", [f"instant: {exc}"]) from exc
    if value.tzinfo is None:
        raise InvalidInputError(f"{text!r} has no offset", ["instant: add Z or +hh:mm"])
    return value.astimezone(UTC)


def _letters(settings: KadenceSettings, window: Window) -> Iterator[DeadLetter]:
    """The dead-letter topic from the first record at `window.start` (by record time) up to
    where it ended when the read began."""
    topic = Topics(settings).dead_letter
    consumer = Consumer(
        {
            **settings.kafka_common(),
            "group.id": f"kadence-redrive-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    codec = Codec()
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        since = int(window.start.timestamp() * 1000)
        starts = consumer.offsets_for_times([TopicPartition(topic, p, since) for p in parts], 10)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in parts}
        todo = {
            tp.partition: ends[tp.partition] for tp in starts if 0 <= tp.offset < ends[tp.partition]
        }
        consumer.assign([tp for tp in starts if tp.partition in todo])
        while todo:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                raise KadenceError(f"reading {topic}: {msg.error()}")
            letter = _decoded(codec, None if msg is None else msg.value())
            if letter is not None:
                yield letter
            # the position passes transaction markers, which are never delivered as records
            at = consumer.position([TopicPartition(topic, p) for p in todo])
            todo = {tp.partition: todo[tp.partition] for tp in at if tp.offset < todo[tp.partition]}
    finally:
        consumer.close()


def _decoded(codec: Codec, value: bytes | None) -> DeadLetter | None:
    """The dead letter, or None for what Kadence cannot read (skipped, as the view does)."""
    if value is None:
        return None
    try:
        return codec.decode_as(value, DeadLetter)
    except KadenceError:
        return None
