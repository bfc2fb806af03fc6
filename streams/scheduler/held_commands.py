"""Commands that came before their job: what the scheduler keeps of a command for a job whose
definition it has not read yet.

A job created and at once triggered (POST /v1/jobs/{id}, then .../trigger) has its definition
on `schedules` and the trigger on `commands`: two topics, read in no set order, so the
scheduler may read the trigger first. Refusing it then would lose a run the user was told is
coming. Instead the command waits under `~held/<job key>` (in the partition's store, so in
its changelog: the input offset moves past the command only with the command stored, and a
scheduler killed meanwhile restores it), with a timer at the oldest one's end of hold. The
job's definition releases them, in the order they came; the timer refuses what is still held
then, as a command for a job that does not exist (`unknown_job`, and a `refused` history
record). Bounded: `HELD_PER_JOB` commands a job, `HELD_PER_PARTITION` a partition (counted
under `~held-count`), each list within a record; past a bound a command is refused at once.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kadence.errors import DecodeError
from streams.runtime.context import ProcessorContext
from streams.runtime.records import InputRecord
from streams.scheduler.step import Refused

HELD_PREFIX = b"~held/"
"""`~held/<job key>`: the commands waiting for that job's definition, oldest first."""
HELD_COUNT = b"~held-count"
"""How many commands wait on the partition, all jobs together."""
HELD_PER_JOB = 16
HELD_PER_PARTITION = 1_000
_VERSION = b"\x01"
_ENTRY = struct.Struct(">qqqI")
"""An entry's head: when it was held, its offset and timestamp on `commands`, its length."""
_WAKE_BYTES = 8
"""The wake time the store packs before each value (streams/runtime/store.py)."""


@dataclass(frozen=True, slots=True)
class Held:
    """A command held since `held_ms`: the input record it came in, to process again."""

    held_ms: int
    record: InputRecord


def dump(entries: list[Held]) -> bytes:
    parts = [_VERSION]
    for e in entries:
        value = e.record.value or b""
        parts.append(_ENTRY.pack(e.held_ms, e.record.offset, e.record.timestamp_ms, len(value)))
        parts.append(value)
    return b"".join(parts)


def load(raw: bytes | None, *, topic: str, partition: int, key: bytes) -> list[Held]:
    """The entries `dump` wrote; the records as they came on `topic` (their headers are not
    kept: a command's value is all its processing reads)."""
    if not raw:
        return []
    if raw[:1] != _VERSION:
        raise DecodeError(f"held commands of version {raw[:1]!r}: written by a newer build")
    out: list[Held] = []
    at = 1
    while at < len(raw):
        held_ms, offset, timestamp_ms, size = _ENTRY.unpack_from(raw, at)
        at += _ENTRY.size
        value = raw[at : at + size]
        at += size
        record = InputRecord(topic, partition, offset, key, value, [], timestamp_ms)
        out.append(Held(held_ms, record))
    return out


class HeldCommands:
    """The partition's held commands (`~held/<job key>`, `~held-count`), `hold_ms` each."""

    def __init__(self, hold_ms: int, commands_topic: str) -> None:
        self.hold_ms = hold_ms
        self.topic = commands_topic

    @staticmethod
    def owns(key: bytes) -> bool:
        return key.startswith(HELD_PREFIX)

    def hold(self, ctx: ProcessorContext, record: InputRecord, job: str, now_ms: int) -> None:
        """Keep `record`, a command for `job` this partition has no definition of, until the
        definition comes or the hold is over; Refused (`unknown_job`) when it cannot wait."""
        assert record.key is not None
        why = f"no job {job} on this partition ({ctx.partition})"
        if self.hold_ms == 0:
            raise Refused("unknown_job", why)
        count = self.count(ctx)
        entries = self._entries(ctx, record.key)
        if count >= HELD_PER_PARTITION or len(entries) >= HELD_PER_JOB:
            raise Refused(
                "unknown_job",
                f"{why}; refused at once: {count} commands already wait for definitions not "
                f"yet read here ({len(entries)} for this job; at most {HELD_PER_PARTITION} "
                f"and {HELD_PER_JOB})",
            )
        entries.append(Held(now_ms, record))
        value = dump(entries)
        room = ctx.record_limit - len(HELD_PREFIX) - len(record.key) - _WAKE_BYTES
        if len(value) > room:
            raise Refused(
                "unknown_job",
                f"{why}; refused at once: the commands waiting for it would take {len(value)} "
                f"bytes, more than a record holds ({room})",
            )
        ctx.put(HELD_PREFIX + record.key, value, entries[0].held_ms + self.hold_ms)
        self._count(ctx, count + 1)

    def release(self, ctx: ProcessorContext, key: bytes) -> list[InputRecord]:
        """The job under `key` has its definition now: the commands that waited for it, in
        the order they came, no longer held (the caller processes them)."""
        if self.count(ctx) == 0:
            return []  # the usual case: no store read per new job
        entries = self._entries(ctx, key)
        if entries:
            ctx.put(HELD_PREFIX + key, None, None)
            self._count(ctx, self.count(ctx) - len(entries))
        return [e.record for e in entries]

    def expire(self, ctx: ProcessorContext, held_key: bytes, now_ms: int) -> list[InputRecord]:
        """The timer of `held_key`: the commands whose hold is over, no longer held (the
        caller refuses them); the others wait on, with the timer at the next one's end."""
        key = held_key.removeprefix(HELD_PREFIX)
        entries = self._entries(ctx, key)
        over = [e for e in entries if e.held_ms + self.hold_ms <= now_ms]
        if not over:
            return []
        left = entries[len(over) :]
        if left:
            ctx.put(held_key, dump(left), left[0].held_ms + self.hold_ms)
        else:
            ctx.put(held_key, None, None)
        self._count(ctx, self.count(ctx) - len(over))
        return [e.record for e in over]

    def count(self, ctx: ProcessorContext) -> int:
        cached = ctx.cache.get(HELD_COUNT)
        if cached is None:
            raw = ctx.get(HELD_COUNT)
            cached = int(raw) if raw else 0
            ctx.cache[HELD_COUNT] = cached
        assert isinstance(cached, int)
        return cached

    def _count(self, ctx: ProcessorContext, count: int) -> None:
        ctx.put(HELD_COUNT, str(count).encode() if count else None, None)
        ctx.cache[HELD_COUNT] = count

    def _entries(self, ctx: ProcessorContext, key: bytes) -> list[Held]:
        raw = ctx.get(HELD_PREFIX + key)
        return load(raw, topic=self.topic, partition=ctx.partition, key=key)
