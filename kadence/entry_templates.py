"""A batch's executions read from the parts of an earlier run of the same job.

The runs of a per-second job that a worker reads differ in their execution id, nominal and due
instants and `start_by` only, for the 15 runs of each of the scheduler's wakes (the same
`dispatched_at`): kadence/execution_bytes.py writes them so. Decoding each in full (the compiled
Avro reader, then the model's checks) cost a worker 11 µs an execution, a fifth of its work.
`EntryReader` keeps, per job, the bytes of the parts that do not change (`tenant` .. `trigger`,
and `dispatched_at` .. `concurrency_key`) and the values they decoded to; a run whose bytes
have exactly those parts is made from them, reading only its four own fields.

The result is what `Codec.decode(data, (ExecutionRequested,))` gives: the parts are compared
byte for byte, and equal bytes at the same place decode to the same fields; the own fields get
the same checks (an id of 1 to 400 characters, valid UTF-8; instants the models accept);
anything else (another schema, a part that differs, a value out of bounds) is decoded in full,
which gives the authoritative model or error. A job's parts are kept from its second run read
in full (a one-off's single run is not worth them), only when they are small (PART_BYTES: a
large payload is in them, and reading it in full costs little more than comparing it);
JOBS_KEPT at most, then forgotten: a few tens of megabytes at most.
"""

from __future__ import annotations

from typing import Any

from kadence import avro_fast, fast_models
from kadence.codec import HEADER_LEN, MAGIC, Codec
from kadence.execution_bytes import FIELDS, NO_START_BY, START_BY
from kadence.models import ExecutionRequested, WireModel

JOBS_KEPT = 8_192
"""Jobs whose parts a reader keeps (cleared when full: a worker reads a few thousand jobs' runs
in a look-ahead)."""
PART_BYTES = 1_024
"""A run's bytes at most for its job's parts to be kept (its payload is among them; the parts
and the values they decode to hold them twice): JOBS_KEPT jobs keep about 16 MiB at most."""
NO_START_BY_CODE = NO_START_BY[0]
START_BY_CODE = START_BY[0]


class _Parts:
    """What does not change between a job's runs of one wake, as bytes and as values."""

    __slots__ = ("middle", "names", "tail", "values")

    def __init__(self, middle: bytes, tail: bytes, values: dict[str, Any]) -> None:
        self.middle = middle
        self.tail = tail
        self.values = values
        self.names = frozenset(values)


class EntryReader:
    """Reads executions as `Codec.decode` does, from a job's kept parts where they match."""

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        parsed, fingerprint = codec.schemas.current[ExecutionRequested.avro_fullname()]
        names = tuple(f["name"] for f in parsed["fields"])
        self.usable = names == FIELDS and fast_models.builder(ExecutionRequested) is not None
        """The schema's fields are where the parts assume them (else: every run in full)."""
        self._header = MAGIC + fingerprint
        self._jobs: dict[bytes, _Parts] = {}
        """Kept parts by the bytes of the job's tenant and job id."""
        self._seen: dict[bytes, None] = {}
        """Jobs read in full once (their next run read in full keeps its parts)."""
        self.used = 0
        """Runs made from kept parts (tests and benchmarks read it)."""

    def decode(self, data: bytes) -> WireModel:
        """`Codec.decode(data, (ExecutionRequested,))`."""
        if self.usable and data.startswith(self._header):
            made = self._from_parts(data)
            if made is not None:
                self.used += 1
                return made
        record = self.codec.decode(data, (ExecutionRequested,))
        if self.usable and type(record) is ExecutionRequested:
            self._learn(data, record)
        return record

    def _from_parts(self, data: bytes) -> ExecutionRequested | None:
        """The run in `data` made from its job's parts; None: read it in full."""
        read_long = avro_fast.read_long
        try:
            size, start = read_long(data, HEADER_LEN)
            end = start + size
            n, at = read_long(data, end)  # the tenant, then the job id: who the run is of
            n, at = read_long(data, at + n)
            parts = self._jobs.get(data[end : at + n])
            if parts is None or size <= 0 or not data.startswith(parts.middle, end):
                return None
            at = end + len(parts.middle)
            nominal, at = avro_fast.read_instant(data, at)
            due, at = avro_fast.read_instant(data, at)
            if not data.startswith(parts.tail, at):
                return None
            at += len(parts.tail)
            branch = data[at]
            if branch == NO_START_BY_CODE:
                start_by, at = None, at + 1
            elif branch == START_BY_CODE:
                start_by, at = avro_fast.read_instant(data, at + 1)
            else:
                return None
            execution_id = data[start:end].decode()
        except (IndexError, ValueError):  # UnicodeDecodeError too: read it in full
            return None
        if at != len(data) or not 0 < len(execution_id) <= 400:
            return None
        values = parts.values.copy()
        values["execution_id"] = execution_id
        values["nominal_at"] = nominal
        values["due_at"] = due
        values["start_by"] = start_by
        return fast_models.made(ExecutionRequested, values, parts.names)  # type: ignore[no-any-return]

    def _learn(self, data: bytes, ex: ExecutionRequested) -> None:
        """Keep the parts of `ex` (read in full from `data`) if its job was read before."""
        read_long = avro_fast.read_long
        try:
            size, start = read_long(data, HEADER_LEN)
            end = start + size
            n, at = read_long(data, end)
            n, at = read_long(data, at + n)
            who = data[end : at + n]
            if who not in self._jobs and who not in self._seen:
                if len(self._seen) >= JOBS_KEPT:
                    self._seen.clear()
                self._seen[who] = None
                return
            at += n
            for _ in range(4):  # definition_version, attempt, delivery, trigger
                _, at = read_long(data, at)
            middle = data[end:at]
            _, at = read_long(data, at)  # nominal_at
            _, at = read_long(data, at)  # due_at
        except (IndexError, ValueError):
            return
        start_by = ex.start_by
        last = NO_START_BY if start_by is None else START_BY + avro_fast.instant_bytes(start_by)
        if not data.endswith(last) or len(data) - len(last) < at or len(data) > PART_BYTES:
            return
        if len(self._jobs) >= JOBS_KEPT:
            self._jobs.clear()
        self._jobs[who] = _Parts(middle, data[at : len(data) - len(last)], dict(ex))
