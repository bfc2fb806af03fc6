"""Where one record of a tenant's ingress topic goes: pure, so it is tested without a broker.

A tenant produces to `<ns>.from.<tenant>.schedules` and `<ns>.from.<tenant>.commands` (Kafka's
ACLs let it write only its own two); the tenant is taken from the topic's name, never from the
record. A record that names another tenant, a control record that only Kadence may say, or
anything that does not decode is refused: a `rejected` record says why, and nothing reaches
Kadence's topics. What is accepted is written where the SDK would write it: Avro, keyed by the
job, on the partition of its routing key. With an `Admission` (the ingress process has one),
the API's quotas apply (streams/ingress/quotas.py) and a delete is one tombstone where the job
lives when that is known (streams/ingress/placement.py); without, no quota and a tombstone on
every partition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kadence import rejects
from kadence.client import routing_key
from kadence.codec import Codec
from kadence.errors import DecodeError, KadenceError, RecordTooLargeError
from kadence.headers import Headers, headers_for
from kadence.models import (
    ScheduleDefinition,
    WireModel,
    job_key,
    split_job_key,
)
from kadence.models.base import IDENT_RE
from kadence.models.commands import kadence_only
from kadence.partitioning import partition_for
from kadence.pools import unknown_pool
from kadence.quotas import QuotaExceededError
from kadence.sizing import check_fits
from kadence.target_topics import ingress_tenant
from kadence.topics import COMMANDS, Topics
from streams.ingress.admission import Admission
from streams.ingress.quotas import QuotaUnknownError
from streams.runtime.records import InputRecord
from streams.runtime.reject import why_refused

CONCURRENCY_KEY_HEADER = "kadence-concurrency-key"
"""A command for a job with a concurrency key names it here (the job's partition follows it),
as the SDK's `send(command, concurrency_key)` does."""
PROCESSOR = "ingress"


@dataclass(frozen=True, slots=True)
class Out:
    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers


class IngressRefusedError(KadenceError):
    """A tenant's record Kadence will not take: `code` goes into the `rejected` record."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code


@dataclass(frozen=True)
class Router:
    topics: Topics
    partitions: int
    codec: Codec
    admission: Admission | None = None
    """Quotas and delete placement (None: neither, as in the route's own tests)."""

    def route(self, record: InputRecord, now_ms: int) -> list[Out]:
        """The records one ingress record becomes: Kadence's own, or one `rejected`. Whatever
        the record holds, this returns: a tenant's record must never stop the ingress."""
        try:
            return self._route(record.topic, record.key, record.value, record.headers)
        except (IngressRefusedError, DecodeError, RecordTooLargeError) as exc:
            code, reason = exc.code, str(exc)
        except Exception as exc:  # a bug on one record: refused, said, and the next one read
            code, reason = why_refused(record, exc)
        k, v, h = rejects.rejected_record(
            topic=record.topic, partition=record.partition, offset=record.offset,
            key=record.key, value=record.value, headers=record.headers, code=code,
            reason=reason, processor=PROCESSOR, now_ms=now_ms, codec=self.codec,
            to_topic=self.topics.rejected,
        )  # fmt: skip
        return [Out(self.topics.rejected, record.partition % self.partitions, k, v, h)]

    def _route(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, str | bytes | None]],
    ) -> list[Out]:
        found = ingress_tenant(self.topics.settings.namespace, topic)
        if found is None:
            raise IngressRefusedError("not_ingress", f"{topic} is not a tenant's ingress topic")
        tenant, kind = found
        if kind == "schedules":
            return self._definition(tenant, key, value)
        return self._command(tenant, key, value, headers)

    def _definition(self, tenant: str, key: bytes | None, value: bytes | None) -> list[Out]:
        if value is None:  # a delete: the job's key names it
            job_id = self._own_key(tenant, key)
            slot = job_key(tenant, job_id)
            parts = range(self.partitions) if self.admission is None else self._deleted(slot)
            return [Out(self.topics.schedules, p, slot.encode(), None, []) for p in parts]
        definition = self.codec.decode(value, (ScheduleDefinition,), ScheduleDefinition)
        assert isinstance(definition, ScheduleDefinition)
        if definition.actor is not None:  # a tenant's record cannot say who wrote it
            definition = definition.model_copy(update={"actor": None})
        self._same_tenant(tenant, definition.tenant, key, definition.key)
        unknown = unknown_pool(definition.target, self.topics.pool_executions)
        if unknown is not None:
            raise IngressRefusedError("unknown_pool", unknown)
        partition = partition_for(definition.routing_key, self.partitions)
        out = self._out(self.topics.schedules, partition, definition)
        if self.admission is not None:
            _admitted(lambda a: a.quotas.definition(definition), self.admission)
            self.admission.placement.routed(definition.key, partition)
        return [out]

    def _command(
        self,
        tenant: str,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, str | bytes | None]],
    ) -> list[Out]:
        command = COMMANDS.decode(self.codec, value)
        if kadence_only(command):
            raise IngressRefusedError(
                "control_record",
                f"{type(command).__name__} is written by Kadence's own processes only; a "
                "tenant's ingress takes definitions and commands",
            )
        if getattr(command, "actor", None) is not None:  # nor who sent a command
            command = command.model_copy(update={"actor": None})
        said_tenant, job_id = getattr(command, "tenant", ""), getattr(command, "job_id", "")
        self._same_tenant(tenant, said_tenant, key, f"{said_tenant}/{job_id}")
        concurrency_key = _header(headers, CONCURRENCY_KEY_HEADER)
        if concurrency_key is not None and not IDENT_RE.fullmatch(concurrency_key):
            raise IngressRefusedError(
                "invalid_header", f"{CONCURRENCY_KEY_HEADER} is not an identifier"
            )
        route = routing_key(tenant, job_id, concurrency_key)
        out = self._out(self.topics.commands, partition_for(route, self.partitions), command)
        if self.admission is not None:
            _admitted(lambda a: a.quotas.command(command), self.admission)
        return [out]

    def _deleted(self, slot: str) -> list[int]:
        assert self.admission is not None
        self.admission.quotas.deleted(slot)
        return self.admission.placement.tombstones(slot)

    def _out(self, topic: str, partition: int, record: WireModel) -> Out:
        value = self.codec.encode(record)
        headers = headers_for(record, self.codec.schema_fingerprint(type(record)))
        key = str(getattr(record, "key", "")).encode()
        check_fits(topic, key, value, headers)
        return Out(topic, partition, key, value, headers)

    @staticmethod
    def _own_key(tenant: str, key: bytes | None) -> str:
        try:
            said, job_id = split_job_key((key or b"").decode())
        except (UnicodeDecodeError, ValueError):
            raise IngressRefusedError(
                "invalid_key", "a delete (null value) needs the key tenant/job_id"
            ) from None
        if said != tenant:
            raise IngressRefusedError("foreign_tenant", _foreign(tenant, said))
        return job_id

    @staticmethod
    def _same_tenant(tenant: str, said: str, key: bytes | None, expected_key: str) -> None:
        if said != tenant:
            raise IngressRefusedError("foreign_tenant", _foreign(tenant, said))
        if key is not None and key != expected_key.encode():
            raise IngressRefusedError("key_mismatch", f"record key {key!r} is not {expected_key}")


def _admitted(check: Callable[[Admission], None], admission: Admission) -> None:
    """`check` passed, or the quota's refusal as the router's."""
    try:
        check(admission)
    except (QuotaExceededError, QuotaUnknownError) as exc:
        raise IngressRefusedError(exc.code, str(exc)) from None


def _foreign(tenant: str, said: str) -> str:
    return (
        f"the record names tenant {said!r}, but this is tenant {tenant!r}'s ingress topic: a "
        "tenant writes only its own jobs"
    )


def _header(headers: Sequence[tuple[str, str | bytes | None]], name: str) -> str | None:
    for k, v in headers:
        if k.strip().lower() == name and v is not None:
            return v.decode(errors="replace") if isinstance(v, bytes) else v
    return None
