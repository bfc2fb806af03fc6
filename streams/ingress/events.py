"""What a tenant is told on its own topic, `<ns>.to.<tenant>.kadence-events`: its dead
letters, its retry circuit opening and closing, and its records Kadence refused. JSON, one
object per event with a `type`, readable with kcat under the tenant's target ACLs.

Read from Kadence's topics (pure, tested without a broker):
- `dead-letter`: every dead letter, keyed `tenant/job`;
- `scheduler-control`: a `TenantCircuit` on the partition that changed the circuit (each change
  is sent to every partition: one copy is told);
- `rejected`: a refusal whose input came from the tenant's ingress topic (the topic names the
  tenant, whatever the record claimed), or from `schedules`/`commands` keyed `tenant/job`.
  Refusals of Kadence's internal topics are the operators' (`kadence tail rejected`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.log_limit import LogLimit
from kadence.models import DeadLetter, Rejected, TenantCircuit, split_job_key
from kadence.target_topics import ingress_tenant
from kadence.topics import Topics
from streams.runtime.records import InputRecord

log = logging.getLogger(__name__)
REASON_CHARS = 2_048


@dataclass(frozen=True, slots=True)
class TenantEvent:
    tenant: str
    key: bytes
    value: bytes


class Events:
    def __init__(self, topics: Topics, codec: Codec) -> None:
        self.topics = topics
        self.codec = codec
        self.sources = (topics.dead_letter, topics.scheduler_control, topics.rejected)
        self.failed = 0
        """Records whose event could not be made (a bug): logged, counted, skipped."""
        self._limit = LogLimit()

    def of(self, record: InputRecord) -> TenantEvent | None:
        """The event `record` tells its tenant, or None (not a tenant's, or undecodable: the
        record's own reader reports that)."""
        try:
            return self._event(record)
        except DecodeError:
            return None
        except Exception as exc:  # a bug on one record: not told, said, and the next one read
            self.failed += 1
            if self._limit.allow((record.topic, type(exc))):
                log.error(
                    "cannot tell %s[%d]@%d to its tenant (%d similar lines held back)",
                    record.topic,
                    record.partition,
                    record.offset,
                    self._limit.take_held_back(),
                    exc_info=exc,
                )
            return None

    def _event(self, record: InputRecord) -> TenantEvent | None:
        if record.topic == self.topics.dead_letter:
            return self._dead(self.codec.decode_as(record.value, DeadLetter))
        if record.topic == self.topics.scheduler_control:
            control = self.codec.decode(record.value)
            if isinstance(control, TenantCircuit) and control.partition == record.partition:
                return self._circuit(control)
            return None
        if record.topic == self.topics.rejected:
            return self._refused(self.codec.decode_as(record.value, Rejected), record.key)
        return None

    @staticmethod
    def _dead(r: DeadLetter) -> TenantEvent:
        ex = r.execution
        doc = {
            "type": "dead_letter",
            "tenant": ex.tenant,
            "job_id": ex.job_id,
            "execution_id": ex.execution_id,
            "at": r.dead_lettered_at.isoformat(),
            "reason": r.reason.value,
            "attempt": ex.attempt,
            "error": None if r.last_error is None else r.last_error.model_dump(mode="json"),
        }
        return TenantEvent(ex.tenant, ex.key.encode(), _json(doc))

    @staticmethod
    def _circuit(c: TenantCircuit) -> TenantEvent:
        doc = {
            "type": "circuit_closed" if c.open_until is None else "circuit_opened",
            "tenant": c.tenant,
            "at": c.at.isoformat(),
            "open_until": None if c.open_until is None else c.open_until.isoformat(),
            "reason": c.reason,
        }
        return TenantEvent(c.tenant, c.tenant.encode(), _json(doc))

    def _refused(self, r: Rejected, key: bytes | None) -> TenantEvent | None:
        found = ingress_tenant(self.topics.settings.namespace, r.source_topic)
        if found is not None:
            tenant = found[0]
        elif r.source_topic in (self.topics.schedules, self.topics.commands) and key:
            try:
                tenant, _job = split_job_key(key.decode())
            except (UnicodeDecodeError, ValueError):
                return None
        else:
            return None
        doc = {
            "type": "rejected",
            "tenant": tenant,
            "at": r.rejected_at.isoformat(),
            "code": r.code,
            "reason": r.reason[:REASON_CHARS],
            "source_topic": r.source_topic,
            "partition": r.partition,
            "offset": r.offset,
            "key": None if key is None else key.decode(errors="backslashreplace")[:256],
        }
        return TenantEvent(tenant, (key or b"")[:256], _json(doc))


def _json(doc: Mapping[str, object]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
