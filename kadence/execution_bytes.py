"""An ExecutionRequested's bytes from the last one's: the runs of one job that one wake sends
out differ only in their execution id, nominal and due instants and `start_by`.

The scheduler writes a per-second job's 15 runs of a wake one after the other. Their Avro
single-object bytes (`Codec.encode`) are the same but for four fields, and the fields are in
this order: header, `execution_id`, then `tenant` .. `trigger` (the same), `nominal_at`,
`due_at`, then `dispatched_at` .. `concurrency_key` (the same), `start_by`. So `Templates`
keeps the constant parts of the last record it encoded in full and writes the next one of the
same job, attempt, trigger and dispatch instant from them, with the four fields written alone.

A template is cut from a record encoded in full when the next one shares its constant parts (a
one-off's single run makes none), and only when joining the parts again gives the same bytes (a
schema whose fields moved makes none: every record is then encoded in full). Anything unusual
in a run's own fields (an id that is not UTF-8, a naive instant) falls back to the full
encoding too, which gives the authoritative bytes or error.
"""

from __future__ import annotations

from typing import Any

from kadence import avro_fast
from kadence.codec import MAGIC, Codec
from kadence.models import ExecutionRequested

FIELDS = (
    "execution_id",
    "tenant",
    "job_id",
    "definition_version",
    "attempt",
    "delivery",
    "trigger",
    "nominal_at",
    "due_at",
    "dispatched_at",
    "target",
    "payload",
    "content_type",
    "timeout_ms",
    "lease_ttl_ms",
    "concurrency_key",
    "start_by",
)
"""The schema's fields in the order the template's parts assume."""
NO_START_BY = b"\x00"
START_BY = b"\x02"
"""The union branches of `start_by` (null, timestamp-millis)."""


def _string(value: str) -> bytes:
    data = value.encode()
    return avro_fast.write_long(len(data)) + data


def _constants(ex: ExecutionRequested) -> tuple[Any, ...]:
    """What a template holds of `ex`: the fields its parts are made of."""
    return (
        ex.tenant,
        ex.job_id,
        ex.definition_version,
        ex.attempt,
        ex.delivery,
        ex.trigger,
        ex.dispatched_at,
        ex.target,
        ex.payload,
        ex.content_type,
        ex.timeout_ms,
        ex.lease_ttl_ms,
        ex.concurrency_key,
    )


Encoded = tuple[tuple[Any, ...] | None, ExecutionRequested, bytes]
"""A record encoded in full: its constants (None: not made, it was another job's), the record,
its bytes."""


def _constants_of(last: Encoded) -> tuple[Any, ...]:
    """The constants of a record encoded in full, made now if they were not then."""
    return last[0] if last[0] is not None else _constants(last[1])


class Templates:
    """The last template made; `encode` gives exactly `Codec.encode`'s bytes."""

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        parsed, fingerprint = codec.schemas.current[ExecutionRequested.avro_fullname()]
        names = tuple(f["name"] for f in parsed["fields"])
        symbols = next(f["type"]["symbols"] for f in parsed["fields"] if f["name"] == "trigger")
        self.usable = names == FIELDS
        """The schema's fields are where the parts assume them (else: always in full)."""
        self._trigger = {name: avro_fast.write_long(i) for i, name in enumerate(symbols)}
        self._header = MAGIC + fingerprint
        self._key: tuple[Any, ...] | None = None
        self._middle = b""
        """`tenant` .. `trigger`."""
        self._tail = b""
        """`dispatched_at` .. `concurrency_key`."""
        self._last: Encoded | None = None
        """The last record encoded in full (and its constants, if they were made): a template
        is cut from it when the next one is of the same wake (a one-off job's single run is
        not worth one)."""
        self.made = 0
        self.used = 0

    def encode(self, ex: ExecutionRequested) -> bytes:
        if not self.usable:
            return self.codec.encode(ex)
        key = None
        last = self._last
        job_id = ex.job_id  # a run of another job (a one-off's, most often) is encoded in full
        if (self._key is not None and job_id == self._key[1]) or (
            last is not None and job_id == last[1].job_id
        ):
            key = _constants(ex)
            if key != self._key and last is not None and key == _constants_of(last):
                self._make(key, last[1], last[2])  # a second run of the same wake: a template
                self._last = None
        if key is not None and key == self._key:
            try:
                start_by = ex.start_by
                data = b"".join(
                    (
                        self._header,
                        _string(ex.execution_id),
                        self._middle,
                        avro_fast.instant_bytes(ex.nominal_at),
                        avro_fast.instant_bytes(ex.due_at),
                        self._tail,
                        NO_START_BY
                        if start_by is None
                        else START_BY + avro_fast.instant_bytes(start_by),
                    )
                )
            except Exception:  # noqa: S110 - the full encoding answers or raises EncodeError
                pass
            else:
                self.used += 1
                return data
        full = self.codec.encode(ex)
        self._last = (key, ex, full)
        return full

    def _make(self, key: tuple[Any, ...], ex: ExecutionRequested, full: bytes) -> None:
        """Cut `full` (the bytes of `ex`, whose constants are `key`) into the template's parts;
        no template when joining them again does not give `full`."""
        self._key = None
        template = self.cut(ex, full)
        if template is None:
            return
        self._key, self._middle, self._tail = key, template.middle, template.tail
        self.made += 1

    def cut(self, ex: ExecutionRequested, full: bytes) -> Template | None:
        """The template of the runs that share `ex`'s constants, cut from `full` (its bytes);
        None when the schema's fields are not where the parts assume them, `ex` is unusual, or
        joining the parts again does not give `full`."""
        if not self.usable:
            return None
        try:
            eid = _string(ex.execution_id)
            middle = b"".join(
                (
                    _string(ex.tenant),
                    _string(ex.job_id),
                    avro_fast.write_long(ex.definition_version),
                    avro_fast.write_long(ex.attempt),
                    avro_fast.write_long(ex.delivery),
                    self._trigger[ex.trigger.value],
                )
            )
            instants = avro_fast.instant_bytes(ex.nominal_at) + avro_fast.instant_bytes(ex.due_at)
            start_by = ex.start_by
            end = NO_START_BY if start_by is None else START_BY + avro_fast.instant_bytes(start_by)
        except Exception:  # an unusual record: encoded in full, no template
            return None
        at = len(self._header) + len(eid) + len(middle) + len(instants)
        tail = full[at : len(full) - len(end)]
        if self._header + eid + middle + instants + tail + end != full:
            return None
        return Template(self._header, middle, tail)


class Template:
    """The constant parts of the runs of one job, attempt, trigger and dispatch instant: a
    run's bytes are joined from them and its four own fields, as instants in ms."""

    __slots__ = ("header", "middle", "tail")

    def __init__(self, header: bytes, middle: bytes, tail: bytes) -> None:
        self.header, self.middle, self.tail = header, middle, tail

    def run(
        self, execution_id: str, nominal_ms: int, due_ms: int, start_by_ms: int | None
    ) -> bytes:
        """`Codec.encode`'s bytes of the run with these fields (the instants as their
        timestamp-millis); raises what encoding the id raises (not UTF-8)."""
        instant = avro_fast.millis_bytes
        return b"".join(
            (
                self.header,
                _string(execution_id),
                self.middle,
                instant(nominal_ms),
                instant(due_ms),
                self.tail,
                NO_START_BY if start_by_ms is None else START_BY + instant(start_by_ms),
            )
        )
