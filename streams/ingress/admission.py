"""What the ingress asks the query view once per batch, for the two decisions that need it:
the jobs quota (streams/ingress/quotas.py: does a definition create a job, how many jobs has
its tenant) and where a delete goes (streams/ingress/placement.py). The batch's records are
looked at before they are routed, one question is sent for all of them
(streams/ingress/lookup.py), and the router then decides each record in memory.

A batch with no definition and no delete asks nothing; a view that does not answer is
logged once per `lookup.BACKOFF_S` and each decision falls back as its module says.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from kadence.codec import Codec
from kadence.models import ScheduleDefinition, split_job_key
from kadence.target_topics import ingress_tenant
from streams.ingress.lookup import Answer, JobLookup, ViewUnavailableError
from streams.ingress.placement import Placement
from streams.ingress.quotas import IngressQuotas

log = logging.getLogger(__name__)


@dataclass
class Admission:
    namespace: str
    codec: Codec
    quotas: IngressQuotas
    placement: Placement
    lookup: JobLookup
    unanswered: int = 0
    """Batches the view did not answer."""
    _told: str = ""
    """The last reason logged (logged again only when it changes)."""

    def prepare(self, records: Sequence[tuple[str, bytes | None, bytes | None]]) -> None:
        """Ask the view what routing these (topic, key, value) records needs to know."""
        definitions: list[tuple[str, str]] = []
        deletes: list[str] = []
        for topic, key, value in records:
            found = ingress_tenant(self.namespace, topic)
            if found is None or found[1] != "schedules":
                continue
            job = self._job_key(found[0], key, value)
            if job is None:
                continue  # the router refuses it
            if value is None:
                deletes.append(job)
            else:
                definitions.append((found[0], job))
        jobs, counts = self.quotas.question(definitions)
        asked_deletes = self.placement.question(deletes)
        jobs |= asked_deletes
        answer: Answer | None = None
        why = ""
        if jobs or counts:
            try:
                answer = self.lookup.ask(sorted(jobs), counts)
            except ViewUnavailableError as exc:
                why = str(exc)
                self.unanswered += 1
                if why != self._told:
                    log.warning("ingress: %s; deletes go to every partition meanwhile", why)
            self._told = why
        self.quotas.answered(answer, why)
        self.placement.answered(answer, asked_deletes)

    def _job_key(self, tenant: str, key: bytes | None, value: bytes | None) -> str | None:
        """The job a schedules record is about: its key, or (keyless) its definition's."""
        if key is not None:
            try:
                said, job_id = split_job_key(key.decode())
            except (UnicodeDecodeError, ValueError):
                return None
            return f"{said}/{job_id}" if said == tenant else None
        if value is None:
            return None
        try:
            definition = self.codec.decode_as(value, ScheduleDefinition)
        except Exception:  # whatever it is, the router refuses it; looking ahead must not stop
            return None
        return definition.key if definition.tenant == tenant else None
